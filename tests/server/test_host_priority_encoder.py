"""HostPriorityEncoder (app/server/wire.py) writes exactly the bytes orjson writes for the list of dicts.

``/prioritize`` answers through the encoder; kube-scheduler reads the answer as a HostPriorityList
(``[{"Host": ..., "Score": ...}]``). A hypothesis property test compares the encoder's bytes with
``orjson.dumps`` of the dicts for arbitrary node names (quotes, backslashes, control characters, non-ASCII)
and scores (in and out of 0..10), through the name table's refills.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.server.wire import HostPriorityEncoder

names = st.lists(st.text(max_size=12), max_size=30)


def dicts(ns: list[str], scores: list[int]) -> bytes:
    return orjson.dumps([{"Host": n, "Score": s} for n, s in zip(ns, scores, strict=True)])


@settings(max_examples=300, deadline=None)
@given(data=st.data(), ns=names, max_names=st.integers(1, 8))
def test_encoder_bytes_equal_orjson_of_dicts(data: st.DataObject, ns: list[str], max_names: int) -> None:
    encoder = HostPriorityEncoder(max_names=max_names)
    for score_range in ((0, 10), (-3, 120)):  # the pre-encoded 0..10, then scores outside it too
        scores = data.draw(st.lists(st.integers(*score_range), min_size=len(ns), max_size=len(ns)))
        assert orjson.dumps(encoder.encode(ns, scores)) == dicts(ns, scores)
        assert orjson.dumps([encoder.encode(ns, scores)]) == b"[" + dicts(ns, scores) + b"]"


def test_encoder_table_is_bounded_and_lengths_must_match() -> None:
    encoder = HostPriorityEncoder(max_names=3)
    for i in range(10):
        assert orjson.dumps(encoder.encode([f"n{i}"], [i])) == dicts([f"n{i}"], [i])
        assert len(encoder._entries) <= 3
    assert orjson.dumps(encoder.encode([], [])) == b"[]"
    with pytest.raises(ValueError, match="2 names but 1 scores"):
        encoder.encode(["a", "b"], [1])


def test_encoder_table_stays_small() -> None:
    """The kept entries are compact bytes: 5,000 node names (11 entries each) hold under 8 MB (bytes returned by
    orjson.dumps keep their output buffer's allocation: one per entry held ~180 MB for 5,000 nodes)."""
    import tracemalloc

    names = [f"node-{i:05d}" for i in range(5000)]
    tracemalloc.start()
    try:
        encoder = HostPriorityEncoder()
        encoder.encode(names, [3] * len(names))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(encoder._entries) == 5000
    assert held < 8 * 2**20, held
