"""FragmentationAware's per-shape growth memo (:mod:`app.plugins.deviceshare.deltamemo`): a value is
reused only while its row's GPU stamp, free cpu and free memory hold, and the plugin's memoised scores
equal a recomputation from scratch after every kind of change."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.plugins.deviceshare.deltamemo import DeltaMemo
from tests.plugins.test_deviceshare import device, node, pod, setup
from tests.plugins.test_deviceshare_fgd_equivalence import _reference_scores

I64 = npt.NDArray[np.int64]


class _Counting:
    """``compute`` callback: value = 1000 * call number + position; records the positions asked."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def __call__(self, pos: I64) -> npt.NDArray[np.float64]:
        self.calls.append(pos.tolist())
        return 1000.0 * len(self.calls) + pos.astype(np.float64)


def _i64(*values: int) -> I64:
    return np.array(values, dtype=np.int64)


def test_values_are_reused_while_stamp_cpu_and_memory_hold() -> None:
    memo, compute = DeltaMemo(), _Counting()
    table, workload = object(), object()
    rows, stamps, cpu, mem = _i64(4, 0, 2), _i64(7, 8, 9), _i64(100, 200, 300), _i64(10, 20, 30)
    first = memo.values(table, workload, "k", rows, stamps, cpu, mem, compute)
    assert compute.calls == [[0, 1, 2]] and first.tolist() == [1000.0, 1001.0, 1002.0]
    again = memo.values(table, workload, "k", rows, stamps, cpu, mem, compute)
    assert compute.calls == [[0, 1, 2]] and again.tolist() == first.tolist()
    assert (memo.computed, memo.reused) == (3, 3)
    # the rows in another order, and a subset: still reused, each value at its row
    assert memo.values(
        table, workload, "k", _i64(2, 4), _i64(9, 7), _i64(300, 100), _i64(30, 10), compute
    ).tolist() == [
        1002.0,
        1000.0,
    ]
    assert len(compute.calls) == 1


def test_a_changed_stamp_cpu_or_memory_recomputes_that_row_only() -> None:
    memo, compute = DeltaMemo(), _Counting()
    table, workload = object(), object()
    rows, stamps, cpu, mem = _i64(0, 1, 2), _i64(1, 1, 1), _i64(100, 100, 100), _i64(10, 10, 10)
    memo.values(table, workload, "k", rows, stamps, cpu, mem, compute)
    got = memo.values(table, workload, "k", rows, _i64(1, 2, 1), cpu, mem, compute)  # row 1 rewritten
    assert compute.calls[-1] == [1] and got.tolist() == [1000.0, 2001.0, 1002.0]
    got = memo.values(table, workload, "k", rows, _i64(1, 2, 1), _i64(100, 100, 99), mem, compute)  # cpu of row 2
    assert compute.calls[-1] == [2] and got.tolist() == [1000.0, 2001.0, 3002.0]
    got = memo.values(table, workload, "k", rows, _i64(1, 2, 1), _i64(100, 100, 99), _i64(11, 10, 10), compute)
    assert compute.calls[-1] == [0] and got.tolist() == [4000.0, 2001.0, 3002.0]  # memory of row 0
    assert len(compute.calls) == 4


def test_keys_are_separate_and_a_new_table_or_workload_empties_the_memo() -> None:
    memo, compute = DeltaMemo(), _Counting()
    table, workload = object(), object()
    args = (_i64(0, 1), _i64(1, 1), _i64(5, 5), _i64(6, 6))
    memo.values(table, workload, "a", *args, compute)
    memo.values(table, workload, "b", *args, compute)  # another shape: computed on its own
    assert len(compute.calls) == 2
    memo.values(table, workload, "a", *args, compute)
    assert len(compute.calls) == 2
    memo.values(table, object(), "a", *args, compute)  # a rebuilt workload
    assert len(compute.calls) == 3
    memo.values(object(), object(), "a", *args, compute)  # a new table (stamps restart)
    assert len(compute.calls) == 4


def test_least_recently_used_shape_is_dropped_past_the_bound() -> None:
    memo, compute = DeltaMemo(max_shapes=2), _Counting()
    table, workload = object(), object()
    args = (_i64(0), _i64(1), _i64(5), _i64(6))
    memo.values(table, workload, "a", *args, compute)
    memo.values(table, workload, "b", *args, compute)
    memo.values(table, workload, "a", *args, compute)  # "a" used last: "b" is the one dropped
    memo.values(table, workload, "c", *args, compute)
    assert len(compute.calls) == 3
    memo.values(table, workload, "a", *args, compute)
    assert len(compute.calls) == 3
    memo.values(table, workload, "b", *args, compute)
    assert len(compute.calls) == 4
    assert memo.values(table, workload, "a", _i64(), _i64(), _i64(), _i64(), compute).shape == (0,)


WORKLOAD = [
    {"cpu": "6", "memory": "16Gi", "gpuMilli": 500, "weight": 3},
    {"cpu": "2", "memory": "8Gi", "gpuMilli": 250, "weight": 4},
    {"cpu": "3", "memory": "60Gi", "gpuMilli": 1000, "weight": 2},
    {"cpu": "1", "memory": "1Gi", "gpuMilli": 0, "weight": 1},
]


def _score(plugin: Any, p: dict[str, Any], batch: NodeBatch) -> npt.NDArray[np.int64]:
    info = parse_pod(p)
    state = CycleState(time.time())
    plugin.pre_filter(state, info)  # Skip for the pod without GPUs: FragmentationAware scores it all the same
    got = plugin.score_nodes(state, info, batch)
    assert got is not None
    return got


def test_plugin_scores_after_cpu_memory_and_gpu_changes_equal_a_recomputation() -> None:
    """Pods without GPUs change a node's free cpu or memory but not its GPU row (stamp): the memoised
    growth of that node must be recomputed, as after a GPU pod's Reserve (new stamp)."""
    objs: list[dict[str, Any]] = []
    names = [f"n{i}" for i in range(6)]
    for i, name in enumerate(names):
        objs += [node(name, 2 + i % 3, cpu="8", memory="64Gi"), device(name, 2 + i % 3)]
    args = {
        "scoringStrategy": {"type": "FragmentationAware"},
        "fragmentationAware": {"scoreMapping": "Rank", "workload": WORKLOAD},
    }
    cache, plugin = setup(objs, args)
    rows, _ = cache.table.rows_of(names)
    batch = NodeBatch(rows, names)
    share = pod("s", {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50", "cpu": "1"})
    whole = pod("w", {"nvidia.com/gpu": "1", "cpu": "1"})
    no_gpu = pod("c", {"cpu": "1", "memory": "1Gi"})
    seen: list[npt.NDArray[np.int64]] = []

    def check(step: str) -> None:
        for p in (share, whole):
            got = _score(plugin, p, batch)
            want = _reference_scores(plugin, parse_pod(p), batch)
            assert np.array_equal(got, want), (step, p["metadata"]["name"], got, want)
            seen.append(got)
        # the pod without GPUs: equal to a plugin without any memo on the same cluster state
        fresh = setup([], args)[1]
        fresh.handle = plugin.handle
        fresh.devices = plugin.devices
        assert np.array_equal(_score(plugin, no_gpu, batch), _score(fresh, no_gpu, batch)), step

    check("start")
    computed = plugin._deltas.computed
    check("unchanged")
    assert plugin._deltas.computed == computed and plugin._deltas.reused > 0  # nothing recomputed
    # cpu only (a pod without GPUs on n0): n0 drops below the 6-cpu shape, its growth changes
    cache.assume(parse_pod(pod("cpu-hog", {"cpu": "5", "memory": "0"})), "n0")
    check("cpu")
    assert plugin._deltas.computed > computed
    # memory only, on n1: below the 60Gi shape
    cache.assume(parse_pod(pod("mem-hog", {"cpu": "0", "memory": "10Gi"})), "n1")
    check("memory")
    # a GPU pod asking no cpu or memory reserved on n2: only its GPU row changes (a new stamp)
    info = parse_pod(
        pod("g", {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50", "cpu": "0", "memory": "0"})
    )
    state = CycleState(time.time())
    assert plugin.pre_filter(state, info).is_success()
    assert plugin.reserve(state, cache.assume(info, "n2"), "n2").is_success()
    check("gpu")
    assert not all(np.array_equal(seen[0], s) for s in seen[::2])  # the changes did move the scores
