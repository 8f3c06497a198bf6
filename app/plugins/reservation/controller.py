"""The Reservation controller's decisions (upstream ``pkg/scheduler/plugins/reservation/controller``).

One :func:`decide` per reservation per round, from the store and the clock:

- expired (``expires`` passed, checked first, else ``creationTimestamp + ttl``; ttl 0 never) or its node
  gone, while not finished -> Failed with Ready reason ``Expired``;
- active: ``status.currentOwners`` (the bound pods allocated to it: namespace, name, uid) and
  ``status.allocated`` (Σ their requests masked to allocatable names) are brought up to date; once it
  has an owner and ``allocateOnce`` is true -> Succeeded;
- ``Waiting`` (pre-allocated from running pods, :mod:`.preallocation`): once none of its owners is left
  -> Available (Ready reason ``Available``); its pre-allocated owners never make it Succeeded;
- finished for longer than the GC duration (24 h) -> deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.api.quantity import QuantityError, format_resource_list, parse_resource_list
from app.framework.handle import Handle
from app.plugins.reservation import names as n
from app.plugins.reservation.conditions import expired_patch, finished_at, ready_patch, succeeded_patch
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.store import ReservationStore


@dataclass(frozen=True, slots=True)
class Action:
    """What to do with one reservation: ``patch`` (status merge patch) or ``delete``; ``why`` for the log."""

    name: str
    why: str
    patch: dict[str, Any] | None = None
    delete: bool = False


def current_owners(handle: Handle, store: ReservationStore, info: ReservationInfo) -> list[dict[str, str]]:
    """The owner pods allocated to ``info`` that the API shows bound (an assumed pod is not yet an owner),
    as ``{"namespace", "name", "uid"}`` sorted by namespace/name."""
    out = []
    for uid in store.pods_of.get(info.name, ()):
        pod = handle.snapshot.pod(uid)
        obj = handle.snapshot.pod_object(uid) or {}
        if pod is None or not (obj.get("spec") or {}).get("nodeName"):
            continue
        out.append({"namespace": pod.namespace, "name": pod.name, "uid": pod.uid})
    return sorted(out, key=lambda o: (o["namespace"], o["name"]))


def _status_allocated(info: ReservationInfo) -> dict[str, int] | None:
    try:
        return parse_resource_list((info.obj.get("status") or {}).get("allocated"), field="status.allocated")
    except QuantityError:
        return None


def decide(handle: Handle, store: ReservationStore, info: ReservationInfo, now: float) -> Action | None:
    """The action the controller takes for ``info`` now, or None (see the module docstring)."""
    if info.finished:
        done = finished_at(info)
        if done is not None and now - done >= n.GC_DURATION_SECONDS:
            return Action(info.name, "garbage collection", delete=True)
        return None
    expiry = info.expiry()
    if expiry is not None and now >= expiry:
        return Action(info.name, "expired", expired_patch(info, now))
    if not info.active:
        return None
    if handle.snapshot.node(info.node_name) is None:
        return Action(info.name, f"node {info.node_name} is gone", expired_patch(info, now))
    status = info.obj.get("status") or {}
    waiting = info.phase == n.PHASE_WAITING
    if waiting and not current_owners(handle, store, info):
        return Action(info.name, "pre-allocated pods released", ready_patch(info, now))
    if not store.pods_of.get(info.name) and not status.get("currentOwners") and not status.get("allocated"):
        return None  # no owner, nothing recorded: the common case, decided without building lists
    owners = current_owners(handle, store, info)
    allocated = {r: v for r, v in store.allocated(info.name).items() if v}
    if owners and info.allocate_once and not waiting:
        patch = succeeded_patch(info, now)
        patch["status"]["currentOwners"] = owners
        patch["status"]["allocated"] = format_resource_list(allocated)
        return Action(info.name, "allocated once", patch)
    have = _status_allocated(info)
    have = {r: v for r, v in (have or {}).items() if v}
    if (status.get("currentOwners") or []) != owners or have != allocated:
        return Action(
            info.name,
            "owners changed",
            {"status": {"currentOwners": owners or None, "allocated": format_resource_list(allocated) or None}},
        )
    return None
