"""LeastAllocated / MostAllocated device scoring, vectorised (upstream ``deviceshare/scoring.go``).

For each weighted resource with a non-zero total: ``requested = total - free + podRequest`` (the
per-GPU request, added once) and ``capacity = total``; LeastAllocated scores
``(capacity - requested) * 100 // capacity`` (0 when over), MostAllocated
``min(requested, capacity) * 100 // capacity``; the result is the weighted average (integer division)
over the resources that have a total. ``scoreNode`` sums totals and frees over the node's GPUs;
``scoreDevice`` scores one GPU (used to order GPUs inside a node).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.framework.interfaces import MAX_NODE_SCORE
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.args import MOST_ALLOCATED
from app.plugins.deviceshare.gputable import GPUTable

I64 = npt.NDArray[np.int64]


def _resource_arrays(table: GPUTable, rows: I64) -> dict[str, tuple[I64, I64]]:
    return {
        n.RESOURCE_GPU_CORE: (table.core_total[rows], table.core_free[rows]),
        n.RESOURCE_GPU_MEMORY_RATIO: (table.ratio_total[rows], table.ratio_free[rows]),
        n.RESOURCE_GPU_MEMORY: (table.mem_total[rows], table.mem_free[rows]),
    }


def _score(strategy: str, requested: I64, capacity: I64) -> I64:
    safe = np.where(capacity == 0, 1, capacity)
    if strategy == MOST_ALLOCATED:
        out = np.minimum(requested, capacity) * MAX_NODE_SCORE // safe
    else:
        out = np.where(requested > capacity, 0, (capacity - requested) * MAX_NODE_SCORE // safe)
    return np.where(capacity == 0, 0, out)


def _weighted(
    strategy: str,
    weights: dict[str, int],
    per_gpu: dict[str, int],
    arrays: dict[str, tuple[I64, I64]],
    axis: int | None,
) -> I64:
    acc: I64 | None = None
    wsum: I64 | None = None
    for name, weight in weights.items():
        pair = arrays.get(name)
        if pair is None:
            continue  # rdma / fpga: no total on GPU rows
        total, free = pair
        if axis is not None:
            total, free = total.sum(axis=axis), free.sum(axis=axis)
        active = total != 0
        requested = np.where(total >= free, total - free + per_gpu.get(name, 0), total)
        s = np.where(active, _score(strategy, requested, total) * weight, 0)
        w = np.where(active, weight, 0)
        acc = s if acc is None else acc + s
        wsum = w if wsum is None else wsum + w
    if acc is None or wsum is None:
        return np.zeros(0, dtype=np.int64)
    out: I64 = np.where(wsum > 0, acc // np.where(wsum > 0, wsum, 1), 0)
    return out


def node_scores(strategy: str, weights: dict[str, int], per_gpu: dict[str, int], table: GPUTable, rows: I64) -> I64:
    """``scoreNode`` for each of ``rows``: (len(rows),) int64 0..100 (0 for nodes without a Device)."""
    out = _weighted(strategy, weights, per_gpu, _resource_arrays(table, rows), axis=1)
    if len(out) == 0:
        return np.zeros(len(rows), dtype=np.int64)
    return np.where(table.has_device[rows], out, 0)


def device_scores(strategy: str, weights: dict[str, int], per_gpu: dict[str, int], table: GPUTable, row: int) -> I64:
    """``scoreDevice`` of each GPU slot of ``row``: (G,) int64 0..100."""
    rows = np.array([row], dtype=np.int64)
    out = _weighted(strategy, weights, per_gpu, _resource_arrays(table, rows), axis=None)
    if len(out) == 0:
        return np.zeros(table.width, dtype=np.int64)
    return np.asarray(out[0], dtype=np.int64)


def device_scores_rows(
    strategy: str, weights: dict[str, int], per_gpu: dict[str, int], table: GPUTable, rows: I64
) -> I64:
    """:func:`device_scores` of every GPU slot of each of ``rows`` at once: (len(rows), G) int64 0..100."""
    out = _weighted(strategy, weights, per_gpu, _resource_arrays(table, rows), axis=None)
    if len(out) == 0:
        return np.zeros((len(rows), table.width), dtype=np.int64)
    return np.asarray(out, dtype=np.int64)


def normalize(scores: I64) -> I64:
    """kube-scheduler's ``DefaultNormalizeScore(100, false)``: scale so the maximum becomes 100."""
    top = int(scores.max()) if len(scores) else 0
    if top == 0:
        return scores
    out: I64 = scores * MAX_NODE_SCORE // top
    return out


def _scalar(strategy: str, requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    if strategy == MOST_ALLOCATED:
        return min(requested, capacity) * MAX_NODE_SCORE // capacity
    return 0 if requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity


def score_resources(
    strategy: str, weights: dict[str, int], request: dict[str, int], total: dict[str, int], free: dict[str, int]
) -> int:
    """Scalar ``scoreDevice`` (one device) or ``scoreNode`` (``total``/``free`` summed over a type's devices):
    the weighted average over weighted resources with a non-zero total, as :func:`node_scores` computes it
    on the GPU table; used for RDMA/FPGA devices and GPU topology scopes (0..100)."""
    acc = wsum = 0
    for name, weight in weights.items():
        have = total.get(name, 0)
        if have == 0:
            continue
        left = free.get(name, 0)
        requested = have - left + request.get(name, 0) if have >= left else have
        acc += _scalar(strategy, requested, have) * weight
        wsum += weight
    return acc // wsum if wsum else 0
