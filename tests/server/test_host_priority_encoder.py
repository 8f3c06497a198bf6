"""HostPriorityEncoder (app/server/wire.py) writes exactly the bytes orjson writes for the list of dicts.

``/prioritize`` answers through the encoder; kube-scheduler reads the answer as a HostPriorityList
(``[{"Host": ..., "Score": ...}]``). A hypothesis property test compares the encoder's bytes with
``orjson.dumps`` of the dicts for arbitrary node names (quotes, backslashes, control characters, non-ASCII)
and scores (in and out of 0..10), through the name table's refills.
"""

from __future__ import annotations

import numpy as np
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


@settings(max_examples=200, deadline=None)
@given(data=st.data(), ns=st.lists(st.text(max_size=12), max_size=30, unique=True))
def test_encoder_by_row_bytes_equal_orjson_of_dicts(data: st.DataObject, ns: list[str]) -> None:
    """Entries found by node-table row (``rows`` and ``generation`` given) are the same bytes."""
    encoder = HostPriorityEncoder(max_names=4)
    rows = data.draw(st.permutations(range(len(ns))))
    for generation in (1, 1, 2):  # filled, then found by row, then emptied and refilled
        scores = data.draw(st.lists(st.integers(-3, 120), min_size=len(ns), max_size=len(ns)))
        assert orjson.dumps(encoder.encode(ns, scores, rows, generation)) == dicts(ns, scores)


def test_encoder_by_row_forgets_rows_when_the_generation_moves() -> None:
    """A row freed and given to another node (the table's generation moved) answers with the new name."""
    encoder = HostPriorityEncoder()
    assert orjson.dumps(encoder.encode(["a", "b"], [1, 2], [0, 1], 7)) == dicts(["a", "b"], [1, 2])
    assert orjson.dumps(encoder.encode(["c", "b"], [3, 2], [0, 1], 8)) == dicts(["c", "b"], [3, 2])
    assert orjson.dumps(encoder.encode(["b", "c"], [4, 5], [1, 0], 8)) == dicts(["b", "c"], [4, 5])
    with pytest.raises(ValueError, match="2 names but 1 rows"):
        encoder.encode(["a", "b"], [1, 2], [0], 8)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    pool=st.lists(st.text(max_size=8), min_size=1, max_size=12, unique=True),
    max_names=st.integers(1, 8),
    rounds=st.integers(1, 6),
)
def test_encode_rows_bytes_equal_orjson_of_dicts_as_rows_change_hands(
    data: st.DataObject, pool: list[str], max_names: int, rounds: int
) -> None:
    """``encode_rows`` picks entries by row and score from a table it refills per generation: a row given to
    another name in a later generation answers with that name's bytes, never the old one's."""
    encoder = HostPriorityEncoder(max_names=max_names)
    generation = 0
    rows_of: dict[str, int] = {}
    for i in range(rounds):
        if i == 0 or data.draw(st.booleans()):
            generation += 1  # the name <-> row mapping moved: rows may now belong to other names
            # one name per row within a generation (as the node table keeps them), rows sparse
            rows_of = dict(zip(pool, data.draw(st.permutations(range(0, 3 * len(pool), 3))), strict=True))
        ns = data.draw(st.lists(st.sampled_from(pool), max_size=15))
        rows = np.array([rows_of[n] for n in ns], dtype=np.int64)
        high = data.draw(st.sampled_from([10, 10, 120]))  # mostly the pre-encoded 0..10
        scores = data.draw(st.lists(st.integers(-2 if high > 10 else 0, high), min_size=len(ns), max_size=len(ns)))
        got = encoder.encode_rows(ns, rows, np.array(scores, dtype=np.int64), generation)
        assert orjson.dumps(got) == dicts(ns, scores)
        with pytest.raises(ValueError):
            encoder.encode_rows(ns, rows, np.zeros(len(ns) + 1, dtype=np.int64), generation)
