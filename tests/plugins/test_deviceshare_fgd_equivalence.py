"""FragmentationAware (FGD) fast path == the original direct (N, G, J) algorithm, bit for bit.

The reference below is the first implementation of ``node_fragmentation`` / ``best_placement``
(kept verbatim apart from names): every node, every slot, every group compared at once. The fast
path evaluates only candidate (node, free value) pairs with histogram counts and memoised
per-class weights; these tests build seeded random cluster states and workloads (shares, whole
GPUs, bytes-only requests, model-constrained groups, nodes without GPUs, unhealthy slots, cpu and
memory at the exact shape thresholds) and require identical deltas (``np.array_equal``, so equal
floats, not just close ones), identical chosen slots and therefore identical scores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.plugins.deviceshare.fragmentation import WHOLE, PodShape, Workload, best_placement, node_fragmentation
from app.plugins.deviceshare.plugin import DeviceShare
from tests.plugins.test_deviceshare import device, node, pod, setup

I64 = npt.NDArray[np.int64]
GI = 1 << 30


# ---------------------------------------------------------------------- reference (original algorithm)
def _ref_access(workload: Workload, gpu_models: Sequence[str]) -> npt.NDArray[np.bool_]:
    n, j = len(gpu_models), len(workload.group_models)
    out = np.ones((n, j), dtype=bool)
    if not [g for g, m in enumerate(workload.group_models) if m is not None]:
        return out
    for i, model in enumerate(gpu_models):
        out[i] = np.array([m is None or model in m for m in workload.group_models], dtype=bool)
    return out


def _ref_fit_weights(workload: Workload, free_cpu: I64, free_mem: I64) -> npt.NDArray[np.float64]:
    n = len(free_cpu)
    if len(workload.group_per) == 0:
        return np.zeros((n, 0), dtype=np.float64)
    fit = (workload.shape_cpu[None, :] <= free_cpu[:, None]) & (workload.shape_mem[None, :] <= free_mem[:, None])
    weighted = np.where(fit, workload.shape_p[None, :], 0.0)
    out: npt.NDArray[np.float64] = np.add.reduceat(weighted, workload.group_starts, axis=1)
    return out


def _ref_usable(free: I64, per: I64) -> tuple[I64, I64]:
    ok = (free[:, :, None] >= per[None, None, :]) & (free[:, :, None] >= 0)
    u = np.where(ok, free[:, :, None], 0).sum(axis=1)
    return u, ok.sum(axis=1)


def ref_node_fragmentation(
    workload: Workload, cpu: I64, mem: I64, gpu_free: I64, models: Sequence[str]
) -> npt.NDArray[np.float64]:
    """The original ``node_fragmentation``."""
    free = np.asarray(gpu_free, dtype=np.int64)
    total = np.where(free > 0, free, 0).sum(axis=1).astype(np.float64)
    if len(workload.group_per) == 0 or free.shape[0] == 0:
        return total * float(workload.weights.sum() > 0)
    u, cnt = _ref_usable(free, workload.group_per)
    sat = cnt >= workload.group_count[None, :]
    w = _ref_fit_weights(workload, np.asarray(cpu), np.asarray(mem)) * _ref_access(workload, models)
    out: npt.NDArray[np.float64] = total - (w * sat * u).sum(axis=1)
    return out


def _ref_share_deltas(
    workload: Workload, r: int, cpu: I64, mem: I64, pod: PodShape, free: I64, models: Sequence[str]
) -> npt.NDArray[np.float64]:
    total = np.where(free > 0, free, 0).sum(axis=1).astype(np.float64)
    if len(workload.group_per) == 0:
        return np.full(free.shape, -float(r) * float(workload.weights.sum() > 0))
    per = workload.group_per
    valid = (free >= 0)[:, :, None]
    f3 = free[:, :, None]
    g3 = f3 - r
    ok_before = (f3 >= per) & valid
    ok_after = (g3 >= per) & valid
    held_before = np.where(ok_before, f3, 0)
    u = held_before.sum(axis=1)
    cnt = ok_before.sum(axis=1)
    access = _ref_access(workload, models)
    need = workload.group_count[None, :]
    w_before = _ref_fit_weights(workload, cpu, mem) * access
    before = total - (w_before * (cnt >= need) * u).sum(axis=1)
    w_after = _ref_fit_weights(workload, cpu - pod.cpu_milli, mem - pod.memory_bytes) * access
    u_after = u[:, None, :] - held_before + np.where(ok_after, g3, 0)
    cnt_after = cnt[:, None, :] - ok_before + ok_after
    after = (total - r)[:, None] - (w_after[:, None, :] * (cnt_after >= need[:, None, :]) * u_after).sum(axis=2)
    out: npt.NDArray[np.float64] = after - before[:, None]
    return out


def ref_best_placement(
    workload: Workload,
    pod: PodShape,
    cpu_in: I64,
    mem_in: I64,
    gpu_free: I64,
    models: Sequence[str],
    feasible: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.float64], I64]:
    """The original ``best_placement``: (delta, slot)."""
    free = np.asarray(gpu_free, dtype=np.int64)
    n = free.shape[0]
    cpu = np.asarray(cpu_in, dtype=np.int64)
    mem = np.asarray(mem_in, dtype=np.int64)
    if pod.gpu_milli >= WHOLE:
        before = ref_node_fragmentation(workload, cpu, mem, free, models)
        k = pod.gpu_count()
        idle = free >= WHOLE
        take = idle & (np.cumsum(idle, axis=1) <= k)
        ok = idle.sum(axis=1) >= k
        after_free = np.where(take, 0, free)
        after = ref_node_fragmentation(workload, cpu - pod.cpu_milli, mem - pod.memory_bytes, after_free, models)
        return np.where(ok, after - before, np.inf), np.full(n, -1, dtype=np.int64)
    r = pod.gpu_milli
    feasible = np.asarray(feasible, dtype=bool) & (free >= r)
    delta_g = np.full(free.shape, np.inf)
    live = np.flatnonzero(feasible.any(axis=1))
    if len(live):
        delta_g[live] = _ref_share_deltas(
            workload, r, cpu[live], mem[live], pod, free[live], [models[int(i)] for i in live]
        )
    delta_g = np.where(feasible, delta_g, np.inf)
    slot = np.argmin(delta_g, axis=1).astype(np.int64) if free.shape[1] else np.zeros(n, dtype=np.int64)
    best = delta_g[np.arange(n), slot] if free.shape[1] else np.full(n, np.inf)
    return best, np.where(np.isfinite(best), slot, -1)


# ---------------------------------------------------------------------- random states
CPUS = (0, 500, 1000, 2000, 4000, 8000, 16000, 32000)
MEMS = (0, GI, 4 * GI, 8 * GI, 16 * GI, 64 * GI)
MILLIS = (0, 0, 50, 100, 200, 250, 300, 500, 500, 700, 1000, 1000, 2000, 4000, 8000)
MODEL_NAMES = ("V100", "T4", "A100", "G2", "")
CONSTRAINTS: tuple[str | tuple[str, ...] | None, ...] = (None, None, None, "V100", ("T4", "A100"), "G2|V100", "P100")


def random_workload(rng: np.random.Generator, constrained: bool, shapes: int) -> Workload:
    counts: dict[PodShape, float] = {}
    for _ in range(shapes):
        model = CONSTRAINTS[int(rng.integers(len(CONSTRAINTS)))] if constrained else None
        shape = PodShape(
            int(rng.choice(CPUS)) + int(rng.integers(0, 3)) * 250,
            int(rng.choice(MEMS)),
            int(rng.choice(MILLIS)) if rng.random() < 0.8 else int(rng.integers(1, 100)) * 10,
            model,
        )
        counts[shape] = counts.get(shape, 0.0) + float(rng.integers(1, 50))
    return Workload.from_counts(counts)


def random_cluster(rng: np.random.Generator, n: int, g: int, workload: Workload) -> tuple[I64, I64, I64, list[str]]:
    gpus = rng.integers(0, g + 1, size=n)
    free = np.full((n, g), -1, dtype=np.int64)
    for i in range(n):
        k = int(gpus[i])
        vals = np.where(rng.random(k) < 0.4, 1000, rng.integers(0, 101, size=k) * 10)
        if rng.random() < 0.1:
            vals = rng.integers(0, 1001, size=k)  # not multiples of 10
        free[i, :k] = vals
        if k and rng.random() < 0.1:
            free[i, int(rng.integers(k))] = -1  # unhealthy slot
    # free cpu / memory: random, and often exactly at a shape's request (the class boundaries)
    cpu = rng.integers(-2000, 64000, size=n).astype(np.int64)
    mem = rng.integers(-GI, 128 * GI, size=n).astype(np.int64)
    if len(workload.shape_cpu):
        at = rng.random(n) < 0.5
        cpu[at] = rng.choice(workload.shape_cpu, size=int(at.sum())) + rng.integers(-1, 2, size=int(at.sum()))
        at = rng.random(n) < 0.5
        mem[at] = rng.choice(workload.shape_mem, size=int(at.sum())) + rng.integers(-1, 2, size=int(at.sum()))
    models = [MODEL_NAMES[int(i)] for i in rng.integers(len(MODEL_NAMES), size=n)]
    return cpu, mem, free, models


def random_pods(rng: np.random.Generator, workload: Workload) -> list[PodShape]:
    pods = [PodShape(int(rng.choice(CPUS)), int(rng.choice(MEMS)), int(m)) for m in (0, 10, 250, 500, 990, 1000)]
    pods += [PodShape(int(rng.choice(CPUS)), int(rng.choice(MEMS)), int(m)) for m in (2000, 4000, 1500)]
    pods += [PodShape(1000, GI, int(rng.integers(1, 100)) * 10, "V100") for _ in range(2)]  # model-constrained pod
    pods += [PodShape(1000, GI, int(rng.integers(1, 1000))) for _ in range(2)]  # not a multiple of 10
    pods += list(workload.shapes[:3])  # shapes of the workload itself (exact class boundaries)
    return pods


@pytest.mark.parametrize("seed", range(12))
def test_best_placement_equals_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    workload = random_workload(rng, constrained=seed % 3 != 0, shapes=int(rng.integers(1, 160)))
    g = (8, 4, 1, 16)[seed % 4]
    cpu, mem, free, models = random_cluster(rng, int(rng.integers(1, 400)), g, workload)
    for p in random_pods(rng, workload):
        feasible = rng.random(free.shape) < 0.85
        want_delta, want_slot = ref_best_placement(workload, p, cpu, mem, free, models, feasible)
        got = best_placement(workload, p, cpu, mem, free, models, feasible)
        assert np.array_equal(got.delta, want_delta), (p, np.flatnonzero(got.delta != want_delta)[:5])
        assert np.array_equal(got.slot, want_slot), p
        # the plugin's path: access rows precomputed by the caller
        again = best_placement(workload, p, cpu, mem, free, [], feasible, access=_ref_access(workload, models))
        assert np.array_equal(again.delta, want_delta) and np.array_equal(again.slot, want_slot)
    assert np.array_equal(
        node_fragmentation(workload, cpu, mem, free, models), ref_node_fragmentation(workload, cpu, mem, free, models)
    )


def test_degenerate_workloads_and_clusters_equal_reference() -> None:
    rng = np.random.default_rng(99)
    cpu_only = Workload.from_shapes([PodShape(1000, GI, 0)])
    empty = Workload([], np.zeros(0))
    for wl in (cpu_only, empty, random_workload(rng, True, 5)):
        for n, g in ((0, 8), (5, 0), (7, 3)):
            cpu, mem, free, models = (
                random_cluster(rng, n, g, wl)
                if g
                else (
                    np.zeros(n, dtype=np.int64),
                    np.zeros(n, dtype=np.int64),
                    np.zeros((n, 0), dtype=np.int64),
                    [""] * n,
                )
            )
            for p in (PodShape(0, 0, 300), PodShape(0, 0, 1000), PodShape(0, 0, 3000), PodShape(0, 0, 0)):
                feasible = np.ones(free.shape, dtype=bool)
                want_delta, want_slot = ref_best_placement(wl, p, cpu, mem, free, models, feasible)
                got = best_placement(wl, p, cpu, mem, free, models, feasible)
                assert np.array_equal(got.delta, want_delta) and np.array_equal(got.slot, want_slot)
            assert np.array_equal(
                node_fragmentation(wl, cpu, mem, free, models), ref_node_fragmentation(wl, cpu, mem, free, models)
            )


# ---------------------------------------------------------------------- the plugin, across reserves
def _ref_free_milli(table: Any, rows: I64) -> I64:
    """The original ``GPUTable.free_milli``: derived from the raw arrays on every call."""
    core, ratio = table.core_free[rows], table.ratio_free[rows]
    has_core, has_ratio = table.core_total[rows] > 0, table.ratio_total[rows] > 0
    pct = np.where(has_core & has_ratio, np.minimum(core, ratio), np.where(has_core, core, ratio))
    healthy = (table.minor[rows] >= 0) & (has_core | has_ratio)
    out: I64 = np.where(healthy, pct * 10, -1)
    return out


def _reference_scores(plugin: DeviceShare, info: Any, batch: NodeBatch) -> npt.NDArray[np.int64]:
    """The plugin's original score path on its current state, with the reference algorithm."""
    req = plugin._request(CycleState(0.0), info)
    assert req is not None
    rows = batch.rows
    fits = plugin._fits(req, rows, batch.removed)
    workload = plugin.workload() or Workload([], np.zeros(0))
    cache = plugin.handle.snapshot
    alloc_cpu, req_cpu = cache.allocatable_and_requested("cpu", rows)
    alloc_mem, req_mem = cache.allocatable_and_requested("memory", rows)
    shape = PodShape(info.requests.get("cpu", 0), info.requests.get("memory", 0), req.milli())
    delta, _ = ref_best_placement(
        workload,
        shape,
        alloc_cpu - req_cpu,
        alloc_mem - req_mem,
        _ref_free_milli(plugin.devices.flush(), rows),
        plugin.devices.models_of(batch.names),
        fits,
    )
    if req.milli() >= 1000 or req.count > 1 or req.milli() == 0:
        ok = fits.sum(axis=1) >= req.count
        delta = np.where(ok & np.isfinite(delta), delta, np.where(ok, 0.0, np.inf))
    return plugin._map_delta(delta)


FIXED_WORKLOAD = [
    {"cpu": "4", "memory": "16Gi", "gpuMilli": 500, "gpuModel": "T4", "weight": 3},
    {"cpu": "8", "memory": "32Gi", "gpuMilli": 1000, "gpuModel": "V100|A100", "weight": 2},
    {"cpu": "2", "memory": "8Gi", "gpuMilli": 250, "weight": 4},
    {"cpu": "16", "memory": "64Gi", "gpuMilli": 2000, "weight": 1},
    {"cpu": "1", "memory": "1Gi", "gpuMilli": 0, "weight": 2},
]


@pytest.mark.parametrize(("mapping", "fixed"), [("Rank", False), ("Sigmoid", False), ("Rank", True), ("Sigmoid", True)])
def test_plugin_scores_equal_reference_through_reserves(mapping: str, fixed: bool) -> None:
    rng = np.random.default_rng(5)
    objs: list[dict[str, Any]] = []
    names = []
    for i in range(40):
        name = f"n{i}"
        gpus = int(rng.choice([0, 1, 2, 4, 8]))
        objs.append(node(name, gpus, model=("V100", "T4", "A100")[i % 3], cpu=str(int(rng.integers(8, 96)))))
        if i % 7 != 6:
            objs.append(device(name, gpus, unhealthy=(0,) if i % 11 == 5 and gpus else ()))
        names.append(name)
    frag: dict[str, Any] = {"scoreMapping": mapping}
    if fixed:  # a configured workload with model-constrained shapes: the access path
        frag["workload"] = FIXED_WORKLOAD
    args = {"scoringStrategy": {"type": "FragmentationAware"}, "fragmentationAware": frag}
    cache, plugin = setup(objs, args)
    requests: list[dict[str, str]] = [
        {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"},
        {"koordinator.sh/gpu-core": "30", "koordinator.sh/gpu-memory-ratio": "30", "cpu": "4"},
        {"nvidia.com/gpu": "1"},
        {"nvidia.com/gpu": "2", "memory": "32Gi"},
        {"koordinator.sh/gpu-memory": "4Gi"},
        {"koordinator.sh/gpu.shared": "2", "koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
    ]
    rows, _ = cache.table.rows_of(names)
    batch = NodeBatch(rows, names)
    placed = 0
    for step in range(60):
        p = pod(f"p{step}", requests[step % len(requests)])
        if step % 5 == 0:  # a model-constrained pod: learned as a constrained shape
            p["spec"]["nodeSelector"] = {"node.koordinator.sh/gpu-model": "T4"}
        info = parse_pod(p)
        state = CycleState(time.time())
        assert plugin.pre_filter(state, info).is_success()
        got = plugin.score_nodes(state, info, batch)
        want = _reference_scores(plugin, info, batch)
        assert got is not None
        assert np.array_equal(got, want), step
        table = plugin.devices.flush()
        assert np.array_equal(table.free_milli(rows), _ref_free_milli(table, rows))
        failures = plugin.filter_nodes(state, info, batch)
        ok = [i for i in range(len(names)) if i not in failures]
        if not ok:
            continue
        target = names[max(ok, key=lambda i: (int(got[i]), -i))]
        assumed = cache.assume(info, target)
        assert plugin.reserve(state, assumed, target).is_success()
        placed += 1
        if step % 9 == 8:  # unreserve sometimes: the rows must be recomputed from the restored state
            plugin.unreserve(state, assumed, target)
    assert placed > 20
    workload = plugin.workload()
    assert workload is not None and workload.constrained == fixed


def test_sparse_class_table_path_equals_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workloads too wide for the dense per-class weight table take the per-call path."""
    from app.plugins.deviceshare import fragmentation

    monkeypatch.setattr(fragmentation, "_MAX_CLASS_CELLS", 0)
    rng = np.random.default_rng(1234)
    workload = random_workload(rng, constrained=True, shapes=80)
    cpu, mem, free, models = random_cluster(rng, 200, 8, workload)
    memo = fragmentation.RowMemo()
    rows = np.arange(200, dtype=np.int64)
    for p in random_pods(rng, workload):
        feasible = rng.random(free.shape) < 0.9
        want_delta, want_slot = ref_best_placement(workload, p, cpu, mem, free, models, feasible)
        terms = memo.get(workload, rows, np.zeros(200, dtype=np.int64), free)
        got = best_placement(workload, p, cpu, mem, free, models, feasible, gpu_terms=terms)
        assert np.array_equal(got.delta, want_delta) and np.array_equal(got.slot, want_slot)


def test_fits_fast_path_equals_the_original_test() -> None:
    objs: list[dict[str, Any]] = [node("a", 4), device("a", 4, unhealthy=(2,)), node("b", 2), device("b", 2)]
    objs.append(node("c", 1))  # no Device
    cache, plugin = setup(objs)
    reserve_one = parse_pod(pod("x", {"koordinator.sh/gpu-core": "70", "koordinator.sh/gpu-memory-ratio": "70"}))
    state = CycleState(0.0)
    plugin.pre_filter(state, reserve_one)
    assert plugin.reserve(state, cache.assume(reserve_one, "a"), "a").is_success()
    names = ["a", "b", "c"]
    rows, _ = cache.table.rows_of(names)
    table = plugin.devices.flush()
    for requests in (
        {"koordinator.sh/gpu-core": "30", "koordinator.sh/gpu-memory-ratio": "30"},
        {"nvidia.com/gpu": "1"},
        {"koordinator.sh/gpu-memory": "4Gi"},
    ):
        req = plugin._request(CycleState(0.0), parse_pod(pod("p", requests)))
        assert req is not None
        core, ratio, mem = table.core_free[rows], table.ratio_free[rows], table.mem_free[rows]
        healthy = (table.core_total[rows] > 0) | (table.ratio_total[rows] > 0) | (table.mem_total[rows] > 0)
        want = healthy & ((core > 0) | (ratio > 0) | (mem > 0))
        want &= core >= req.core if req.core else True
        want &= ratio >= req.ratio if req.ratio else True
        want &= mem >= req.memory if req.memory else True
        assert np.array_equal(plugin._fits(req, rows, None), want)


def test_sigmoid_rank_mapping_equals_ranking_the_distinct_levels() -> None:
    """SigmoidRank ranks the reference's integer scores without a sort: equal to np.unique + searchsorted
    over the levels (ranks past the tenth all 0), on growths with ties, negatives and +inf."""
    from app.plugins.deviceshare.fragmentation import sigmoid_score
    from app.plugins.deviceshare.plugin import RANK_STEP

    plugin = setup([], {"scoringStrategy": {"type": "FragmentationAware"}})[1]
    assert plugin.args.score_mapping == "SigmoidRank"
    rng = np.random.default_rng(7)
    for size in (1, 2, 5, 40, 1200):
        for spread in (50.0, 3000.0, 20000.0):
            delta = np.round(rng.normal(0.0, spread, size), int(rng.integers(0, 3)))
            delta[rng.random(size) < 0.1] = np.inf
            finite = np.isfinite(delta)
            want = np.zeros(size, dtype=np.int64)
            if finite.any():
                rounded = -sigmoid_score(delta[finite]).astype(np.float64)
                levels = np.unique(rounded)[: 100 // RANK_STEP + 1]
                want[finite] = np.maximum(0, 100 - RANK_STEP * np.searchsorted(levels, rounded))
            assert np.array_equal(plugin._map_delta(delta), want), (size, spread)


def test_slot_growth_with_memoised_node_terms_equals_computing_them() -> None:
    """Reserve's per-GPU growth reads the node's terms from the RowMemo (its row G times): the same
    values, bit for bit, as computing them for the G copies."""
    from app.plugins.deviceshare.fragmentation import RowMemo, slot_growth

    rng = np.random.default_rng(11)
    for constrained in (False, True):
        workload = random_workload(rng, constrained=constrained, shapes=30)
        cpu, mem, free, models = random_cluster(rng, 30, 8, workload)
        memo = RowMemo()
        stamps = np.arange(30, dtype=np.int64)
        checked = 0
        for p in random_pods(rng, workload):
            if not 0 < p.gpu_milli < WHOLE:
                continue
            for i in range(30):
                feasible = rng.random(8) < 0.8
                copies = np.full(8, i, dtype=np.int64)
                terms = memo.get(workload, copies, stamps[copies], np.broadcast_to(free[i], (8, 8)))
                args = (workload, p, int(cpu[i]), int(mem[i]), free[i], models[i], feasible)
                want = slot_growth(*args)
                assert np.array_equal(slot_growth(*args, gpu_terms=terms), want), (p, i)
                checked += int(np.isfinite(want).sum())
        assert checked > 100
