"""REST views of reservations: upstream field names, quantities as strings.

``nodeReservations/{node}`` mirrors upstream's ``pkg/scheduler/plugins/reservation/service.go``
(the node's reservations with their allocatable and allocated); ``reservations`` lists every
reservation the store holds.
"""

from __future__ import annotations

from typing import Any

from app.api.quantity import display_resource_list
from app.api.timeparse import format_time
from app.plugins.reservation import names as n
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.preemption import Nomination
from app.plugins.reservation.store import ReservationStore


def reservation_view(
    store: ReservationStore, info: ReservationInfo, nomination: Nomination | None = None
) -> dict[str, Any]:
    """One reservation: ``name``, ``uid``, ``phase`` (Pending when unset), ``nodeName``, ``allocatable``,
    ``allocated``, ``remaining`` (quantity strings), ``owners`` (spec.owners as given), ``currentOwners``
    (the pods allocated to it: namespace, name, uid), ``allocatePolicy``, ``allocateOnce``,
    ``expires`` (RFC 3339, null when it never expires), ``nominatedNodeName`` (a pending one's preemption:
    the node it makes room on, else ``status.nominatedNodeName``, else "") and ``victims`` (the pods that
    preemption evicts: namespace, name, uid, priority) with ``message`` (the Scheduled condition's)."""
    expiry = info.expiry()
    status = info.obj.get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    pods = []
    for uid in sorted(store.pods_of.get(info.name, ())):
        pod = store.handle.snapshot.pod(uid)
        if pod is not None:
            pods.append({"namespace": pod.namespace, "name": pod.name, "uid": pod.uid})
    return {
        "name": info.name,
        "uid": info.uid,
        "phase": info.phase or n.PHASE_PENDING,
        "nodeName": info.node_name,
        "allocatable": display_resource_list(info.allocatable),
        "allocated": display_resource_list({k: v for k, v in store.allocated(info.name).items() if v}),
        "remaining": display_resource_list(store.remaining(info.name)),
        "owners": (info.obj.get("spec") or {}).get("owners") or [],
        "currentOwners": pods,
        "allocatePolicy": info.allocate_policy,
        "allocateOnce": info.allocate_once,
        "expires": format_time(expiry) if expiry is not None else None,
        "nominatedNodeName": nomination.node if nomination else str(status.get("nominatedNodeName") or ""),
        "victims": [dict(v) for v in nomination.victims] if nomination else [],
        "message": next(
            (str(c.get("message") or "") for c in conditions if c.get("type") == n.CONDITION_SCHEDULED), ""
        ),
    }


def node_reservations_view(store: ReservationStore, node: str) -> list[dict[str, Any]]:
    """The active reservations on ``node``, each as :func:`reservation_view`, sorted by name."""
    return [reservation_view(store, i) for i in sorted(store.active_on(node), key=lambda i: i.name)]
