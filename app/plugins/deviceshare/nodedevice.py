"""One node's devices: GPU totals per minor, what pods use, and who uses what (upstream ``nodeDevice``).

GPUs keep their own fields (``gpus``, ``used``, ``pods``: the vectorised GPU table reads them). RDMA and
FPGA devices (and every device's labels and topology) are in ``infos``; pods' allocations of those types
are in ``extra``, their sums in ``other_used`` and the VFs they hold in ``vf_used``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.allocation import GPUAllocation
from app.plugins.deviceshare.allocator import TypeState
from app.plugins.deviceshare.devices import DeviceInfo, GPUDevice


@dataclass(slots=True)
class NodeDevice:
    """GPU accounting of one node.

    Attributes:
        gpus: the Device object's GPUs by minor (empty until a Device is seen).
        has_device: a Device object exists for the node.
        used: minor -> summed resources of the pods' allocations (percents, bytes).
        pods: pod uid -> (``namespace/name``, its GPU allocations on this node).
        infos: type -> minor -> device, every type (GPU labels and topology included).
        extra: pod uid -> type -> its non-GPU allocations on this node.
        other_used: type -> minor -> summed resources of non-GPU allocations.
        vf_used: type -> minor -> bus ids of VFs held by pods.
    """

    gpus: dict[int, GPUDevice] = field(default_factory=dict)
    has_device: bool = False
    used: dict[int, dict[str, int]] = field(default_factory=dict)
    pods: dict[str, tuple[str, list[GPUAllocation]]] = field(default_factory=dict)
    infos: dict[str, dict[int, DeviceInfo]] = field(default_factory=dict)
    extra: dict[str, dict[str, list[GPUAllocation]]] = field(default_factory=dict)
    other_used: dict[str, dict[int, dict[str, int]]] = field(default_factory=dict)
    vf_used: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    #: type -> its :class:`TypeState` without victims, built on demand, dropped by :meth:`invalidate`.
    _states: dict[str, TypeState] = field(default_factory=dict, init=False, repr=False)

    def invalidate(self) -> None:
        """Forget the memoised type states (devices or allocations changed)."""
        self._states.clear()

    def total(self, minor: int) -> dict[str, int]:
        """Total of ``minor`` (empty when unhealthy or unknown)."""
        gpu = self.gpus.get(minor)
        return gpu.totals() if gpu is not None else {}

    def free(self, minor: int, total: dict[str, int] | None = None) -> dict[str, int]:
        """Free of ``minor``: total minus used, never negative (``SubtractWithNonNegativeResult``);
        ``total``: :meth:`total` of ``minor`` when the caller has it already."""
        if total is None:
            total = self.total(minor)
        used = self.used.get(minor, {})
        return {k: max(0, total.get(k, 0) - used.get(k, 0)) for k in set(total) | set(used)}

    def add(
        self, uid: str, key: str, allocs: list[GPUAllocation], others: dict[str, list[GPUAllocation]] | None = None
    ) -> None:
        """Account a pod's GPU allocations and its ``others`` (type -> allocations of rdma/fpga); ignored if
        the pod is already accounted, as upstream's isValid."""
        if uid in self.pods:
            return
        self._states.clear()
        self.pods[uid] = (key, allocs)
        for a in allocs:
            used = self.used.setdefault(a.minor, {})
            for k, v in a.resources.items():
                used[k] = used.get(k, 0) + v
        others = {t: v for t, v in (others or {}).items() if v and t != n.GPU}
        if not others:
            return
        self.extra[uid] = others
        for kind, entries in others.items():
            of_type = self.other_used.setdefault(kind, {})
            for a in entries:
                used = of_type.setdefault(a.minor, {})
                for k, v in a.resources.items():
                    used[k] = used.get(k, 0) + v
                if a.vfs:
                    self.vf_used.setdefault(kind, {}).setdefault(a.minor, set()).update(vf.bus_id for vf in a.vfs)

    def remove(self, uid: str) -> list[GPUAllocation] | None:
        """Release a pod's allocations; return them (None if the pod was not accounted)."""
        entry = self.pods.pop(uid, None)
        if entry is None:
            return None
        self._states.clear()
        for a in entry[1]:
            used = self.used.get(a.minor)
            if used is None:
                continue
            for k, v in a.resources.items():
                used[k] = max(0, used.get(k, 0) - v)
            if not any(used.values()):
                del self.used[a.minor]
        for kind, entries in (self.extra.pop(uid, None) or {}).items():
            of_type = self.other_used.get(kind, {})
            vfs = self.vf_used.get(kind, {})
            for a in entries:
                res = of_type.get(a.minor)
                if res is not None:
                    for k, v in a.resources.items():
                        res[k] = max(0, res.get(k, 0) - v)
                    if not any(res.values()):
                        del of_type[a.minor]
                held = vfs.get(a.minor)
                if held is not None:
                    held.difference_update(vf.bus_id for vf in a.vfs)
                    if not held:
                        del vfs[a.minor]
        return entry[1]

    def others_of(self, uid: str) -> dict[str, list[GPUAllocation]]:
        """The non-GPU allocations of pod ``uid`` on this node (type -> allocations; empty when none)."""
        return self.extra.get(uid, {})

    def type_state(self, kind: str, give_back: list[str] | None = None) -> TypeState:
        """The allocator's view of the devices of ``kind`` (``gpu`` included), with the allocations of the
        pods in ``give_back`` (preemption victims) counted as free. Callers must not modify it: without
        victims it is memoised until the next allocation change or :meth:`invalidate`."""
        if not give_back:
            memo = self._states.get(kind)
            if memo is None:
                memo = self._states[kind] = self._type_state(kind, None)
            return memo
        return self._type_state(kind, give_back)

    def _type_state(self, kind: str, give_back: list[str] | None) -> TypeState:
        infos = self.infos.get(kind, {})
        if kind == n.GPU:
            used = {m: dict(u) for m, u in self.used.items()}
        else:
            used = {m: dict(u) for m, u in self.other_used.get(kind, {}).items()}
        vf_used = {m: set(v) for m, v in self.vf_used.get(kind, {}).items()}
        for uid in give_back or []:
            entry = self.pods.get(uid)
            if entry is None:
                continue
            back = entry[1] if kind == n.GPU else self.extra.get(uid, {}).get(kind, [])
            for a in back:
                res = used.get(a.minor, {})
                for k, v in a.resources.items():
                    res[k] = max(0, res.get(k, 0) - v)
                if a.minor in vf_used:
                    vf_used[a.minor].difference_update(vf.bus_id for vf in a.vfs)
        free = {}
        for minor, info in infos.items():
            total = info.total()
            if kind == n.GPU:
                gpu = self.gpus.get(minor)
                total = gpu.totals() if gpu is not None else {}
            u = used.get(minor, {})
            free[minor] = {k: max(0, v - u.get(k, 0)) for k, v in total.items()}
        return TypeState(infos, free, vf_used)

    def is_empty(self) -> bool:
        """No Device and no pod: the entry can be dropped."""
        return not self.has_device and not self.pods
