"""The plugin's device cache: Device, Node and Pod events kept as per-node GPU state and numpy rows.

Mirrors upstream ``nodeDeviceCache`` (``device_cache.go``, ``eventhandler_device.go``,
``eventhandler_pod.go``): a Device sets a node's totals; a bound, non-terminated pod with a
``device-allocated`` annotation uses what it lists; Reserve accounts the chosen GPUs at once and a
later event of the same pod without the annotation keeps them (the annotation may still be on its
way); a pod that is deleted, terminated or unbound releases them. Changed nodes are written into
the :class:`GPUTable` rows lazily, before the next Filter/Score.

Reservations: an active Reservation's ``device-allocated`` GPUs are accounted under its reserve pod's
uid, less what its owner pods took from it (:mod:`.reserved`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from app.api.reservation import ALLOCATE_POLICY_RESTRICTED, allocate_policy, allocated_ref, is_active, reserve_pod_uid
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo
from app.framework.handle import Handle
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.allocation import (
    AllocationError,
    GPUAllocation,
    parse_allocations,
    parse_device_allocations,
)
from app.plugins.deviceshare.devices import DeviceError, parse_device, parse_device_infos
from app.plugins.deviceshare.gputable import GPUTable
from app.plugins.deviceshare.nodedevice import NodeDevice
from app.plugins.deviceshare.reserved import ReservedGPUs

log = logging.getLogger(__name__)


class DeviceCache(CacheListener):
    """Per-node GPU accounting fed by the snapshot cache.

    Args:
        handle: the framework handle (registers itself as a listener, which replays current state;
            reads node rows from its snapshot).
        on_pod_seen: called with every pod event's new view (workload learning), or None.
    """

    def __init__(self, handle: Handle, on_pod_seen: Callable[[PodInfo], None] | None = None) -> None:
        self.snapshot = handle.snapshot
        self.nodes: dict[str, NodeDevice] = {}
        self.pod_node: dict[str, str] = {}
        self.models: dict[str, str] = {}
        self.table = GPUTable()
        self._rows: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._on_pod_seen = on_pod_seen
        #: reservation name -> its GPUs; reserve pod uid -> reservation name.
        self.reservations: dict[str, ReservedGPUs] = {}
        self._reservation_of_uid: dict[str, str] = {}
        #: owner pod uid -> reservation name it takes GPUs from (linked at Reserve or by its annotation).
        self._owner_link: dict[str, str] = {}
        self._linked_at_reserve: dict[str, str] = {}
        handle.add_listener(self)

    # ------------------------------------------------------------------ events
    def _node(self, name: str) -> NodeDevice:
        nd = self.nodes.get(name)
        if nd is None:
            nd = self.nodes[name] = NodeDevice()
        return nd

    def on_node(self, name: str, node: NodeState | None) -> None:
        """Track the node's GPU model label and (re)write its row."""
        if node is None:
            self.models.pop(name, None)
        else:
            self.models[name] = str(node.labels.get(n.LABEL_GPU_MODEL, ""))
        self._dirty.add(name)

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """A Device (named after its node) sets or clears the node's GPU totals; a Reservation holds GPUs."""
        if kind == "Reservation":
            self._on_reservation(key, obj)
            return
        if kind != "Device":
            return
        nd = self._node(key)
        if obj is None:
            nd.gpus, nd.infos, nd.has_device = {}, {}, False
        else:
            try:
                gpus = parse_device(obj)
            except DeviceError as exc:
                log.warning("ignoring malformed Device %s: %s", key, exc)
                gpus = []
            try:
                infos = parse_device_infos(obj)
            except DeviceError as exc:
                log.warning("ignoring the RDMA/FPGA devices of malformed Device %s: %s", key, exc)
                infos = {}
            nd.gpus = {g.minor: g for g in gpus}
            nd.infos = infos
            nd.has_device = True
        nd.invalidate()
        if nd.is_empty():
            del self.nodes[key]
        self._dirty.add(key)

    # ------------------------------------------------------------------ reservations
    def _on_reservation(self, name: str, obj: dict[str, Any] | None) -> None:
        """Account an active Reservation's GPUs; a finished or deleted one releases them. A Pending one
        (being placed: Reserve accounted its GPUs already) is left as it is."""
        current = self.reservations.get(name)
        phase = (obj.get("status") or {}).get("phase") if obj is not None else None
        if obj is None or phase in ("Succeeded", "Failed"):
            if current is not None:
                del self.reservations[name]
                self._reservation_of_uid.pop(current.uid, None)
                self.release(current.uid)
            elif obj is not None:
                self.release(reserve_pod_uid(obj))
            return
        if not is_active(obj):
            return
        raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(n.ANNOTATION_DEVICE_ALLOCATED)
        try:
            reserved = parse_allocations(raw) if raw else []
        except AllocationError as exc:
            log.warning("reservation %s: ignoring its device allocation: %s", name, exc)
            reserved = []
        uid, node = reserve_pod_uid(obj), str(obj["status"]["nodeName"])
        owners = current.owners if current is not None else {}
        if current is not None and current.uid != uid:
            self._reservation_of_uid.pop(current.uid, None)
            self.release(current.uid)
        restricted = allocate_policy(obj) == ALLOCATE_POLICY_RESTRICTED
        self.reservations[name] = ReservedGPUs(uid, node, reserved, owners, restricted)
        self._reservation_of_uid[uid] = name
        for pod_uid, linked in self._owner_link.items():  # owners seen before their reservation
            if linked == name and pod_uid not in owners:
                held = self.allocations_of(pod_uid)
                if held is not None:
                    owners[pod_uid] = held[1]
        self._refresh_reservation(name)

    def _refresh_reservation(self, name: str) -> None:
        r = self.reservations.get(name)
        if r is None:
            return
        self.release(r.uid)
        remainder = r.remainder()
        if remainder:
            self.account(r.uid, f"Reservation/{name}", r.node, remainder)

    def link_owner(self, pod_uid: str, name: str, allocs: list[GPUAllocation]) -> None:
        """Owner pod ``pod_uid`` took ``allocs`` from reservation ``name`` (its Reserve)."""
        self._linked_at_reserve[pod_uid] = name
        self._set_owner(pod_uid, name, allocs)

    def unlink_owner(self, pod_uid: str) -> None:
        """Undo :meth:`link_owner` (Unreserve)."""
        self._linked_at_reserve.pop(pod_uid, None)
        self._set_owner(pod_uid, None, [])

    def _set_owner(self, pod_uid: str, name: str | None, allocs: list[GPUAllocation]) -> None:
        before = self._owner_link.pop(pod_uid, None)
        if before is not None and before in self.reservations:
            self.reservations[before].owners.pop(pod_uid, None)
            if before != name:
                self._refresh_reservation(before)
        if name is None:
            return
        self._owner_link[pod_uid] = name
        r = self.reservations.get(name)
        if r is not None:
            r.owners[pod_uid] = allocs
            self._refresh_reservation(name)

    def _track_owner(self, pod: PodInfo | None, uid: str) -> None:
        """Link or unlink a pod as an owner taking GPUs from a reservation, after its GPUs were accounted."""
        if pod is None or not pod.node_name or pod.terminated:
            self._linked_at_reserve.pop(uid, None)
            if uid in self._owner_link:
                self._set_owner(uid, None, [])
            return
        ref = allocated_ref(pod.annotations)
        name: str | None = None
        if ref is not None:
            ref_name, ref_uid = ref
            name = self._reservation_of_uid.get(ref_uid) if ref_uid else ref_name
            name = name or ref_name
            self._linked_at_reserve.pop(uid, None)
        else:
            name = self._linked_at_reserve.get(uid)
        held = self.allocations_of(uid)
        if name is None or held is None:
            if uid in self._owner_link and uid not in self._linked_at_reserve:
                self._set_owner(uid, None, [])
            return
        r = self.reservations.get(name)
        if self._owner_link.get(uid) == name and r is not None and r.owners.get(uid) == held[1]:
            return
        self._set_owner(uid, name, held[1])

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Account or release the pod's GPUs (see the module docstring), then its reservation link."""
        seen = new if new is not None else old
        self._account_pod(old, new)
        if seen is not None and (self._owner_link or self.reservations):
            self._track_owner(new, seen.uid)

    def _account_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        if new is not None and self._on_pod_seen is not None:
            self._on_pod_seen(new)
        seen = new if new is not None else old
        uid = seen.uid if seen is not None else ""
        if new is None or not new.node_name or new.terminated:
            self.release(uid)
            return
        raw = new.annotations.get(n.ANNOTATION_DEVICE_ALLOCATED)
        current = self.pod_node.get(uid)
        if raw is None:
            if current is not None and current != new.node_name:
                self.release(uid)
            return
        try:
            by_type = parse_device_allocations(raw)
        except AllocationError as exc:
            log.warning("pod %s: ignoring its device allocation: %s", new.key, exc)
            return
        allocs = by_type.pop(n.GPU, [])
        if current is not None:
            nd = self.nodes[current]
            held = nd.pods.get(uid)
            if (
                current == new.node_name
                and held is not None
                and _same(held[1], allocs)
                and all(
                    _same(nd.others_of(uid).get(t, []), by_type.get(t, []))
                    for t in set(by_type) | set(nd.others_of(uid))
                )
            ):
                return
            self.release(uid)
        if allocs or by_type:
            self.account(uid, new.key, new.node_name, allocs, by_type)

    # ------------------------------------------------------------------ accounting
    def account(
        self,
        uid: str,
        key: str,
        node: str,
        allocs: list[GPUAllocation],
        others: dict[str, list[GPUAllocation]] | None = None,
    ) -> None:
        """Account GPU ``allocs`` and ``others`` (type -> rdma/fpga allocations) of pod ``uid``
        (``namespace/name`` ``key``) on ``node`` now."""
        if self.pod_node.get(uid) not in (None, node):
            self.release(uid)
        self._node(node).add(uid, key, allocs, others)
        self.pod_node[uid] = node
        self._dirty.add(node)

    def release(self, uid: str) -> list[GPUAllocation] | None:
        """Release pod ``uid``'s GPUs; return what it held (None if nothing)."""
        node = self.pod_node.pop(uid, None)
        if node is None:
            return None
        nd = self.nodes.get(node)
        if nd is None:
            return None
        held = nd.remove(uid)
        if nd.is_empty():
            del self.nodes[node]
        self._dirty.add(node)
        return held

    def allocations_of(self, uid: str) -> tuple[str, list[GPUAllocation]] | None:
        """(node, allocations) currently accounted for pod ``uid``."""
        node = self.pod_node.get(uid)
        if node is None or node not in self.nodes:
            return None
        entry = self.nodes[node].pods.get(uid)
        return (node, entry[1]) if entry is not None else None

    # ------------------------------------------------------------------ arrays
    def flush(self) -> GPUTable:
        """Write changed nodes into the table rows and return the table (sized to the node table)."""
        table = self.table
        table.ensure(self.snapshot.table.capacity)
        for name in self._dirty:
            old_row = self._rows.pop(name, None)
            if old_row is not None:
                table.clear(old_row)
            row = self.snapshot.table.row(name)
            nd = self.nodes.get(name)
            if row is None or nd is None:
                continue
            table.write(row, nd)
            self._rows[name] = row
        self._dirty.clear()
        return table

    def models_of(self, names: list[str]) -> list[str]:
        """GPU model label of each node ("" when unlabelled)."""
        return [self.models.get(name, "") for name in names]


def _same(a: list[GPUAllocation], b: list[GPUAllocation]) -> bool:
    return sorted((x.minor, sorted(x.resources.items()), x.vfs) for x in a) == sorted(
        (x.minor, sorted(x.resources.items()), x.vfs) for x in b
    )
