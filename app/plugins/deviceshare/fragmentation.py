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
cpu/memory fit the node and ``sat_nj`` says the node has enough such GPUs.

How it is computed fast (no Python loop over nodes or shapes, and no (N, G, J) arrays):

- ``cnt_nj`` and ``U_nj`` come from a histogram of each node's free milli over the workload's
  distinct per-GPU levels (:func:`usable`); a :class:`RowMemo` keeps them per node-table row and
  recomputes only rows whose ``GPUTable.version`` stamp changed, together with ``F_n`` before
  placement (also keyed by the node's cpu/memory class);
- ``W_nj`` depends on the node only through its (cpu class, memory class): the number of distinct
  shape requests at or below its free cpu (memory); :meth:`Workload.code_weights_t` memoises it;
- :func:`best_placement` evaluates the "after" term only for candidate (node, distinct free value)
  pairs, in (J, K) layout with reusable buffers (:class:`Scratch`).

Every float operation is the one of the direct formulation on the same values (the per-row sum
over J is numpy's pairwise sum on a contiguous row in both), so results are bit-identical to it;
``tests/plugins/test_deviceshare_fgd_equivalence.py`` keeps that reference and checks it.

Units: cpu milli-cores, memory bytes, GPU milli (1000 = one whole card).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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
        """Group GPU shapes by (per-GPU milli, count, models) and sort shapes by group for reduceat;
        precompute the level tables the vectorised kernels use."""
        groups: dict[tuple[int, int, tuple[str, ...] | None], list[int]] = {}
        for i, s in enumerate(self.shapes):
            if s.gpu_milli > 0 and self.weights[i] > 0:
                groups.setdefault((s.per_gpu(), s.gpu_count(), s.models()), []).append(i)
        keys = list(groups)
        order = [i for k in keys for i in groups[k]]
        self.group_per = np.array([k[0] for k in keys], dtype=np.int64)
        self.group_count = np.array([k[1] for k in keys], dtype=np.int64)
        self.group_models = [k[2] for k in keys]
        self.constrained = any(m is not None for m in self.group_models)
        starts, pos = [], 0
        for k in keys:
            starts.append(pos)
            pos += len(groups[k])
        self.group_starts = np.array(starts, dtype=np.int64)
        self.shape_cpu = np.array([self.shapes[i].cpu_milli for i in order], dtype=np.int64)
        self.shape_mem = np.array([self.shapes[i].memory_bytes for i in order], dtype=np.int64)
        self.shape_p = np.array([self.weights[i] for i in order], dtype=np.float64)
        # distinct per-GPU milli (ascending); group j counts a GPU iff its level >= group_level[j]
        self.per_levels: npt.NDArray[np.int64] = np.unique(self.group_per)
        self.group_level: npt.NDArray[np.int64] = np.searchsorted(self.per_levels, self.group_per, side="left") + 1
        # cpu / memory classes: which shapes fit depends only on how many distinct requests are <= free
        self.cpu_levels: npt.NDArray[np.int64] = np.unique(self.shape_cpu)
        self.mem_levels: npt.NDArray[np.int64] = np.unique(self.shape_mem)
        self._class_rows = (len(self.cpu_levels) + 1) * (len(self.mem_levels) + 1)
        self._w_table: npt.NDArray[np.float64] | None = None
        self._w_done: npt.NDArray[np.bool_] | None = None
        self._access_by_model: dict[str, npt.NDArray[np.bool_]] = {}

    def access_row(self, model: str) -> npt.NDArray[np.bool_]:
        """(J,) whether a node of GPU ``model`` is accepted by each group (cached per model)."""
        row = self._access_by_model.get(model)
        if row is None:
            row = np.array([m is None or model in m for m in self.group_models], dtype=bool)
            self._access_by_model[model] = row
        return row

    def access(self, gpu_models: Sequence[str]) -> npt.NDArray[np.bool_]:
        """(N, J) whether each node's GPU model is accepted by each group (``IsNodeAccessibleToPod``)."""
        n, j = len(gpu_models), len(self.group_models)
        if not self.constrained or n == 0:
            return np.ones((n, j), dtype=bool)
        ids: dict[str, int] = {}
        codes = np.fromiter((ids.setdefault(m, len(ids)) for m in gpu_models), dtype=np.int64, count=n)
        table = np.array([self.access_row(m) for m in ids], dtype=bool).reshape(len(ids), j)
        out: npt.NDArray[np.bool_] = table[codes]
        return out

    def access_table(self, models: Sequence[str]) -> npt.NDArray[np.bool_]:
        """(K, J) :meth:`access_row` of each of ``models`` (a caller's model index)."""
        j = len(self.group_models)
        if not self.constrained:
            return np.ones((len(models), j), dtype=bool)
        return np.array([self.access_row(m) for m in models], dtype=bool).reshape(len(models), j)

    def fit_weights(self, free_cpu: npt.NDArray[np.int64], free_mem: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """(N, J) popularity of each group's shapes whose cpu and memory fit each node."""
        n = len(free_cpu)
        if len(self.group_per) == 0:
            return np.zeros((n, 0), dtype=np.float64)
        fit = (self.shape_cpu[None, :] <= free_cpu[:, None]) & (self.shape_mem[None, :] <= free_mem[:, None])
        weighted = np.where(fit, self.shape_p[None, :], 0.0)
        out: npt.NDArray[np.float64] = np.add.reduceat(weighted, self.group_starts, axis=1)
        return out

    def class_codes(self, free_cpu: npt.NDArray[np.int64], free_mem: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """(N,) int64 (cpu class, memory class) code of each node.

        A node's cpu (memory) class is the number of distinct shape cpu (memory) requests at or below
        its free cpu (memory): every node of a class fits exactly the same shapes.

        Args:
            free_cpu: (N,) int64 free cpu, milli-cores.
            free_mem: (N,) int64 free memory, bytes.
        """
        width = len(self.mem_levels) + 1
        cpu_class = np.searchsorted(self.cpu_levels, free_cpu, side="right")
        out: npt.NDArray[np.int64] = cpu_class * width + np.searchsorted(self.mem_levels, free_mem, side="right")
        return out

    def code_weights_t(
        self, code: npt.NDArray[np.int64], out: npt.NDArray[np.float64] | None = None
    ) -> npt.NDArray[np.float64]:
        """(J, N) C-contiguous :meth:`fit_weights` of nodes given by their (N,) :meth:`class_codes`
        (the kernels' layout), written into ``out`` (a (J, N) float64 buffer) when given.

        :meth:`fit_weights` runs once per class on a representative value and is memoised for the
        workload's lifetime (a dense table up to ``_MAX_CLASS_CELLS`` cells, else per call on the
        distinct classes).
        """
        j = len(self.group_per)
        width = len(self.mem_levels) + 1
        if j == 0:
            return np.zeros((0, len(code)), dtype=np.float64)
        if self._class_rows * j > _MAX_CLASS_CELLS:
            uniq, inv = np.unique(code, return_inverse=True)
            return np.take(self._class_fit(uniq, width).T, inv.reshape(-1), axis=1, out=out)
        if self._w_table is None or self._w_done is None:
            self._w_table = np.zeros((j, self._class_rows), dtype=np.float64)
            self._w_done = np.zeros(self._class_rows, dtype=bool)
        done = self._w_done[code]
        if not done.all():
            miss = np.unique(code[~done])
            self._w_table[:, miss] = self._class_fit(miss, width).T
            self._w_done[miss] = True
        res: npt.NDArray[np.float64] = np.take(self._w_table, code, axis=1, out=out)
        return res

    def _class_fit(self, codes: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.float64]:
        """:meth:`fit_weights` of a representative (cpu, memory) of each class code."""
        c, m = codes // width, codes % width
        rep_cpu = np.where(c > 0, self.cpu_levels[np.maximum(c - 1, 0)], self.cpu_levels[0] - 1)
        rep_mem = np.where(m > 0, self.mem_levels[np.maximum(m - 1, 0)], self.mem_levels[0] - 1)
        return self.fit_weights(rep_cpu.astype(np.int64), rep_mem.astype(np.int64))


#: Largest dense (cpu class x memory class x group) weight table a workload keeps.
_MAX_CLASS_CELLS = 4_000_000


I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


class Scratch:
    """Reusable work buffers, one flat buffer per name grown on demand.

    The kernels' (J, K) temporaries are ~200 KB each; allocating them per call goes through mmap or
    a heap that glibc trims on free, so every call page-faults them in again (about half the cost of
    a score call). Not thread-safe: one per caller (the plugin is called from the event loop).
    """

    def __init__(self) -> None:
        self._bufs: dict[str, npt.NDArray[Any]] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: type[np.generic]) -> npt.NDArray[Any]:
        """A C-contiguous ``shape`` view of buffer ``name`` (contents undefined)."""
        size = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf = self._bufs[name] = np.empty(max(size, 2 * (buf.size if buf is not None else 0)), dtype=dtype)
        return buf[:size].reshape(shape)


def _buffer(scratch: Scratch | None, name: str, shape: tuple[int, ...], dtype: type[np.generic]) -> npt.NDArray[Any]:
    return np.empty(shape, dtype=dtype) if scratch is None else scratch.get(name, shape, dtype)


@dataclass(frozen=True, slots=True)
class Usable:
    """The GPU-only terms of F per node for one workload (J groups), in the kernels' layout.

    Node ``i`` of the caller's batch is array row ``index[i]`` (or row ``i`` when ``index`` is None),
    so a memo (:class:`RowMemo`) hands out its row-indexed arrays without copying them. Per-group
    arrays are stored transposed, (J, R): numpy ops over long contiguous rows instead of R short ones.

    Attributes:
        total: (R,) int64 idle GPU milli of the node (``T_n``).
        cnt_t: (J, R) int64 number of GPUs with ``free >= per_j``.
        u_t: (J, R) int64 idle milli on those GPUs (``U_nj``).
        rep: (R, G) int64 per slot, the first slot of the node holding the same free value.
        index: (N,) int64 array row of each node, or None for the identity.
        memo: the :class:`RowMemo` the arrays belong to (it also memoises ``F_n`` before placement).
    """

    total: I64
    cnt_t: I64
    u_t: I64
    rep: I64
    index: I64 | None = None
    memo: RowMemo | None = None

    def rows(self, positions: I64) -> I64:
        """Array rows of the nodes at ``positions``."""
        return positions if self.index is None else self.index[positions]


def usable(workload: Workload, free: I64) -> Usable:
    """:class:`Usable` of each node of ``free`` (N, G) free milli per slot (-1 = no healthy GPU).

    ``cnt`` and ``U`` come from one histogram over the workload's distinct per-GPU levels instead of
    an (N, G, J) comparison; integer results, identical to counting ``free >= per_j`` slot by slot.
    """
    free = np.asarray(free, dtype=np.int64)
    n, g = free.shape
    pos = np.where(free > 0, free, 0)
    total: I64 = pos.sum(axis=1)
    rep: I64 = np.argmax(free[:, :, None] == free[:, None, :], axis=2) if g else np.zeros((n, 0), dtype=np.int64)
    j = len(workload.group_per)
    if n == 0 or g == 0 or j == 0:
        zeros = np.zeros((j, n), dtype=np.int64)
        return Usable(total, zeros, zeros.copy(), rep)
    levels = workload.per_levels
    width = len(levels) + 1
    lvl = np.searchsorted(levels, free, side="right")  # free < per_min (incl. -1 and 0) -> level 0
    idx = (np.arange(n, dtype=np.int64)[:, None] * width + lvl).ravel()
    # per node and level: number of GPUs and their idle milli (float64 sums of small integers are exact)
    hist = np.bincount(idx, minlength=n * width).reshape(n, width).T
    sums = np.bincount(idx, weights=pos.ravel().astype(np.float64), minlength=n * width).astype(np.int64)
    # levels >= l, accumulated along the long node axis; group j reads its own level's row
    cnt_ge = np.cumsum(hist[::-1], axis=0)[::-1]
    sum_ge = np.cumsum(sums.reshape(n, width).T[::-1], axis=0)[::-1]
    cols = workload.group_level
    return Usable(total, cnt_ge[cols].astype(np.int64), sum_ge[cols].astype(np.int64), rep)


class RowMemo:
    """:class:`Usable` per node-table row, recomputed only for rows whose stamp changed, plus ``F_n``
    before placement per row (valid while the row's stamp and its cpu/memory class hold).

    The GPU terms of a node depend on its free-milli vector and the workload only; the caller passes
    a stamp per row that changes whenever the row's GPUs (or GPU model) change (``GPUTable.version``).
    A different workload object (a rebuilt learned workload) or a wider table resets the memo.
    """

    def __init__(self) -> None:
        self.workload: Workload | None = None
        self.stamp: I64 = np.zeros(0, dtype=np.int64)
        self.data = usable(_EMPTY, np.zeros((0, 0), dtype=np.int64))
        self.recomputed = 0
        self.f_value: F64 = np.zeros(0, dtype=np.float64)
        self.f_code: I64 = np.zeros(0, dtype=np.int64)
        self.f_valid: B = np.zeros(0, dtype=bool)
        self.scratch = Scratch()

    def get(self, workload: Workload, rows: I64, stamps: I64, free: I64) -> Usable:
        """:class:`Usable` of the nodes at table ``rows`` (N,), with stamps (N,) and free milli (N, G).

        Returns a view whose ``index`` is ``rows`` (arrays are the memo's own; do not modify).
        """
        rows = np.asarray(rows, dtype=np.int64)
        g = free.shape[1]
        j = len(workload.group_per)
        cap = int(rows.max()) + 1 if len(rows) else 0
        d = self.data
        if workload is not self.workload or d.rep.shape[1] != g or d.cnt_t.shape[0] != j:
            self.workload = workload
            self.stamp = np.zeros(0, dtype=np.int64)
            self.f_value, self.f_code, self.f_valid = np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
            d = self.data = usable(workload, np.zeros((0, g), dtype=np.int64))
        if cap > len(self.stamp):
            grow = max(cap, 2 * len(self.stamp)) - len(self.stamp)
            self.stamp = np.concatenate([self.stamp, np.full(grow, -1, dtype=np.int64)])
            self.f_value = np.concatenate([self.f_value, np.zeros(grow)])
            self.f_code = np.concatenate([self.f_code, np.zeros(grow, dtype=np.int64)])
            self.f_valid = np.concatenate([self.f_valid, np.zeros(grow, dtype=bool)])
            d = self.data = Usable(
                np.concatenate([d.total, np.zeros(grow, dtype=np.int64)]),
                np.concatenate([d.cnt_t, np.zeros((j, grow), dtype=np.int64)], axis=1),
                np.concatenate([d.u_t, np.zeros((j, grow), dtype=np.int64)], axis=1),
                np.concatenate([d.rep, np.zeros((grow, g), dtype=np.int64)]),
            )
        stale = np.flatnonzero(self.stamp[rows] != stamps)
        if len(stale):
            fresh = usable(workload, free[stale])
            at = rows[stale]
            d.total[at], d.rep[at] = fresh.total, fresh.rep
            d.cnt_t[:, at], d.u_t[:, at] = fresh.cnt_t, fresh.u_t
            self.stamp[at] = stamps[stale]
            self.f_valid[at] = False
            self.recomputed += len(stale)
        return Usable(d.total, d.cnt_t, d.u_t, d.rep, rows, self)

    def before(self, rows: I64, codes: I64, compute: Callable[[I64], F64]) -> F64:
        """(N,) memoised ``F_n`` of array ``rows`` (already refreshed by :meth:`get`) whose (cpu, memory)
        class is ``codes``; ``compute(positions)`` gives the values of the positions that miss.

        A row's model access must change only with its stamp (the plugin's model index does).
        """
        ok = self.f_valid[rows] & (self.f_code[rows] == codes)
        if not ok.all():
            miss = np.flatnonzero(~ok)
            at = rows[miss]
            self.f_value[at] = compute(miss)
            self.f_code[at] = codes[miss]
            self.f_valid[at] = True
        out: F64 = self.f_value[rows]
        return out


def _frag_t(total: I64, w_t: F64, sat_t: B, u_t: I64, scratch: Scratch | None = None) -> F64:
    """(K,) ``T - sum_j (w_j * sat_j) * U_j`` from (J, K) operands; ``w_t`` is overwritten.

    Element by element the same float operations as the direct (N, G, J) formulation; the (K, J)
    products are summed along their contiguous J axis (numpy's pairwise sum per row), as there.
    """
    np.multiply(w_t, sat_t, out=w_t)
    np.multiply(w_t, u_t, out=w_t)
    prod = _buffer(scratch, "prod", (w_t.shape[1], w_t.shape[0]), np.float64)
    np.copyto(prod, w_t.T)
    out: F64 = total.astype(np.float64) - prod.sum(axis=1)
    return out


def _weights_t(workload: Workload, cpu: I64, mem: I64, access: B | None, scratch: Scratch | None = None) -> F64:
    """(J, N) ``fit_weights * access``: popularity of fitting, model-accepted shapes per group;
    ``access`` (N, J) None = every group accepts every node (multiplying by True is exact)."""
    codes = workload.class_codes(cpu, mem)
    w_t = workload.code_weights_t(codes, out=_buffer(scratch, "w", (len(workload.group_per), len(codes)), np.float64))
    if access is not None:
        np.multiply(w_t, access.T, out=w_t)
    return w_t


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
    if len(workload.group_per) == 0 or free.shape[0] == 0:
        total = np.where(free > 0, free, 0).sum(axis=1).astype(np.float64)
        return total * float(workload.weights.sum() > 0)
    use = usable(workload, free)
    w_t = _weights_t(
        workload,
        np.asarray(free_cpu_milli, dtype=np.int64),
        np.asarray(free_memory_bytes, dtype=np.int64),
        workload.access(gpu_models) if workload.constrained else None,
    )
    return _frag_t(use.total, w_t, use.cnt_t >= workload.group_count[:, None], use.u_t)


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
    access: npt.NDArray[np.bool_] | None = None,
    gpu_terms: Usable | None = None,
) -> Placement:
    """How much each node's fragmentation grows when ``pod`` is placed on its best GPU(s) there.

    A share (``0 < gpu_milli < 1000``) tries every feasible GPU slot and keeps the one with the least
    growth (lowest slot on ties), as FGD does; k whole GPUs take the first k fully idle slots
    (every choice among idle cards leaves the same fragmentation).

    Only nodes where the pod can go are evaluated, and a share once per distinct free value among a
    node's feasible slots (equal free values give equal growth). Before/after terms use the
    per-level counts of :func:`usable` and the per-class weights of :meth:`Workload.code_weights_t`:
    O(N*G + K*J) for K candidate (node, value) pairs instead of O(N*G*J). Results are bit-identical
    to evaluating every slot of every node.

    Args:
        workload: the target workload M.
        pod: the pod being placed (its ``gpu_model`` is not read: model constraints come from the nodes).
        free_cpu_milli, free_memory_bytes: (N,) the node's unrequested cpu (milli) and memory (bytes).
        gpu_free_milli: (N, G) free milli per GPU slot; -1 = no such GPU or unhealthy.
        gpu_models: (N,) each node's GPU model ("" for none); not read when ``access`` is given.
        feasible: (N, G) slots the pod may use (the plugin's fit test); ignored for whole GPUs.
        access: optional (N, J) bool, ``workload.access(gpu_models)`` precomputed by the caller.
        gpu_terms: optional :func:`usable` of ``gpu_free_milli`` for this workload, e.g. from a
            :class:`RowMemo` (which also memoises the before-placement term); computed for the
            candidate nodes when None.

    Returns:
        :class:`Placement`; nodes without a feasible choice get ``delta = +inf``.
    """
    free = np.asarray(gpu_free_milli, dtype=np.int64)
    n, g = free.shape
    cpu = np.asarray(free_cpu_milli, dtype=np.int64)
    mem = np.asarray(free_memory_bytes, dtype=np.int64)
    if pod.gpu_milli >= WHOLE:
        return _place_whole(workload, pod, cpu, mem, free, gpu_models, access, gpu_terms)
    slot_out = np.full(n, -1, dtype=np.int64)
    delta = np.full(n, np.inf)
    r = pod.gpu_milli
    feas = np.asarray(feasible, dtype=bool) & (free >= r)
    e = np.flatnonzero(feas)  # feasible (node, slot) entries, node-major
    if g == 0 or len(e) == 0:
        return Placement(delta, slot_out)
    node, slot = np.divmod(e, g)
    start = np.empty(len(e), dtype=bool)
    start[0] = True
    np.not_equal(node[1:], node[:-1], out=start[1:])
    live = node[start]  # (L,) nodes with a candidate GPU: the only ones worth the work
    seg = np.flatnonzero(start)
    lidx = np.cumsum(start) - 1  # entry -> position in live
    j = len(workload.group_per)
    terms = gpu_terms if gpu_terms is not None else usable(workload if j else _EMPTY, free[live])
    arow_live = terms.rows(live) if gpu_terms is not None else np.arange(len(live), dtype=np.int64)
    arow = arow_live[lidx]
    # one slot per distinct free value: an entry takes the growth of the node's first slot holding
    # its value when that slot is feasible, else it is evaluated itself
    rep = terms.rep[arow, slot]
    rep_flat = node * g + rep
    rep_ok = feas.ravel()[rep_flat]
    cand = np.flatnonzero((rep == slot) | ~rep_ok)
    source = (np.cumsum(feas.ravel()) - 1)[np.where(rep_ok, rep_flat, e)]  # position in e of that slot
    v = free.ravel()[e[cand]]
    flag = float(workload.weights.sum() > 0)
    if j == 0:
        grow = np.full(len(cand), -float(r) * flag)
    else:
        acc_live = _access_rows(workload, gpu_models, access, live)
        before = _before(workload, terms, arow_live, cpu[live], mem[live], acc_live)
        at, cl = arow[cand], lidx[cand]
        sc = terms.memo.scratch if terms.memo is not None else None
        shape = (j, len(cand))
        per = workload.group_per[:, None]
        held = v[None, :] >= per  # (J, K): the slot counted for group j before (v >= r >= 0 here)
        gain = (v - r)[None, :] >= per  # ... and still counts after (gain implies held)
        # U loses v where the slot drops out of group j, r where it stays; cnt drops where it leaves
        lost = np.multiply(held, v[None, :], out=_buffer(sc, "lost", shape, np.int64))
        u_after = np.take(terms.u_t, at, axis=1, out=_buffer(sc, "u", shape, np.int64))
        np.subtract(u_after, lost, out=u_after)
        np.add(u_after, np.multiply(gain, (v - r)[None, :], out=lost), out=u_after)
        cnt_after = np.take(terms.cnt_t, at, axis=1, out=_buffer(sc, "cnt", shape, np.int64))
        np.subtract(cnt_after, held ^ gain, out=cnt_after)
        sat_after = cnt_after >= workload.group_count[:, None]
        nodes_c = node[cand]
        w_after = _weights_t(
            workload,
            cpu[nodes_c] - pod.cpu_milli,
            mem[nodes_c] - pod.memory_bytes,
            None if acc_live is None else acc_live[cl],
            sc,
        )
        grow = _frag_t(terms.total[at] - r, w_after, sat_after, u_after, sc) - before[cl]
    per_entry = np.empty(len(e))
    per_entry[cand] = grow
    per_entry = per_entry[source]
    best = np.minimum.reduceat(per_entry, seg)
    # lowest slot reaching the node's minimum (argmin's tie rule; entries are in slot order)
    hit = np.flatnonzero(per_entry == best[lidx])
    first = np.empty(len(hit), dtype=bool)
    first[0] = True
    np.not_equal(node[hit[1:]], node[hit[:-1]], out=first[1:])
    delta[live] = best
    slot_out[live] = slot[hit[first]]
    return Placement(delta, slot_out)


def slot_growth(
    workload: Workload,
    pod: PodShape,
    free_cpu_milli: int,
    free_memory_bytes: int,
    gpu_free_milli: npt.NDArray[np.int64],
    gpu_model: str,
    feasible: npt.NDArray[np.bool_],
    gpu_terms: Usable | None = None,
) -> npt.NDArray[np.float64]:
    """(G,) growth of one node's ``F_n(M)`` (GPU milli) if the share ``pod`` goes to each GPU slot.

    Slots the pod cannot use (not ``feasible``, or less free milli than it asks) get +inf. One
    :func:`best_placement` call over G copies of the node, copy g allowed slot g only.

    Args:
        gpu_free_milli: (G,) free milli per slot of the node (-1 = no such GPU or unhealthy).
        gpu_model: the node's GPU model ("" for none).
        feasible: (G,) slots the plugin's fit test allows.
        gpu_terms: optional :func:`usable` of the G copies, e.g. a :class:`RowMemo`'s for the node's
            table row given G times (same results, without recomputing the node's terms).

    Raises:
        ValueError: ``pod`` is not a share (``0 < gpu_milli < 1000``).
    """
    if not 0 < pod.gpu_milli < WHOLE:
        raise ValueError(f"slot_growth needs a share of one GPU, got {pod.gpu_milli} milli")
    free = np.asarray(gpu_free_milli, dtype=np.int64)
    g = len(free)
    if g == 0:
        return np.zeros(0, dtype=np.float64)
    placement = best_placement(
        workload,
        pod,
        np.full(g, free_cpu_milli, dtype=np.int64),
        np.full(g, free_memory_bytes, dtype=np.int64),
        np.broadcast_to(free, (g, g)),
        [gpu_model] * g,
        np.diag(np.asarray(feasible, dtype=bool)),
        gpu_terms=gpu_terms,
    )
    return placement.delta


def sigmoid_score(delta: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """The FGD reference's integer score of each growth: ``int(sigmoid(-delta / 1000) * 100)``, 0..100
    (hkust-adsl/kubernetes-scheduler-simulator ``fgd_score.go``; +inf growth scores 0)."""
    # clip(x, -700, 700) as maximum/minimum in place (same values, NaN included; a third of clip's
    # cost); exp(700) does not overflow, so no errstate is needed
    x = np.divide(np.asarray(delta, dtype=np.float64), 1000.0)
    np.maximum(x, -700.0, out=x)
    np.minimum(x, 700.0, out=x)
    np.exp(x, out=x)
    np.add(x, 1.0, out=x)
    np.divide(1.0, x, out=x)
    np.multiply(x, 100, out=x)
    out: npt.NDArray[np.int64] = x.astype(np.int64)
    return out


def no_gpu_growth(
    workload: Workload,
    pod: PodShape,
    free_cpu_milli: npt.NDArray[np.int64],
    free_memory_bytes: npt.NDArray[np.int64],
    gpu_free_milli: npt.NDArray[np.int64],
    gpu_models: Sequence[str],
    access: npt.NDArray[np.bool_] | None = None,
    gpu_terms: Usable | None = None,
) -> npt.NDArray[np.float64]:
    """(N,) growth of ``F_n(M)`` when a pod asking no GPU goes to each node (>= 0).

    The node's GPUs stay as they are; only the cpu and memory the pod takes can make workload shapes
    stop fitting, turning the idle milli of the GPUs they could use into fragment (the reference FGD
    scores such pods too: ``NodeResource.Sub`` of a pod without GPUs). Nodes without idle GPU milli
    grow by 0. Arguments as :func:`best_placement` (``pod.gpu_milli`` is not read).
    """
    free = np.asarray(gpu_free_milli, dtype=np.int64)
    n = free.shape[0]
    delta = np.zeros(n, dtype=np.float64)
    j = len(workload.group_per)
    if n == 0 or j == 0 or free.shape[1] == 0:
        return delta
    cpu = np.asarray(free_cpu_milli, dtype=np.int64)
    mem = np.asarray(free_memory_bytes, dtype=np.int64)
    if gpu_terms is None:
        gpu_terms = usable(workload, free)
        all_rows = np.arange(n, dtype=np.int64)
    else:
        all_rows = gpu_terms.rows(np.arange(n, dtype=np.int64))
    live = np.flatnonzero(gpu_terms.total[all_rows] > 0)
    if len(live) == 0:
        return delta
    at = all_rows[live]
    acc = _access_rows(workload, gpu_models, access, live)
    before = _before(workload, gpu_terms, at, cpu[live], mem[live], acc)
    sc = gpu_terms.memo.scratch if gpu_terms.memo is not None else None
    w_after = _weights_t(workload, cpu[live] - pod.cpu_milli, mem[live] - pod.memory_bytes, acc, sc)
    sat = np.take(gpu_terms.cnt_t, at, axis=1) >= workload.group_count[:, None]
    after = _frag_t(gpu_terms.total[at], w_after, sat, np.take(gpu_terms.u_t, at, axis=1), sc)
    delta[live] = after - before
    return delta


def _place_whole(
    workload: Workload,
    pod: PodShape,
    cpu: I64,
    mem: I64,
    free: I64,
    gpu_models: Sequence[str],
    access: B | None,
    gpu_terms: Usable | None,
) -> Placement:
    """:func:`best_placement` of k whole GPUs: the first k fully idle slots."""
    n = free.shape[0]
    delta = np.full(n, np.inf)
    no_slot = np.full(n, -1, dtype=np.int64)
    k = pod.gpu_count()
    idle = free >= WHOLE
    live = np.flatnonzero(np.count_nonzero(idle, axis=1) >= k)
    if len(live) == 0:
        return Placement(delta, no_slot)
    fl = free[live]
    if free.size and int(free.max()) <= WHOLE:
        taken: I64 = np.full(len(live), k * WHOLE, dtype=np.int64)  # every idle card has exactly 1000
    else:
        idle_l = idle[live]
        taken = np.where(idle_l & (np.cumsum(idle_l, axis=1) <= k), fl, 0).sum(axis=1)
    j = len(workload.group_per)
    if j == 0:
        flag = float(workload.weights.sum() > 0)
        total = np.where(fl > 0, fl, 0).sum(axis=1)
        delta[live] = (total - taken).astype(np.float64) * flag - total.astype(np.float64) * flag
        return Placement(delta, no_slot)
    terms = gpu_terms if gpu_terms is not None else usable(workload, fl)
    at = terms.rows(live) if gpu_terms is not None else np.arange(len(live), dtype=np.int64)
    acc = _access_rows(workload, gpu_models, access, live)
    before = _before(workload, terms, at, cpu[live], mem[live], acc)
    sc = terms.memo.scratch if terms.memo is not None else None
    shape = (j, len(live))
    w_after = _weights_t(workload, cpu[live] - pod.cpu_milli, mem[live] - pod.memory_bytes, acc, sc)
    # the k taken cards had free >= 1000 >= every per_j: each group loses them, none regains
    cnt_after = np.take(terms.cnt_t, at, axis=1, out=_buffer(sc, "cnt", shape, np.int64))
    sat_after = cnt_after >= workload.group_count[:, None] + k
    u_after = np.take(terms.u_t, at, axis=1, out=_buffer(sc, "u", shape, np.int64))
    np.subtract(u_after, taken[None, :], out=u_after)
    delta[live] = _frag_t(terms.total[at] - taken, w_after, sat_after, u_after, sc) - before
    return Placement(delta, no_slot)


def _before(workload: Workload, terms: Usable, at: I64, cpu: I64, mem: I64, acc: B | None) -> F64:
    """(L,) ``F_n`` before placement of the nodes at array rows ``at`` of ``terms`` (their cpu,
    memory and access given), from the :class:`RowMemo` behind ``terms`` when there is one."""

    def compute(pos: I64) -> F64:
        rows = at[pos]
        w_t = _weights_t(workload, cpu[pos], mem[pos], None if acc is None else acc[pos])
        sat_t = np.take(terms.cnt_t, rows, axis=1) >= workload.group_count[:, None]
        return _frag_t(terms.total[rows], w_t, sat_t, np.take(terms.u_t, rows, axis=1))

    if terms.memo is None:
        return compute(np.arange(len(at), dtype=np.int64))
    return terms.memo.before(at, workload.class_codes(cpu, mem), compute)


def _access_rows(workload: Workload, gpu_models: Sequence[str], access: B | None, live: I64) -> B | None:
    """(len(live), J) model access of the ``live`` nodes, from ``access`` when given; None when the
    workload has no model-constrained group (every node is accessible)."""
    if not workload.constrained:
        return None
    if access is not None:
        return np.asarray(access, dtype=bool)[live]
    return workload.access([gpu_models[int(i)] for i in live])


_EMPTY = Workload([], np.zeros(0))
