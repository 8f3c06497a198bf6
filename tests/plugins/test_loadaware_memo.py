"""LoadAwareScheduling's verdicts and scores kept by row per class of pods (``app.plugins.loadaware.rowmemo``, issue 47)
give the answers of working every node out again, whatever happens to the nodes in between.

Random sequences of events (NodeMetrics reported, aged or lost, nodes removed and added back, their threshold
annotations changed, pods assigned and deleted, the clock moving) are applied to one plugin; after each step
Filter and Score of several classes of incoming pods (plain, bigger, prod, a replica of the first) over every
node, and over a rotating window of them, are compared with the same plugin's answers with the memos turned
off. A memo whose rows are not worked out again after a write (``RowMemos.mark`` left out of ``_flush``), or
kept across a change of the table's rows, answers with a node's old verdict or score and fails here.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.plugins.loadaware.rowmemo import RowMemo, RowMemos
from app.sources.events import EventType
from tests.plugins.test_loadaware import ALLOC_96, NOW, PROD_MAX, Env, metric_obj, node_obj, pod_obj

NODES = tuple(f"n{i}" for i in range(6))

_event = st.one_of(
    st.tuples(
        st.just("metric"),
        st.sampled_from(NODES),
        st.one_of(st.none(), st.sampled_from([-400.0, -179.5, -60.0, 0.0])),  # seconds from now; None: no time
        st.integers(0, 95),  # cpu usage, cores of 96
        st.integers(0, 500),  # memory usage, GiB of 512
    ),
    st.tuples(st.just("drop_metric"), st.sampled_from(NODES)),
    st.tuples(st.just("drop_node"), st.sampled_from(NODES)),
    st.tuples(st.just("add_node"), st.sampled_from(NODES)),
    st.tuples(st.just("thresholds"), st.sampled_from(NODES), st.sampled_from([None, 30, 65, 90])),
    st.tuples(st.just("pod"), st.sampled_from(NODES), st.integers(1, 40), st.booleans()),
    st.tuples(st.just("delete_pod"), st.integers(0, 30)),
    st.tuples(st.just("tick"), st.sampled_from([0.5, 30.0, 179.5, 400.0])),
)

INCOMING = (
    pod_obj("plain", req={"cpu": "4", "memory": "8Gi"}),
    pod_obj("plain-replica", req={"cpu": "4", "memory": "8Gi"}),  # same class as the first: shares its memos
    pod_obj("big", req={"cpu": "30", "memory": "200Gi"}, lim={"cpu": "40"}),
    pod_obj("prod", req={"cpu": "8", "memory": "16Gi"}, priority=PROD_MAX),
)


def _without_memos(env: Env, pod: dict[str, Any], names: list[str]) -> tuple[Any, Any]:
    plugin = env.plugin
    memos = plugin._memos
    plugin._memos = _NoMemos()
    try:
        return env.answers(pod, names)
    finally:
        plugin._memos = memos


class _NoMemos(RowMemos):
    """Never a memo: every call works its nodes out."""

    def get(self, *args: Any, **kwargs: Any) -> RowMemo | None:
        return None


ARGS = (
    {"resourceWeights": {"cpu": 1, "memory": 1}},
    {"resourceWeights": {"cpu": 1, "memory": 1}, "enableScheduleWhenNodeMetricsExpired": True},
    {"resourceWeights": {"cpu": 2, "memory": 1}, "prodUsageThresholds": {"cpu": 50}, "scoreAccordingProdUsage": True},
    {"resourceWeights": {"cpu": 1, "memory": 1}, "dominantResourceWeight": 1, "filterExpiredNodeMetrics": False},
)


@settings(max_examples=250, deadline=None)
@given(events=st.lists(_event, max_size=30), args=st.sampled_from(ARGS))
def test_memos_give_the_answers_of_working_every_node_out(events: list[tuple[Any, ...]], args: dict[str, Any]) -> None:
    env = Env({**args, "usageThresholds": {"cpu": 65, "memory": 95}})
    for name in NODES:
        env.apply("Node", node_obj(name, ALLOC_96))
    present = set(NODES)
    pods: list[dict[str, Any]] = []
    for step, event in enumerate(events):
        kind = event[0]
        if kind == "metric":
            _, name, offset, cores, gib = event
            update = None if offset is None else env.now - NOW + offset
            usage = {"cpu": str(cores), "memory": f"{gib}Gi"}
            env.apply("NodeMetric", metric_obj(name, update=update, usage=usage))
        elif kind == "drop_metric":
            env.apply("NodeMetric", metric_obj(event[1]), EventType.DELETED)
        elif kind == "drop_node" and event[1] in present:
            env.apply("Node", node_obj(event[1], ALLOC_96), EventType.DELETED)
            present.discard(event[1])
        elif kind in ("add_node", "thresholds") and (kind == "thresholds" or event[1] not in present):
            annotations = None
            if kind == "thresholds" and event[2] is not None:
                annotations = {
                    "scheduling.koordinator.sh/usage-thresholds": f'{{"usageThresholds": {{"cpu": {event[2]}}}}}'
                }
            env.apply("Node", node_obj(event[1], ALLOC_96, annotations), EventType.MODIFIED)
            present.add(event[1])
        elif kind == "pod" and event[1] in present:
            _, node, cores, prod = event
            req = {"cpu": str(cores), "memory": "1Gi"}
            pod = pod_obj(f"p{len(pods)}", node=node, req=req, priority=PROD_MAX if prod else None)
            env.apply("Pod", pod)
            pods.append(pod)
        elif kind == "delete_pod" and event[1] < len(pods):
            env.apply("Pod", pods[event[1]], EventType.DELETED)
        elif kind == "tick":
            env.now += event[1]
        names = [n for n in NODES if n in present]
        window = names[step % 3 :] + names[: step % 3]  # kube-scheduler's windows start anywhere
        for pod in INCOMING:
            for batch in (names, window[:4]):
                if len(batch) < 2:
                    continue
                failures, scores = env.answers(pod, batch)
                want_failures, want_scores = _without_memos(env, pod, batch)
                assert failures == want_failures, (pod["metadata"]["name"], batch)
                assert np.array_equal(scores, want_scores), (pod["metadata"]["name"], batch)


def test_a_class_seen_twice_is_answered_from_its_memo_and_each_write_is_worked_out_again() -> None:
    """The second pod of a class gets its memos; a bind on one node works out that row alone; a node added
    drops the memos."""
    env = Env({"resourceWeights": {"cpu": 1, "memory": 1}})
    for name in NODES:
        env.apply("Node", node_obj(name, ALLOC_96))
        env.apply("NodeMetric", metric_obj(name, update=-10, usage={"cpu": "50", "memory": "64Gi"}))
    plugin = env.plugin
    names = list(NODES)
    calls: list[int] = []  # rows per call of the rows function
    ones: list[int] = []  # rows given to the one-row function
    real = plugin._filter_codes

    def counting(bound: Any, v: int) -> Any:
        compute, compute_one = real(bound, v)

        def wrapped(rows: Any) -> Any:
            calls.append(len(rows))
            return compute(rows)

        def wrapped_one(row: int) -> Any:
            ones.append(row)
            return compute_one(row)

        return wrapped, wrapped_one

    plugin._filter_codes = counting  # type: ignore[method-assign]
    first = env.answers(INCOMING[0], names)
    assert len(plugin._memos) == 0 and calls == []  # seen once: no memo, the plain path
    second = env.answers(INCOMING[1], names)  # a replica: its class's memos are made
    assert len(plugin._memos) == 2  # filter and score
    assert calls == [env.cache.table.capacity]  # every row of the table, once
    assert first[0] == second[0] and np.array_equal(first[1], second[1])
    # 50 of 96 cores in use, a 4-core pod: 56 % of the 65 % threshold everywhere; then n2 gets 14 cores more
    assert first[0] == {}
    env.apply("Pod", pod_obj("p", node="n2", req={"cpu": "14"}))
    failures, scores = env.answers(INCOMING[0], names)
    assert calls[1:] == [] and ones == [env.cache.table.row("n2")]  # n2's row alone worked out again, by itself
    assert set(failures) == {2} and failures[2].message == "node(s) cpu usage exceed threshold"
    assert scores[2] < scores[0]
    env.apply("Node", node_obj("n9", ALLOC_96))  # the rows move: every memo dropped
    assert env.answers(INCOMING[0], names)[0] == failures
    assert len(plugin._memos) == 0


def test_row_memos_keep_the_newest_classes_and_drop_all_with_the_generation() -> None:
    memos = RowMemos(limit=2)
    made: list[str] = []

    def compute_for(key: str) -> Any:
        made.append(key)
        return lambda rows: np.full(len(rows), ord(key[0]), dtype=np.int64), None

    rows = np.array([0, 2], dtype=np.int64)
    memo: RowMemo | None = None
    for key in ("a", "a", "b", "b", "c", "c"):
        memo = memos.get(key, 1, 3, functools.partial(compute_for, key))
    assert made == ["a", "b", "c"] and len(memos) == 2
    assert memo is not None and memo.take(rows).tolist() == [ord("c")] * 2
    assert memos.get("a", 1, 3, lambda: compute_for("a")) is None  # "a" was dropped: seen once again
    assert memos.get("c", 2, 3, lambda: compute_for("c")) is None  # the generation moved: all dropped
    # marked rows: a few one by one with the one-row function, many with the rows function
    seen: list[Any] = []

    def rows_function(rows: Any) -> Any:
        seen.append(rows.tolist())
        return rows * 10

    def one_row_function(row: int) -> int:
        seen.append(row)
        return row * 10

    memo = RowMemo(rows_function, 20, None, one_row_function)
    assert memo.take(np.array([3, 1])).tolist() == [30, 10] and seen == [list(range(20))]
    memo.stale.update([4, 5])
    assert memo.take(np.array([5, 4, 0])).tolist() == [50, 40, 0] and sorted(seen[1:]) == [4, 5]
    memo.stale.update(range(10))
    assert memo.take(np.array([9])).tolist() == [90] and sorted(seen[-1]) == list(range(10))
    with pytest.raises(ValueError):
        RowMemos(limit=0)
    with pytest.raises(ValueError):
        RowMemo(lambda rows: rows, -1)


@settings(max_examples=300, deadline=None)
@given(
    alloc=st.lists(st.integers(0, 2**63 - 1), min_size=2, max_size=2),
    used=st.lists(st.integers(0, 2**62), min_size=2, max_size=2),
    estimate=st.lists(st.integers(-(2**62), 2**62), min_size=2, max_size=2),
    state=st.sampled_from([0, 1, 2]),
    dominant=st.sampled_from([0, 1, 3]),
)
def test_one_row_score_equals_the_rows_score_in_int64(
    alloc: list[int], used: list[int], estimate: list[int], state: int, dominant: int
) -> None:
    """The one-row score in Python ints equals the numpy batch score, wrapping included (extreme values fall back)."""
    env = Env({"resourceWeights": {"cpu": 3, "memory": 1}, "dominantResourceWeight": dominant})
    plugin = env.plugin
    table = env.cache.table
    row = table.row("decoy-node")
    assert row is not None
    table.column("la:alloc")[row] = alloc
    table.column("la:plain")[row] = used
    table.column("la:state")[row] = state
    vector = np.array(estimate, dtype=np.int64)
    with np.errstate(over="ignore"):
        want = int(plugin._score_rows(np.array([row], dtype=np.int64), "la:plain", vector, None)[0])
    with np.errstate(over="ignore"):
        assert plugin._score_row(row, "la:plain", vector) == want
