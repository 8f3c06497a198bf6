"""One node's GPUs: totals per minor, what pods use, and who uses what (upstream ``nodeDevice``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.plugins.deviceshare.allocation import GPUAllocation
from app.plugins.deviceshare.devices import GPUDevice


@dataclass(slots=True)
class NodeDevice:
    """GPU accounting of one node.

    Attributes:
        gpus: the Device object's GPUs by minor (empty until a Device is seen).
        has_device: a Device object exists for the node.
        used: minor -> summed resources of the pods' allocations (percents, bytes).
        pods: pod uid -> (``namespace/name``, its allocations on this node).
    """

    gpus: dict[int, GPUDevice] = field(default_factory=dict)
    has_device: bool = False
    used: dict[int, dict[str, int]] = field(default_factory=dict)
    pods: dict[str, tuple[str, list[GPUAllocation]]] = field(default_factory=dict)

    def total(self, minor: int) -> dict[str, int]:
        """Total of ``minor`` (empty when unhealthy or unknown)."""
        gpu = self.gpus.get(minor)
        return gpu.totals() if gpu is not None else {}

    def free(self, minor: int) -> dict[str, int]:
        """Free of ``minor``: total minus used, never negative (``SubtractWithNonNegativeResult``)."""
        total = self.total(minor)
        used = self.used.get(minor, {})
        return {k: max(0, total.get(k, 0) - used.get(k, 0)) for k in set(total) | set(used)}

    def add(self, uid: str, key: str, allocs: list[GPUAllocation]) -> None:
        """Account a pod's allocations (ignored if the pod is already accounted, as upstream's isValid)."""
        if uid in self.pods:
            return
        self.pods[uid] = (key, allocs)
        for a in allocs:
            used = self.used.setdefault(a.minor, {})
            for k, v in a.resources.items():
                used[k] = used.get(k, 0) + v

    def remove(self, uid: str) -> list[GPUAllocation] | None:
        """Release a pod's allocations; return them (None if the pod was not accounted)."""
        entry = self.pods.pop(uid, None)
        if entry is None:
            return None
        for a in entry[1]:
            used = self.used.get(a.minor)
            if used is None:
                continue
            for k, v in a.resources.items():
                used[k] = max(0, used.get(k, 0) - v)
            if not any(used.values()):
                del self.used[a.minor]
        return entry[1]

    def is_empty(self) -> bool:
        """No Device and no pod: the entry can be dropped."""
        return not self.has_device and not self.pods
