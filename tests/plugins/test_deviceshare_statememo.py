"""FragmentationAware's node-state sharing in :class:`~app.plugins.deviceshare.deltamemo.DeltaMemo`:
rows that miss the per-row memo take the value of an equal node state (same GPU row contents, GPU
model, and cpu/memory classes before and after the pod), computed once per state. The plugin's
scores must equal a plain computation (no memo at all) through any sequence of pods and reserves."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.plugins.deviceshare.deltamemo import DeltaMemo
from app.plugins.deviceshare.fragmentation import PodShape, Workload, no_gpu_growth, sigmoid_score
from tests.plugins.test_deviceshare import device, node, pod, setup
from tests.plugins.test_deviceshare_fgd_equivalence import _reference_scores

I64 = npt.NDArray[np.int64]


def _i64(*values: int) -> I64:
    return np.array(values, dtype=np.int64)


class _Counting:
    """``compute`` callback: value = 10 * call number + position asked; records the positions."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def __call__(self, pos: I64) -> npt.NDArray[np.float64]:
        self.calls.append(pos.tolist())
        return 10.0 * len(self.calls) + pos.astype(np.float64)


def test_equal_states_are_computed_once_and_reused_across_rows_and_calls() -> None:
    memo, compute = DeltaMemo(), _Counting()
    table, workload = object(), object()
    keys = {0: "a", 1: "b", 2: "a", 3: "c", 4: "b"}  # row -> state

    def states(pos: I64) -> list[Any]:
        return [keys[int(r)] for r in rows[pos]]

    rows = _i64(0, 1, 2, 3, 4)
    stamps, cpu, mem = _i64(1, 1, 1, 1, 1), _i64(0, 0, 0, 0, 0), _i64(0, 0, 0, 0, 0)
    got = memo.values(table, workload, "k", rows, stamps, cpu, mem, compute, states=states)
    # one computation, of the first position of each distinct state; the others copy it
    assert compute.calls == [[0, 1, 3]]
    assert got.tolist() == [10.0, 11.0, 10.0, 13.0, 11.0]
    assert (memo.computed, memo.shared) == (5, 2)
    # under another per-row key (another pod cpu, say) rows 2 and 4 miss the row memo, but their states
    # were computed: nothing is computed again
    again = memo.values(table, workload, "k2", _i64(2, 4), _i64(1, 1), _i64(0, 0), _i64(0, 0), compute, states=states)
    assert compute.calls == [[0, 1, 3]] and again.tolist() == [10.0, 11.0]
    # a row whose state changed: only the new state is computed
    keys[4] = "d"
    got = memo.values(table, workload, "k", rows, _i64(1, 1, 1, 1, 2), cpu, mem, compute, states=states)
    assert compute.calls[-1] == [4] and got.tolist() == [10.0, 11.0, 10.0, 13.0, 24.0]
    # a new workload object forgets the states as well
    memo.values(table, object(), "k2", _i64(2), _i64(1), _i64(0), _i64(0), compute, states=states)
    assert compute.calls[-1] == [0]


def test_without_states_every_miss_is_computed() -> None:
    memo, compute = DeltaMemo(), _Counting()
    got = memo.values(object(), object(), "k", _i64(0, 1), _i64(1, 1), _i64(0, 0), _i64(0, 0), compute)
    assert compute.calls == [[0, 1]] and got.tolist() == [10.0, 11.0] and memo.shared == 0


WORKLOAD = [
    {"cpu": "6", "memory": "16Gi", "gpuMilli": 500, "weight": 3},
    {"cpu": "2", "memory": "8Gi", "gpuMilli": 250, "weight": 4},
    {"cpu": "12", "memory": "60Gi", "gpuMilli": 1000, "gpuModel": "T4", "weight": 2},
    {"cpu": "3", "memory": "24Gi", "gpuMilli": 2000, "weight": 1},
    {"cpu": "1", "memory": "1Gi", "gpuMilli": 0, "weight": 1},
]
REQUESTS: list[dict[str, str]] = [
    {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"},
    {"koordinator.sh/gpu-core": "25", "koordinator.sh/gpu-memory-ratio": "25"},
    {"koordinator.sh/gpu-core": "70", "koordinator.sh/gpu-memory-ratio": "70"},
    {"nvidia.com/gpu": "1"},
    {"nvidia.com/gpu": "2"},
    {"koordinator.sh/gpu-memory": "4Gi"},
    {},  # no GPU: scored by the cpu/memory it takes
]
_pods = st.lists(
    st.tuples(
        st.integers(0, len(REQUESTS) - 1),
        st.sampled_from(["0", "1", "2", "4", "5", "7"]),  # cpu: crosses the workload's cpu levels
        st.sampled_from(["0", "1Gi", "8Gi", "20Gi"]),
        st.integers(0, 5),  # which acceptable node takes it (by score order)
    ),
    min_size=4,
    max_size=18,
)


def _plain_no_gpu_scores(plugin: Any, info: Any, batch: NodeBatch) -> npt.NDArray[np.int64]:
    """:meth:`_no_gpu_delta` computed directly (no memo of any kind), then the plugin's mapping."""
    workload = plugin.workload()
    rows = batch.rows
    if workload is None or not len(workload.group_per):
        return plugin._map_delta(np.zeros(len(rows)))
    cpu, mem = plugin._free_cpu_memory(rows)
    table = plugin.devices.flush()
    shape = PodShape(info.requests.get("cpu", 0), info.requests.get("memory", 0), 0)
    models = plugin.devices.models_of(batch.names)
    delta = no_gpu_growth(workload, shape, cpu, mem, table.milli[rows], models, workload.access(models))
    return plugin._map_delta(delta)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods=_pods, mapping=st.sampled_from(["Rank", "SigmoidRank"]))
def test_scores_with_shared_states_equal_a_plain_computation(
    pods: list[tuple[int, str, str, int]], mapping: str
) -> None:
    """Many identical nodes (two models, three sizes, cpu 8 or 16): states repeat across rows, pods
    and reserves, so most values come from another node's state."""
    objs: list[dict[str, Any]] = []
    names = []
    for i in range(18):
        name = f"n{i}"
        gpus = (2, 4, 8)[i % 3]
        objs += [node(name, gpus, model=("T4", "V100")[i // 9], cpu=("8", "16")[(i // 3) % 2], memory="64Gi")]
        objs.append(device(name, gpus))
        names.append(name)
    args = {
        "scoringStrategy": {"type": "FragmentationAware"},
        "fragmentationAware": {"scoreMapping": mapping, "workload": WORKLOAD},
    }
    cache, plugin = setup(objs, args)
    rows, _ = cache.table.rows_of(names)
    batch = NodeBatch(rows, names)
    for step, (kind, cpu, mem, pick) in enumerate(pods):
        p = pod(f"p{step}", {**REQUESTS[kind], "cpu": cpu, "memory": mem})
        info = parse_pod(p)
        state = CycleState(time.time())
        plugin.pre_filter(state, info)
        got = plugin.score_nodes(state, info, batch)
        plain = _reference_scores if REQUESTS[kind] else _plain_no_gpu_scores
        want = plain(plugin, info, batch)
        assert np.array_equal(got, want), (step, got, want)
        failures = plugin.filter_nodes(state, info, batch) if REQUESTS[kind] else {}
        ok = sorted((i for i in range(len(names)) if i not in failures), key=lambda i: (-int(got[i]), i))
        if not ok:
            continue
        target = names[ok[min(pick, len(ok) - 1)]]
        assert plugin.reserve(state, cache.assume(info, target), target).is_success()
    assert plugin._deltas.shared > 0  # the shortcut was taken


def test_states_separate_nodes_whose_cpu_class_after_the_pod_differs() -> None:
    """Two nodes with equal GPUs and the same cpu class before a 3-cpu pod (8 and 10 free, the
    workload's levels 2, 6 and 12) differ after it (5 < 6 <= 7): their values must not be shared."""
    workload = Workload(
        [PodShape(2000, 0, 500), PodShape(6000, 0, 250), PodShape(12000, 0, 1000)], np.array([1.0, 1.0, 1.0])
    )
    free_cpu = _i64(8000, 10000)
    assert workload.class_codes(free_cpu, _i64(0, 0)).tolist()[0] == workload.class_codes(free_cpu, _i64(0, 0))[1]
    after = workload.class_codes(free_cpu - 3000, _i64(0, 0)).tolist()
    assert after[0] != after[1]
    objs = [node("a", 2, cpu="8", memory="0"), device("a", 2), node("b", 2, cpu="10", memory="0"), device("b", 2)]
    args = {
        "scoringStrategy": {"type": "FragmentationAware"},
        "fragmentationAware": {
            "scoreMapping": "Rank",
            "workload": [
                {"cpu": "2", "memory": "0", "gpuMilli": 500, "weight": 1},
                {"cpu": "6", "memory": "0", "gpuMilli": 250, "weight": 1},
                {"cpu": "12", "memory": "0", "gpuMilli": 1000, "weight": 1},
            ],
        },
    }
    cache, plugin = setup(objs, args)
    rows, _ = cache.table.rows_of(["a", "b"])
    batch = NodeBatch(rows, ["a", "b"])
    info = parse_pod(
        pod("p", {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50", "cpu": "3", "memory": "0"})
    )
    state = CycleState(time.time())
    plugin.pre_filter(state, info)
    got = plugin.score_nodes(state, info, batch)
    assert np.array_equal(got, _reference_scores(plugin, info, batch))
    assert got[0] != got[1]


def _sigmoid_with_clip(delta: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """The original ``sigmoid_score``: np.clip under errstate."""
    with np.errstate(over="ignore"):
        sig = 1.0 / (1.0 + np.exp(np.clip(np.asarray(delta, dtype=np.float64) / 1000.0, -700, 700)))
    out: npt.NDArray[np.int64] = (sig * 100).astype(np.int64)
    return out


@given(
    st.lists(
        st.one_of(
            st.floats(-1e6, 1e6, allow_nan=False),
            st.floats(allow_nan=False),
            st.sampled_from([-700_000.0, 700_000.0, 0.0, -0.0]),
        ),
        max_size=50,
    )
)
def test_sigmoid_score_equals_the_clipped_formula(values: list[float]) -> None:
    delta = np.array(values, dtype=np.float64)
    assert np.array_equal(sigmoid_score(delta), _sigmoid_with_clip(delta))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods=_pods, mapping=st.sampled_from(["Rank", "SigmoidRank"]))
def test_memoised_gpu_choice_equals_computing_it(pods: list[tuple[int, str, str, int]], mapping: str) -> None:
    """Reserve's GPU choice, memoised per node state, equals :meth:`_choose_computed` at every step
    (identical nodes: most choices come from another node's or an earlier pod's state)."""
    objs: list[dict[str, Any]] = []
    names = []
    for i in range(12):
        name = f"n{i}"
        gpus = (2, 4)[i % 2]
        objs += [node(name, gpus, model=("T4", "V100")[i // 6], cpu=("8", "16")[(i // 2) % 3 % 2], memory="64Gi")]
        objs.append(device(name, gpus))
        names.append(name)
    args = {
        "scoringStrategy": {"type": "FragmentationAware"},
        "fragmentationAware": {"scoreMapping": mapping, "workload": WORKLOAD},
    }
    cache, plugin = setup(objs, args)
    rows, _ = cache.table.rows_of(names)
    batch = NodeBatch(rows, names)
    reserved = 0
    for step, (kind, cpu, mem, pick) in enumerate(pods * 2):
        if not REQUESTS[kind]:
            continue
        info = parse_pod(pod(f"p{step}", {**REQUESTS[kind], "cpu": cpu, "memory": mem}))
        state = CycleState(time.time())
        plugin.pre_filter(state, info)
        req = plugin._request(state, info)
        assert req is not None
        fgd_share = req.count == 1 and 0 < req.milli() < 1000
        for target in names:  # every node, before and after being assumed: the key covers both
            row = int(rows[names.index(target)])
            for p in (info, replace(info, node_name=target)):
                free_cpu, free_mem = plugin._free_cpu_memory(np.array([row]))
                extra = (p.requests.get("cpu", 0), p.requests.get("memory", 0)) if p.node_name == target else (0, 0)
                want = plugin._choose_computed(
                    p, req, target, row, fgd_share, int(free_cpu[0]) + extra[0], int(free_mem[0]) + extra[1]
                )
                assert plugin._choose(p, req, target, row) == want, (step, target)
        failures = plugin.filter_nodes(state, info, batch)
        ok = [i for i in range(len(names)) if i not in failures]
        if not ok:
            continue
        target = names[ok[min(pick, len(ok) - 1)]]
        assert plugin.reserve(state, cache.assume(info, target), target).is_success()
        reserved += 1
    if reserved:
        assert len(plugin._choices) < reserved * len(names) * 2  # choices were shared


def _fgd(workload: list[dict[str, Any]], objs: list[dict[str, Any]]) -> tuple[Any, Any]:
    args = {
        "scoringStrategy": {"type": "FragmentationAware"},
        "fragmentationAware": {"scoreMapping": "Rank", "workload": workload},
    }
    return setup(objs, args)


def test_gpu_choice_is_not_shared_between_gpu_models() -> None:
    """Equal GPU rows (GPU 0 idle, GPU 1 half used) on a T4 and a V100 node, a workload of whole T4
    GPUs: on the T4 node a 30 % share keeps the idle card whole (GPU 1), on the V100 node every slot
    grows the same and the lowest minor wins (GPU 0)."""
    objs = [node("t", 2, model="T4"), device("t", 2), node("v", 2, model="V100"), device("v", 2)]
    cache, plugin = _fgd([{"cpu": "1", "memory": "1Gi", "gpuMilli": 1000, "gpuModel": "T4", "weight": 1}], objs)
    half = parse_pod(pod("half", {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}))
    half_req = plugin._request(CycleState(0.0), half)
    plugin.devices.flush()
    for name in ("t", "v"):
        row = cache.table.rows_of([name])[0][0]
        allocs = plugin._gpu_allocations(plugin.devices.nodes[name], half_req, int(row), [1])
        plugin.devices.account(f"half-{name}", f"default/half-{name}", name, allocs, {})
    share = parse_pod(pod("s", {"koordinator.sh/gpu-core": "30", "koordinator.sh/gpu-memory-ratio": "30"}))
    req = plugin._request(CycleState(0.0), share)
    plugin.devices.flush()
    got = {name: plugin._choose(share, req, name, int(cache.table.rows_of([name])[0][0])) for name in ("t", "v")}
    assert got == {"t": [1], "v": [0]}


def test_gpu_choice_is_not_shared_between_rows_of_equal_milli() -> None:
    """16 GiB and 8 GiB GPUs have the same free milli; a pod asking 12 GiB per GPU fits only the
    first: the second node's choice must not be read from the first's."""
    objs = [node("big", 2), device("big", 2, memory="16Gi"), node("small", 2), device("small", 2, memory="8Gi")]
    cache, plugin = _fgd(WORKLOAD, objs)
    info = parse_pod(pod("m", {"koordinator.sh/gpu-memory": "12Gi"}))
    req = plugin._request(CycleState(0.0), info)
    rows = cache.table.rows_of(["big", "small"])[0]
    table = plugin.devices.flush()
    assert np.array_equal(table.milli[rows[0]], table.milli[rows[1]])
    assert plugin._choose(info, req, "big", int(rows[0])) == [0]
    assert plugin._choose(info, req, "small", int(rows[1])) is None


def test_states_of_different_spaces_are_not_shared() -> None:
    memo, compute = DeltaMemo(), _Counting()
    table, workload = object(), object()

    def states(pos: I64) -> list[Any]:
        return ["same"] * len(pos)

    args = (_i64(0), _i64(1), _i64(0), _i64(0))
    memo.values(table, workload, "k1", *args, compute, states=states, space="a")
    memo.values(table, workload, "k2", *args, compute, states=states, space="a")
    assert len(compute.calls) == 1
    memo.values(table, workload, "k3", *args, compute, states=states, space="b")
    assert len(compute.calls) == 2
