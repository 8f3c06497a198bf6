"""GPU fragmentation after Weng et al., "Beware of Fragmentation" (USENIX ATC 2023), vectorised over nodes.

For a node n and a pod shape m (cpu, memory, GPU milli, GPU model), the fragment ``f(n, m)`` is the
idle GPU milli of n that m cannot use (reference semantics: hkust-adsl/kubernetes-scheduler-simulator
``GetNodePodFrag`` / ``NodeGpuShareFragAmount``):

- m asks no GPU, or n's GPU model is not one m accepts: every idle GPU milli of n;
- m fits (enough GPUs with ``free >= per-GPU milli``, and the node's free cpu and memory cover m):
  the idle milli of the GPUs with ``free < per-GPU milli``;
- otherwise (m does not fit): every idle GPU milli.

The node's expected fragmentation under workload M is ``F_n(M) = sum_m p_m f(n, m)``. Writing
``T_n`` for the node's idle GPU milli and ``U_nj`` for the idle milli on GPUs that can host a shape
of GPU group j (same per-GPU milli, GPU count and models), this is
``F_n = T_n - sum_j W_nj * sat_nj * U_nj`` where ``W_nj`` is the popularity of group-j shapes whose
cpu/memory fit the node and ``sat_nj`` says the node has enough such GPUs: an (N, G, J) array
computation, no Python loop over nodes or shapes.

Units: cpu milli-cores, memory bytes, GPU milli (1000 = one whole card).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: GPU milli of one whole card.
WHOLE = 1000


@dataclass(frozen=True, slots=True)
class PodShape:
    """One kind of pod.

    Attributes:
        cpu_milli: cpu request, milli-cores.
        memory_bytes: memory request, bytes.
        gpu_milli: 0 = no GPU; 1..999 = a share of one GPU; ``k*1000`` = k whole GPUs.
        gpu_model: the GPU model required (str), a tuple of accepted models, or None for any model.
    """

    cpu_milli: int
    memory_bytes: int
    gpu_milli: int
    gpu_model: str | tuple[str, ...] | None = None

    def models(self) -> tuple[str, ...] | None:
        """Accepted models as a sorted tuple (``"A|B"`` splits), None for any."""
        if self.gpu_model is None:
            return None
        raw = (self.gpu_model,) if isinstance(self.gpu_model, str) else self.gpu_model
        out = sorted({m for item in raw for m in item.split("|") if m})
        return tuple(out) if out else None

    def per_gpu(self) -> int:
        """GPU milli asked on each GPU (``min(gpu_milli, 1000)``)."""
        return min(self.gpu_milli, WHOLE)

    def gpu_count(self) -> int:
        """Number of GPUs asked (1 for a share, k for k whole GPUs, 0 for none)."""
        if self.gpu_milli <= 0:
            return 0
        return max(1, self.gpu_milli // WHOLE)


class Workload:
    """The paper's target workload M: distinct pod shapes and their popularity (weights sum to 1).

    Raises (constructor):
        ValueError: shapes and weights differ in length, or a weight is negative.
    """

    def __init__(self, shapes: list[PodShape], weights: npt.NDArray[np.float64]) -> None:
        weights = np.asarray(weights, dtype=np.float64)
        if len(shapes) != len(weights):
            raise ValueError(f"{len(shapes)} shapes but {len(weights)} weights")
        if (weights < 0).any():
            raise ValueError("workload weights must be non-negative")
        total = float(weights.sum())
        self.shapes = list(shapes)
        self.weights: npt.NDArray[np.float64] = weights / total if total > 0 else weights
        self._build()

    @classmethod
    def from_shapes(cls, shapes: Iterable[PodShape]) -> Workload:
        """A workload counting equal shapes (popularity = count / total)."""
        counts: dict[PodShape, float] = {}
        for s in shapes:
            counts[s] = counts.get(s, 0.0) + 1.0
        return cls.from_counts(counts)

    @classmethod
    def from_counts(cls, counts: dict[PodShape, float]) -> Workload:
        """A workload from shape -> count (or any non-negative weight)."""
        shapes = list(counts)
        return cls(shapes, np.array([counts[s] for s in shapes], dtype=np.float64))

    def __len__(self) -> int:
        return len(self.shapes)

    def _build(self) -> None:
        """Group GPU shapes by (per-GPU milli, count, models) and sort shapes by group for reduceat."""
        groups: dict[tuple[int, int, tuple[str, ...] | None], list[int]] = {}
        for i, s in enumerate(self.shapes):
            if s.gpu_milli > 0 and self.weights[i] > 0:
                groups.setdefault((s.per_gpu(), s.gpu_count(), s.models()), []).append(i)
        keys = list(groups)
        order = [i for k in keys for i in groups[k]]
        self.group_per = np.array([k[0] for k in keys], dtype=np.int64)
        self.group_count = np.array([k[1] for k in keys], dtype=np.int64)
        self.group_models = [k[2] for k in keys]
        starts, pos = [], 0
        for k in keys:
            starts.append(pos)
            pos += len(groups[k])
        self.group_starts = np.array(starts, dtype=np.int64)
        self.shape_cpu = np.array([self.shapes[i].cpu_milli for i in order], dtype=np.int64)
        self.shape_mem = np.array([self.shapes[i].memory_bytes for i in order], dtype=np.int64)
        self.shape_p = np.array([self.weights[i] for i in order], dtype=np.float64)

    def access(self, gpu_models: Sequence[str]) -> npt.NDArray[np.bool_]:
        """(N, J) whether each node's GPU model is accepted by each group (``IsNodeAccessibleToPod``)."""
        n, j = len(gpu_models), len(self.group_models)
        out = np.ones((n, j), dtype=bool)
        constrained = [g for g, m in enumerate(self.group_models) if m is not None]
        if not constrained:
            return out
        by_model: dict[str, npt.NDArray[np.bool_]] = {}
        for i, model in enumerate(gpu_models):
            row = by_model.get(model)
            if row is None:
                row = np.array([m is None or model in m for m in self.group_models], dtype=bool)
                by_model[model] = row
            out[i] = row
        return out

    def fit_weights(self, free_cpu: npt.NDArray[np.int64], free_mem: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """(N, J) popularity of each group's shapes whose cpu and memory fit each node."""
        n = len(free_cpu)
        if len(self.group_per) == 0:
            return np.zeros((n, 0), dtype=np.float64)
        fit = (self.shape_cpu[None, :] <= free_cpu[:, None]) & (self.shape_mem[None, :] <= free_mem[:, None])
        weighted = np.where(fit, self.shape_p[None, :], 0.0)
        out: npt.NDArray[np.float64] = np.add.reduceat(weighted, self.group_starts, axis=1)
        return out


I64 = npt.NDArray[np.int64]


def _usable(free: I64, per: I64) -> tuple[I64, I64]:
    """(U, cnt), each (N, J): idle milli on, and number of, GPUs with ``free >= per_j`` (free < 0 = no GPU)."""
    ok = (free[:, :, None] >= per[None, None, :]) & (free[:, :, None] >= 0)
    u = np.where(ok, free[:, :, None], 0).sum(axis=1)
    return u, ok.sum(axis=1)


def node_fragmentation(
    workload: Workload,
    free_cpu_milli: npt.NDArray[np.int64],
    free_memory_bytes: npt.NDArray[np.int64],
    gpu_free_milli: npt.NDArray[np.int64],
    gpu_models: Sequence[str],
) -> npt.NDArray[np.float64]:
    """Expected fragmented GPU milli per node, ``F_n(M)`` of Weng et al. ATC'23.

    Args:
        workload: the target workload M.
        free_cpu_milli, free_memory_bytes: (N,) the node's unrequested cpu (milli) and memory (bytes).
        gpu_free_milli: (N, G) free milli per GPU slot, 0..1000; -1 = no such GPU or unhealthy.
        gpu_models: (N,) each node's GPU model ("" for none).

    Returns:
        (N,) float64 expected fragmented GPU milli.
    """
    free = np.asarray(gpu_free_milli, dtype=np.int64)
    total = np.where(free > 0, free, 0).sum(axis=1).astype(np.float64)
    if len(workload.group_per) == 0 or free.shape[0] == 0:
        return total * float(workload.weights.sum() > 0)
    u, cnt = _usable(free, workload.group_per)
    sat = cnt >= workload.group_count[None, :]
    w = workload.fit_weights(np.asarray(free_cpu_milli), np.asarray(free_memory_bytes)) * workload.access(gpu_models)
    out: npt.NDArray[np.float64] = total - (w * sat * u).sum(axis=1)
    return out


@dataclass(frozen=True, slots=True)
class Placement:
    """Best placement of one pod per node.

    Attributes:
        delta: (N,) growth of ``F_n(M)`` in GPU milli if the pod goes to its best GPU(s) there
            (+inf where the pod cannot be placed).
        slot: (N,) GPU slot of the best choice for a share (-1 for whole GPUs or none).
    """

    delta: npt.NDArray[np.float64]
    slot: npt.NDArray[np.int64]


def best_placement(
    workload: Workload,
    pod: PodShape,
    free_cpu_milli: npt.NDArray[np.int64],
    free_memory_bytes: npt.NDArray[np.int64],
    gpu_free_milli: npt.NDArray[np.int64],
    gpu_models: Sequence[str],
    feasible: npt.NDArray[np.bool_],
) -> Placement:
    """How much each node's fragmentation grows when ``pod`` is placed on its best GPU(s) there.

    A share (``0 < gpu_milli < 1000``) tries every feasible GPU slot and keeps the one with the least
    growth (lowest slot on ties), as FGD does; k whole GPUs take the first k fully idle slots
    (every choice among idle cards leaves the same fragmentation).

    Args:
        feasible: (N, G) slots the pod may use (the plugin's fit test); ignored for whole GPUs.

    Returns:
        :class:`Placement`; nodes without a feasible choice get ``delta = +inf``.
    """
    free = np.asarray(gpu_free_milli, dtype=np.int64)
    n = free.shape[0]
    cpu = np.asarray(free_cpu_milli, dtype=np.int64)
    mem = np.asarray(free_memory_bytes, dtype=np.int64)
    cpu_after, mem_after = cpu - pod.cpu_milli, mem - pod.memory_bytes
    if pod.gpu_milli >= WHOLE:
        before = node_fragmentation(workload, cpu, mem, free, gpu_models)
        k = pod.gpu_count()
        idle = free >= WHOLE
        take = idle & (np.cumsum(idle, axis=1) <= k)
        ok = idle.sum(axis=1) >= k
        after_free = np.where(take, 0, free)
        after = node_fragmentation(workload, cpu_after, mem_after, after_free, gpu_models)
        delta = np.where(ok, after - before, np.inf)
        return Placement(delta, np.full(n, -1, dtype=np.int64))
    r = pod.gpu_milli
    feasible = np.asarray(feasible, dtype=bool) & (free >= r)
    delta_g = np.full(free.shape, np.inf)
    live = np.flatnonzero(feasible.any(axis=1))  # only nodes with a candidate GPU are worth the (N, G, J) work
    if len(live):
        delta_g[live] = _share_deltas(
            workload, r, cpu[live], mem[live], pod, free[live], [gpu_models[int(i)] for i in live]
        )
    delta_g = np.where(feasible, delta_g, np.inf)
    slot = np.argmin(delta_g, axis=1).astype(np.int64) if free.shape[1] else np.zeros(n, dtype=np.int64)
    best = delta_g[np.arange(n), slot] if free.shape[1] else np.full(n, np.inf)
    slot = np.where(np.isfinite(best), slot, -1)
    return Placement(best, slot)


def _share_deltas(
    workload: Workload,
    r: int,
    cpu: I64,
    mem: I64,
    pod: PodShape,
    free: I64,
    gpu_models: Sequence[str],
) -> npt.NDArray[np.float64]:
    """(N, G) growth of F_n when a share of ``r`` milli goes to each slot (before feasibility masking).

    Only the chosen slot and the node's cpu/memory change, so U and cnt are updated per slot from the
    node's totals instead of recomputing F for every candidate.
    """
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
    access = workload.access(gpu_models)
    need = workload.group_count[None, :]
    w_before = workload.fit_weights(cpu, mem) * access
    before = total - (w_before * (cnt >= need) * u).sum(axis=1)
    w_after = workload.fit_weights(cpu - pod.cpu_milli, mem - pod.memory_bytes) * access
    u_after = u[:, None, :] - held_before + np.where(ok_after, g3, 0)
    cnt_after = cnt[:, None, :] - ok_before + ok_after
    after = (total - r)[:, None] - (w_after[:, None, :] * (cnt_after >= need[:, None, :]) * u_after).sum(axis=2)
    out: npt.NDArray[np.float64] = after - before[:, None]
    return out
