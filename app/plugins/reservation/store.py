"""Every Reservation and its owners' allocations, kept in step with the snapshot cache.

Upstream keeps the same in ``pkg/scheduler/plugins/reservation/cache.go`` (``reservationCache``:
reservation infos by uid and by node, ``assumePod`` / ``forgetPod`` of owner pods) and in
``frameworkext.ReservationInfo`` (allocatable, allocated, allocated pods).

Accounting, in internal units (milli-cores, bytes, counts):

- ``allocated(R)`` = Σ requests of the owner pods allocated to R, masked to R's allocatable names; a
  pod is allocated to R when its ``reservation-allocated`` annotation names R and it sits on R's node
  (not terminated), or when the Reservation plugin's Reserve put it there (until Unreserve);
- ``remaining(R)`` = max(allocatable(R) - allocated(R), 0), per resource, for active (Available)
  reservations only;
- node column ``resv:<resource>`` = Σ remaining over the node's active reservations. Owner pods are
  ordinary pods of the node (the cache counts them in ``req:<resource>``), so the capacity a
  non-owner pod sees taken is ``requested + resv``, which counts each reserved unit once.

For the Filter of non-owner pods the store also keeps, for nodes holding an active reservation, two
matrices over the reserved resources plus ``pods`` (:meth:`ReservationStore.matrices`): ``headroom`` =
``allocatable - requested - reserved`` (for ``pods``: allowed pods - pods - reservations, each
reservation holding a slot) and ``reserved``; they are rewritten on that node's pod, node and
reservation events, so a Filter call is two row gathers and a comparison.

Malformed Reservations are refused alone (:class:`~app.plugins.reservation.model.ReservationError`
raised from :meth:`on_object`, which the cache logs and counts).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt

from app.api.reservation import allocated_ref as annotation_ref
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo
from app.framework.handle import Handle
from app.plugins.reservation.model import ReservationInfo, parse_reservation
from app.plugins.reservation.owners import OwnerIndex

log = logging.getLogger(__name__)


#: NodeTable column: number of active reservations on the node (each holds a pod slot, as a reserve pod).
COUNT_COLUMN = "resv#reservations"
#: NodeTable column: number of pods occupying the node (bound or assumed, not terminated).
PODS_COLUMN = "resv#pods"


def reserved_column(resource: str) -> str:
    """NodeTable column holding the reserved-but-unallocated amount of ``resource`` per node."""
    return f"resv:{resource}"


def allocated_ref(pod: PodInfo) -> tuple[str, str] | None:
    """(name, uid) of the pod's ``reservation-allocated`` annotation, or None (absent or not JSON)."""
    return annotation_ref(pod.annotations)


class ReservationStore(CacheListener):
    """Reservations by name, by node, by owner term, and their allocations (see the module docstring).

    Args:
        handle: the framework handle (its node table gets the ``resv:*`` columns).
    """

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.by_name: dict[str, ReservationInfo] = {}
        self._by_uid: dict[str, str] = {}
        self.by_node: dict[str, set[str]] = {}
        self.owner_index = OwnerIndex()
        #: pod uid -> reservation name, and the reverse.
        self.pod_reservation: dict[str, str] = {}
        self.pods_of: dict[str, set[str]] = {}
        #: pod uid -> requests, of the pods in pod_reservation.
        self._pod_requests: dict[str, dict[str, int]] = {}
        #: pod uid -> reservation name set by Reserve (kept until the annotation is seen or Unreserve).
        self.reserved_by_plugin: dict[str, str] = {}
        #: resources that have a ``resv:`` column.
        self.resources: set[str] = set()
        #: reservation name -> epoch s it was first seen (its creation time when the object has none).
        self._first_seen: dict[str, float] = {}
        #: reservation name -> uids of placed pods whose annotation names it before it is known.
        self._orphans: dict[str, set[str]] = {}
        #: Matrix layout: the reserved resources, sorted, then "pods"; the table keys of the two matrices.
        self.keys: tuple[str, ...] = ("pods",)
        self._matrix_key = ""
        self._set_layout()
        #: node name -> Σ remaining per reserved resource of its active reservations.
        self._node_totals: dict[str, dict[str, int]] = {}
        #: Bumped on every change of a reservation's phase, node or owners (observers compare it).
        self.generation = 0

    # ----------------------------------------------------------------- lookups
    def get(self, name: str) -> ReservationInfo | None:
        """Reservation ``name``, or None."""
        return self.by_name.get(name)

    def resolve(self, name: str, uid: str) -> ReservationInfo | None:
        """The reservation an annotation names: by uid when given, else by name."""
        if uid:
            found = self._by_uid.get(uid)
            if found is not None:
                return self.by_name.get(found)
            info = self.by_name.get(name)
            return info if info is not None and not info.uid else None
        return self.by_name.get(name)

    def allocated(self, name: str) -> dict[str, int]:
        """Σ requests of the owner pods allocated to ``name``, masked to its allocatable names."""
        info = self.by_name.get(name)
        if info is None:
            return {}
        total: dict[str, int] = {}
        for uid in self.pods_of.get(name, ()):
            for res, value in self._pod_requests.get(uid, {}).items():
                if res in info.allocatable:
                    total[res] = total.get(res, 0) + value
        return total

    def allocated_once(self, info: ReservationInfo, uid: str = "") -> bool:
        """Whether ``info`` is ``allocateOnce`` and already holds an owner other than pod ``uid``: a pod
        allocated to it by Reserve (its binding may still be in flight) or by its annotation. Such a
        Reservation is consumed: upstream skips it (``IsAllocateOnce() && len(AssignedPods) > 0``) even
        before the controller marks it ``Succeeded``."""
        if not info.allocate_once:
            return False
        owners = self.pods_of.get(info.name)
        if not owners:
            return False
        return len(owners) > 1 or uid not in owners

    def remaining(self, name: str) -> dict[str, int]:
        """allocatable - allocated, floored at 0, per allocatable resource (all zero when inactive)."""
        info = self.by_name.get(name)
        if info is None or not info.active:
            return {}
        used = self.allocated(name)
        return {res: max(value - used.get(res, 0), 0) for res, value in info.allocatable.items()}

    def active_on(self, node: str) -> list[ReservationInfo]:
        """The active reservations on ``node``."""
        return [self.by_name[r] for r in self.by_node.get(node, ()) if r in self.by_name]

    def any_active(self) -> bool:
        """Whether any reservation is active (holds capacity)."""
        return len(self.owner_index) > 0

    def slots_at(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(active reservations, occupying pods) per node at ``rows`` (int64)."""
        table = self.handle.snapshot.table
        return table.column(COUNT_COLUMN)[rows], table.column(PODS_COLUMN)[rows]

    def matrices(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """(len(rows), 2, len(:attr:`keys`)) int64: ``[:, 0]`` headroom, ``[:, 1]`` reserved, at ``rows``;
        meaningful only for rows of nodes holding an active reservation (one gather for both)."""
        return self.handle.snapshot.table.column(self._matrix_key, tail=(2, len(self.keys)))[rows]

    def counts_at(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Active reservations per node at ``rows``."""
        return self.handle.snapshot.table.column(COUNT_COLUMN)[rows]

    def reserved_at(self, resource: str, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | None:
        """int64 reserved-but-unallocated ``resource`` at ``rows``, or None when nothing reserves it."""
        if resource not in self.resources:
            return None
        return self.handle.snapshot.table.column(reserved_column(resource))[rows]

    # ----------------------------------------------------------------- events
    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Reservation added/changed/deleted.

        Raises:
            ReservationError: the object is malformed (the cache logs and counts it; the store keeps
                the reservation's previous version out, as if deleted).
        """
        if kind != "Reservation":
            return
        old = self.by_name.get(key)
        if obj is None:
            self._first_seen.pop(key, None)
            self._drop(key, old)
            return
        try:
            info = parse_reservation(obj)
        except ValueError:
            self._drop(key, old)
            raise
        if info.created is None:  # the file source sets no creationTimestamp: the ttl runs from first sight
            info.created = self._first_seen.setdefault(key, self.handle.now())
        if old is None or (old.uid, old.phase, old.node_name) != (info.uid, info.phase, info.node_name):
            self.generation += 1
        self._drop(key, old, keep_pods=True)
        self.by_name[key] = info
        if info.uid:
            self._by_uid[info.uid] = key
        if info.active:
            self.by_node.setdefault(info.node_name, set()).add(key)
            self.owner_index.add(key, info.owners)
            for res in info.allocatable:
                self._ensure_column(res)
        self._adopt_pods(info)
        self._refresh_node(info.node_name)

    def _drop(self, key: str, old: ReservationInfo | None, keep_pods: bool = False) -> None:
        if old is None:
            return
        self.by_name.pop(key, None)
        if old.uid and self._by_uid.get(old.uid) == key:
            del self._by_uid[old.uid]
        self.owner_index.remove(key)
        names = self.by_node.get(old.node_name)
        if names is not None:
            names.discard(key)
            if not names:
                del self.by_node[old.node_name]
        if not keep_pods:
            self.generation += 1
            for uid in list(self.pods_of.get(key, ())):
                self._unassign(uid)
        self._refresh_node(old.node_name)

    def _adopt_pods(self, info: ReservationInfo) -> None:
        """Owner pods whose annotation names ``info`` and that arrived before it are assigned now."""
        waiting = self._orphans.pop(info.name, None)
        if not waiting:
            return
        for uid in waiting:
            pod = self.handle.snapshot.pod(uid)
            if pod is not None:
                self.on_pod(None, pod)

    def _count_pods(self, pod: PodInfo | None) -> None:
        """Copy the pod count of ``pod``'s node into the column (the cache updated ``node.pods`` already;
        copying, not counting, keeps a replay of the same pods from counting twice)."""
        if pod is None or not pod.node_name:
            return
        node = self.handle.snapshot.node(pod.node_name)
        row = self.handle.snapshot.table.row(pod.node_name)
        if node is not None and row is not None:
            self.handle.snapshot.table.column(PODS_COLUMN)[row] = len(node.pods)

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Count the node's pods and track which pods are allocated to which reservation.

        An update that keeps the pod on its node, terminated or not as before (the watch confirming an
        assumed pod, the kubelet's status reports), leaves the cache's pod set of that node as it was, so
        the count this listener copied at that set's last change stands and is not copied again (issue 29).
        """
        if old is None or new is None or new.node_name != old.node_name:
            self._count_pods(old)
            self._count_pods(new)
        elif new.terminated != old.terminated:
            self._count_pods(new)
        by_node = self.by_node
        if by_node:
            if old is not None and old.node_name in by_node:
                self._write_matrix(old.node_name)  # its requested changed
            if new is not None and new.node_name in by_node and (old is None or new.node_name != old.node_name):
                self._write_matrix(new.node_name)
        pod = new if new is not None else old
        if pod is None:
            return
        uid = pod.uid
        if new is None or new.terminated or not new.node_name:
            if uid in self.pod_reservation:
                self._unassign(uid)
            if new is None:
                self.reserved_by_plugin.pop(uid, None)
            return
        name = self.reserved_by_plugin.get(uid)
        ref = allocated_ref(new)
        if ref is not None:
            info = self.resolve(*ref)
            if info is not None:
                name = info.name
                self.reserved_by_plugin.pop(uid, None)
            else:
                self._orphans.setdefault(ref[0], set()).add(uid)
        target = self.by_name.get(name) if name is not None else None
        if name is None or target is None or target.node_name not in ("", new.node_name):
            if uid in self.pod_reservation:
                self._unassign(uid)
            return
        self._assign(new, name)

    def on_node(self, name: str, node: NodeState | None) -> None:
        """A node (re)appeared: write its rows again (the cache zeroed them on delete; pods that arrived
        before it are in ``node.pods``)."""
        if node is None:
            return
        row = self.handle.snapshot.table.row(name)
        if row is not None:
            self.handle.snapshot.table.column(PODS_COLUMN)[row] = len(node.pods)
        if name in self.by_node:
            self._refresh_node(name)

    # ----------------------------------------------------------------- Reserve / Unreserve
    def reserve(self, pod: PodInfo, name: str) -> None:
        """Allocate ``pod`` (assumed on the reservation's node) to reservation ``name``."""
        self.reserved_by_plugin[pod.uid] = name
        self._assign(pod, name)

    def unreserve(self, pod: PodInfo, name: str) -> None:
        """Undo :meth:`reserve` (idempotent)."""
        if self.reserved_by_plugin.get(pod.uid) == name:
            del self.reserved_by_plugin[pod.uid]
        if self.pod_reservation.get(pod.uid) == name:
            self._unassign(pod.uid)

    # ----------------------------------------------------------------- internals
    def _assign(self, pod: PodInfo, name: str) -> None:
        current = self.pod_reservation.get(pod.uid)
        if current == name and self._pod_requests.get(pod.uid) == pod.requests:
            return
        if current is not None:
            self._unassign(pod.uid)
        self.pod_reservation[pod.uid] = name
        self.pods_of.setdefault(name, set()).add(pod.uid)
        self._pod_requests[pod.uid] = dict(pod.requests)
        info = self.by_name.get(name)
        if info is not None:
            self._refresh_node(info.node_name)

    def _unassign(self, uid: str) -> None:
        name = self.pod_reservation.pop(uid, None)
        self._pod_requests.pop(uid, None)
        if name is None:
            return
        pods = self.pods_of.get(name)
        if pods is not None:
            pods.discard(uid)
            if not pods:
                del self.pods_of[name]
        info = self.by_name.get(name)
        if info is not None:
            self._refresh_node(info.node_name)

    def _ensure_column(self, resource: str) -> None:
        if resource not in self.resources:
            self.resources.add(resource)
            self.handle.snapshot.table.column(reserved_column(resource))
            self._set_layout()
            for node in self.by_node:
                self._write_matrix(node)

    def _set_layout(self) -> None:
        self.keys = (*sorted(self.resources - {"pods"}), "pods")
        self._matrix_key = f"resv#matrix/{'|'.join(self.keys)}"

    def _write_matrix(self, name: str) -> None:
        """Rewrite node ``name``'s rows of the two matrices (see the module docstring)."""
        table = self.handle.snapshot.table
        row = table.row(name)
        node = self.handle.snapshot.node(name)
        if row is None or node is None:
            return
        k = len(self.keys)
        matrix = table.column(self._matrix_key, tail=(2, k))
        totals = self._node_totals.get(name, {})
        for i, key in enumerate(self.keys[:-1]):
            held = totals.get(key, 0)
            matrix[row, 0, i] = node.allocatable.get(key, 0) - node.requested.get(key, 0) - held
            matrix[row, 1, i] = held
        count = len(self.by_node.get(name, ()))
        matrix[row, 0, k - 1] = node.allocatable.get("pods", 0) - len(node.pods) - count
        matrix[row, 1, k - 1] = count

    def _refresh_node(self, node: str) -> None:
        """Rewrite the node's ``resv:`` row from its active reservations."""
        if not node:
            return
        table = self.handle.snapshot.table
        row = table.row(node)
        if row is None:
            return
        totals: dict[str, int] = dict.fromkeys(self.resources, 0)
        for name in self.by_node.get(node, ()):
            for res, value in self.remaining(name).items():
                totals[res] = totals.get(res, 0) + value
        for res, value in totals.items():
            self._ensure_column(res)
            table.column(reserved_column(res))[row] = value
        table.column(COUNT_COLUMN)[row] = len(self.by_node.get(node, ()))
        if node in self.by_node:
            self._node_totals[node] = totals
            self._write_matrix(node)
        else:
            self._node_totals.pop(node, None)
