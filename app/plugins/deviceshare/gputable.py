"""Per-node GPU arrays indexed by the cache's node-table rows, so Filter and Score are numpy over a batch.

Shape ``(rows, G)`` with G the largest GPU count seen (slots in minor order; unused slots have
``minor = -1`` and zero totals). Rows follow :class:`~app.cache.nodetable.NodeTable` rows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.nodedevice import NodeDevice

_INT_FIELDS = ("minor", "core_total", "ratio_total", "mem_total", "core_free", "ratio_free", "mem_free")


class GPUTable:
    """Row-indexed GPU state.

    Attributes (each ``(capacity, G)`` int64 unless noted):
        minor: device minor per slot, -1 for no device.
        core_total, ratio_total, mem_total: totals (percent, percent, bytes); 0 when unhealthy.
        core_free, ratio_free, mem_free: totals minus pods' allocations, never negative.
        usable: bool, the slot holds a healthy device with a non-zero total.
        has_device: (capacity,) bool, the node has a Device object.
        gpu_count: (capacity,) int64, number of GPUs (healthy or not) in the Device.
    """

    def __init__(self) -> None:
        self.capacity = 0
        self.width = 0
        self.minor: npt.NDArray[np.int64] = np.zeros((0, 0), dtype=np.int64)
        self.core_total = self.ratio_total = self.mem_total = self.minor
        self.core_free = self.ratio_free = self.mem_free = self.minor
        self.usable: npt.NDArray[np.bool_] = np.zeros((0, 0), dtype=bool)
        self.has_device: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.gpu_count: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._alloc(0, 0)

    def _alloc(self, capacity: int, width: int) -> None:
        old = {f: getattr(self, f) for f in (*_INT_FIELDS, "usable", "has_device", "gpu_count")}
        for f in _INT_FIELDS:
            arr = np.full((capacity, width), -1 if f == "minor" else 0, dtype=np.int64)
            src = old[f]
            arr[: src.shape[0], : src.shape[1]] = src
            setattr(self, f, arr)
        usable = np.zeros((capacity, width), dtype=bool)
        usable[: old["usable"].shape[0], : old["usable"].shape[1]] = old["usable"]
        self.usable = usable
        for f in ("has_device", "gpu_count"):
            arr1 = np.zeros(capacity, dtype=old[f].dtype)
            arr1[: old[f].shape[0]] = old[f]
            setattr(self, f, arr1)
        self.capacity, self.width = capacity, width

    def ensure(self, capacity: int, width: int = 0) -> None:
        """Grow to at least ``capacity`` rows and ``width`` slots (existing values kept)."""
        if capacity > self.capacity or width > self.width:
            self._alloc(max(capacity, self.capacity), max(width, self.width))

    def clear(self, row: int) -> None:
        """Reset ``row`` to "no Device"."""
        if row >= self.capacity:
            return
        for f in _INT_FIELDS:
            getattr(self, f)[row] = -1 if f == "minor" else 0
        self.usable[row] = False
        self.has_device[row] = False
        self.gpu_count[row] = 0

    def write(self, row: int, node: NodeDevice) -> None:
        """Write ``node``'s devices and free amounts into ``row``."""
        minors = sorted(node.gpus)
        self.ensure(row + 1, len(minors))
        self.clear(row)
        self.has_device[row] = node.has_device
        self.gpu_count[row] = len(minors)
        for slot, minor in enumerate(minors):
            total = node.total(minor)
            free = node.free(minor)
            self.minor[row, slot] = minor
            self.core_total[row, slot] = total.get(n.RESOURCE_GPU_CORE, 0)
            self.ratio_total[row, slot] = total.get(n.RESOURCE_GPU_MEMORY_RATIO, 0)
            self.mem_total[row, slot] = total.get(n.RESOURCE_GPU_MEMORY, 0)
            self.core_free[row, slot] = free.get(n.RESOURCE_GPU_CORE, 0)
            self.ratio_free[row, slot] = free.get(n.RESOURCE_GPU_MEMORY_RATIO, 0)
            self.mem_free[row, slot] = free.get(n.RESOURCE_GPU_MEMORY, 0)
            self.usable[row, slot] = bool(total) and any(free.values())

    def free_milli(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """(len(rows), G) free GPU milli per slot for the fragmentation model: ``10*min(core, ratio)`` of
        healthy GPUs (a GPU without one of the two uses the other), -1 where no healthy GPU is."""
        core = self.core_free[rows]
        ratio = self.ratio_free[rows]
        has_core = self.core_total[rows] > 0
        has_ratio = self.ratio_total[rows] > 0
        pct = np.where(has_core & has_ratio, np.minimum(core, ratio), np.where(has_core, core, ratio))
        healthy = (self.minor[rows] >= 0) & (has_core | has_ratio)
        out: npt.NDArray[np.int64] = np.where(healthy, pct * 10, -1)
        return out
