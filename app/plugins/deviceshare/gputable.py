"""Per-node GPU arrays indexed by the cache's node-table rows, so Filter and Score are numpy over a batch.

Shape ``(rows, G)`` with G the largest GPU count seen (slots in minor order; unused slots have
``minor = -1`` and zero totals). Rows follow :class:`~app.cache.nodetable.NodeTable` rows.

Besides the raw totals and frees, each row keeps what the hot paths would otherwise derive per call:
the free GPU milli the fragmentation model reads (``milli``), whether a slot can take any pod
(``live``) and a ``version`` stamp that changes whenever the row is written or cleared, so callers
can memoise per-row results and recompute only the rows that changed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.nodedevice import NodeDevice

_INT_FIELDS = ("minor", "core_total", "ratio_total", "mem_total", "core_free", "ratio_free", "mem_free", "milli")
#: Fields whose empty value is -1 (no device / no healthy GPU) rather than 0.
_NEG_FIELDS = ("minor", "milli")
_BOOL_FIELDS = ("usable", "live")


_GPU_RESOURCES = (n.RESOURCE_GPU_CORE, n.RESOURCE_GPU_MEMORY_RATIO, n.RESOURCE_GPU_MEMORY)


def _milli(total: dict[str, int], free: dict[str, int]) -> int:
    """Free GPU milli of one GPU for the fragmentation model: ``10*min(core, ratio)`` free percent
    (a GPU with only one of the two totals uses that one), -1 when neither total is positive."""
    has_core = total.get(n.RESOURCE_GPU_CORE, 0) > 0
    has_ratio = total.get(n.RESOURCE_GPU_MEMORY_RATIO, 0) > 0
    core, ratio = free.get(n.RESOURCE_GPU_CORE, 0), free.get(n.RESOURCE_GPU_MEMORY_RATIO, 0)
    if has_core and has_ratio:
        return 10 * min(core, ratio)
    if has_core:
        return 10 * core
    return 10 * ratio if has_ratio else -1


class GPUTable:
    """Row-indexed GPU state.

    Attributes (each ``(capacity, G)`` int64 unless noted):
        minor: device minor per slot, -1 for no device.
        core_total, ratio_total, mem_total: totals (percent, percent, bytes); 0 when unhealthy.
        core_free, ratio_free, mem_free: totals minus pods' allocations, never negative.
        milli: free GPU milli for the fragmentation model (see :meth:`free_milli`), -1 = no healthy GPU.
        usable: bool, the slot holds a healthy device with a non-zero total.
        live: bool, the slot has a non-zero total and some free resource (the Filter's base test).
        has_device: (capacity,) bool, the node has a Device object.
        gpu_count: (capacity,) int64, number of GPUs (healthy or not) in the Device.
        version: (capacity,) int64, stamp of the row's last write or clear (0 = never written);
            strictly increasing over the table's lifetime.
    """

    def __init__(self) -> None:
        self.capacity = 0
        self.width = 0
        self.minor: npt.NDArray[np.int64] = np.zeros((0, 0), dtype=np.int64)
        self.core_total = self.ratio_total = self.mem_total = self.minor
        self.core_free = self.ratio_free = self.mem_free = self.minor
        self.milli = self.minor
        self.usable: npt.NDArray[np.bool_] = np.zeros((0, 0), dtype=bool)
        self.live = self.usable
        self.has_device: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.gpu_count: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.version: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._clock = 0
        self._alloc(0, 0)

    def _alloc(self, capacity: int, width: int) -> None:
        old = {f: getattr(self, f) for f in (*_INT_FIELDS, *_BOOL_FIELDS, "has_device", "gpu_count", "version")}
        for f in _INT_FIELDS:
            arr = np.full((capacity, width), -1 if f in _NEG_FIELDS else 0, dtype=np.int64)
            src = old[f]
            arr[: src.shape[0], : src.shape[1]] = src
            setattr(self, f, arr)
        for f in _BOOL_FIELDS:
            flags = np.zeros((capacity, width), dtype=bool)
            flags[: old[f].shape[0], : old[f].shape[1]] = old[f]
            setattr(self, f, flags)
        for f in ("has_device", "gpu_count", "version"):
            arr1 = np.zeros(capacity, dtype=old[f].dtype)
            arr1[: old[f].shape[0]] = old[f]
            setattr(self, f, arr1)
        self.capacity, self.width = capacity, width

    def ensure(self, capacity: int, width: int = 0) -> None:
        """Grow to at least ``capacity`` rows and ``width`` slots (existing values kept)."""
        if capacity > self.capacity or width > self.width:
            self._alloc(max(capacity, self.capacity), max(width, self.width))

    def _stamp(self, row: int) -> None:
        self._clock += 1
        self.version[row] = self._clock

    def clear(self, row: int) -> None:
        """Reset ``row`` to "no Device"."""
        if row >= self.capacity:
            return
        for f in _INT_FIELDS:
            getattr(self, f)[row] = -1 if f in _NEG_FIELDS else 0
        self.usable[row] = False
        self.live[row] = False
        self.has_device[row] = False
        self.gpu_count[row] = 0
        self._stamp(row)

    def write(self, row: int, node: NodeDevice) -> None:
        """Write ``node``'s devices and free amounts into ``row`` (one slice assignment per field: the
        row is rewritten on every pod bound or released on the node)."""
        minors = sorted(node.gpus)
        self.ensure(row + 1, len(minors))
        self.clear(row)
        self.has_device[row] = node.has_device
        k = self.gpu_count[row] = len(minors)
        if k == 0:
            return
        totals = [node.total(minor) for minor in minors]
        frees = [node.free(minor, t) for minor, t in zip(minors, totals, strict=True)]
        self.minor[row, :k] = minors
        self.core_total[row, :k] = [t.get(n.RESOURCE_GPU_CORE, 0) for t in totals]
        self.ratio_total[row, :k] = [t.get(n.RESOURCE_GPU_MEMORY_RATIO, 0) for t in totals]
        self.mem_total[row, :k] = [t.get(n.RESOURCE_GPU_MEMORY, 0) for t in totals]
        self.core_free[row, :k] = [f.get(n.RESOURCE_GPU_CORE, 0) for f in frees]
        self.ratio_free[row, :k] = [f.get(n.RESOURCE_GPU_MEMORY_RATIO, 0) for f in frees]
        self.mem_free[row, :k] = [f.get(n.RESOURCE_GPU_MEMORY, 0) for f in frees]
        self.usable[row, :k] = [bool(t) and any(f.values()) for t, f in zip(totals, frees, strict=True)]
        self.milli[row, :k] = [_milli(t, f) for t, f in zip(totals, frees, strict=True)]
        core, ratio, mem = _GPU_RESOURCES
        self.live[row, :k] = [  # some total > 0 and some free > 0 (written out: no generator per GPU)
            (t.get(core, 0) > 0 or t.get(ratio, 0) > 0 or t.get(mem, 0) > 0)
            and (f.get(core, 0) > 0 or f.get(ratio, 0) > 0 or f.get(mem, 0) > 0)
            for t, f in zip(totals, frees, strict=True)
        ]

    def int_fields(self) -> tuple[npt.NDArray[np.int64], ...]:
        """Every (capacity, G) int64 array of the table (minor, totals, frees, milli), in a fixed order."""
        return tuple(getattr(self, f) for f in _INT_FIELDS)

    def free_milli(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """(len(rows), G) free GPU milli per slot for the fragmentation model: ``10*min(core, ratio)`` of
        healthy GPUs (a GPU without one of the two uses the other), -1 where no healthy GPU is.
        Precomputed when the row is written; this is a gather (take(): ~5x cheaper than fancy indexing
        of a 2-D array at a few hundred rows)."""
        out: npt.NDArray[np.int64] = self.milli.take(rows, axis=0)
        return out
