"""A watch body is split into lines on its bytes wherever its pieces break, blank lines (empty or ASCII
whitespace only) are skipped, and each line is decoded once: the events come out as the server wrote them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.client.errors import InvalidResponse
from app.client.watch import WatchEvent, decode_stream

#: Every byte bytes.strip() removes (ASCII whitespace), and one it does not (NBSP in UTF-8 is not blank).
_BLANKS = st.lists(st.sampled_from([b"", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"  \r"]), max_size=3).map(b"".join)


async def _pieces(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    last = 0
    for cut in sorted(set(cuts)):
        yield data[last:cut]
        last = cut
    yield data[last:]


async def _decode(data: bytes, cuts: list[int]) -> list[WatchEvent]:
    return [e async for e in decode_stream(_pieces(data, cuts))]


_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
        st.dictionaries(
            st.text(max_size=5), st.one_of(st.text(max_size=8), st.integers(-(2**63), 2**63 - 1)), max_size=3
        ),
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(_EVENTS, st.lists(_BLANKS, min_size=6, max_size=6), st.lists(st.integers(0, 400), max_size=6), st.booleans())
def test_events_come_out_whole_wherever_the_pieces_break(
    events: list[tuple[str, dict[str, object]]], blanks: list[bytes], cuts: list[int], final_newline: bool
) -> None:
    lines = [blanks[-1]]
    for (etype, obj), blank in zip(events, blanks, strict=False):
        lines.append(orjson.dumps({"type": etype, "object": obj}))
        lines.append(blank)
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")
    got = asyncio.run(_decode(data, [c for c in cuts if c <= len(data)]))
    assert got == [WatchEvent(t, o) for t, o in events]


async def test_a_line_of_whitespace_is_skipped_and_anything_else_is_decoded() -> None:
    data = b'\r\n  \n\t\x0b\x0c\n{"type":"ADDED","object":{"a":1}}\r\n \n{"type":"DELETED","object":{}}'
    assert await _decode(data, [3, 17]) == [WatchEvent("ADDED", {"a": 1}), WatchEvent("DELETED", {})]
    # a non-ASCII space is not blank: the line is handed to the decoder, which refuses it
    with pytest.raises(InvalidResponse):
        await _decode(b"\xc2\xa0\n", [])
