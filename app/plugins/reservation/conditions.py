"""Status patches of a Reservation, as upstream's ``SetReservationAvailable``, ``SetReservationUnschedulable``,
``SetReservationExpired`` and ``SetReservationSucceeded`` (``pkg/util/reservation/reservation.go``) leave it.

Each builder returns a JSON merge patch for the status subresource. ``conditions`` is a list, which a
merge patch replaces whole, so the builders start from the object's current conditions.
"""

from __future__ import annotations

import copy
from typing import Any

from app.api.quantity import format_resource_list
from app.api.timeparse import format_time, parse_time
from app.plugins.reservation import names as n
from app.plugins.reservation.model import ReservationInfo


def _conditions(info: ReservationInfo) -> list[dict[str, Any]]:
    raw = (info.obj.get("status") or {}).get("conditions") or []
    return [copy.deepcopy(c) for c in raw if isinstance(c, dict)]


def _condition(ctype: str, status: str, reason: str, now: float, message: str = "") -> dict[str, Any]:
    stamp = format_time(now)
    cond = {"type": ctype, "status": status, "reason": reason, "lastProbeTime": stamp, "lastTransitionTime": stamp}
    if message:
        cond["message"] = message
    return cond


def available_patch(info: ReservationInfo, node: str, now: float) -> dict[str, Any]:
    """Bound to ``node``: phase Available, ``status.allocatable`` = the template's requests, conditions
    Scheduled=True (Scheduled) and Ready=True (Available); a ``status.nominatedNodeName`` left by a
    preemption is removed."""
    patch: dict[str, Any] = {
        "status": {
            "phase": n.PHASE_AVAILABLE,
            "nodeName": node,
            "allocatable": format_resource_list(info.requests),
            "conditions": [
                _condition(n.CONDITION_SCHEDULED, "True", n.REASON_SCHEDULED, now),
                _condition(n.CONDITION_READY, "True", n.REASON_AVAILABLE, now),
            ],
        }
    }
    if (info.obj.get("status") or {}).get("nominatedNodeName"):
        patch["status"]["nominatedNodeName"] = None
    return patch


def waiting_patch(info: ReservationInfo, node: str, owners: list[dict[str, str]], now: float) -> dict[str, Any]:
    """Pre-allocated on ``node`` from running ``owners`` (namespace, name, uid): phase Waiting, ``nodeName``,
    ``status.allocatable`` = the template's requests, ``currentOwners``, condition Scheduled=True."""
    patch = available_patch(info, node, now)
    patch["status"]["phase"] = n.PHASE_WAITING
    patch["status"]["currentOwners"] = owners
    patch["status"]["conditions"] = [_condition(n.CONDITION_SCHEDULED, "True", n.REASON_SCHEDULED, now)]
    return patch


def ready_patch(info: ReservationInfo, now: float) -> dict[str, Any]:
    """A Waiting reservation whose pre-allocated pods are gone: phase Available, Ready=True (Available),
    no current owners nor allocation."""
    conditions = [c for c in _conditions(info) if c.get("type") != n.CONDITION_READY]
    conditions.append(_condition(n.CONDITION_READY, "True", n.REASON_AVAILABLE, now))
    return {"status": {"phase": n.PHASE_AVAILABLE, "conditions": conditions, "currentOwners": None, "allocated": None}}


def unschedulable_patch(info: ReservationInfo, message: str, now: float, nominated: str = "") -> dict[str, Any] | None:
    """Not placed: the Scheduled condition False with reason Unschedulable and ``message`` (phase kept), and
    ``status.nominatedNodeName`` = ``nominated`` (the node a preemption made room on; "" removes it);
    None when the status already says exactly that."""
    status_now = info.obj.get("status") or {}
    same_nomination = (status_now.get("nominatedNodeName") or "") == nominated
    conditions = _conditions(info)
    for cond in conditions:
        if cond.get("type") == n.CONDITION_SCHEDULED:
            if cond.get("status") == "True":
                return None
            if cond.get("reason") == n.REASON_UNSCHEDULABLE and cond.get("message") == message and same_nomination:
                return None
            cond.update(reason=n.REASON_UNSCHEDULABLE, message=message, lastProbeTime=format_time(now))
            break
    else:
        conditions.append(_condition(n.CONDITION_SCHEDULED, "False", n.REASON_UNSCHEDULABLE, now, message))
    status: dict[str, Any] = {"conditions": conditions}
    if not info.phase:
        status["phase"] = n.PHASE_PENDING
    if not same_nomination:
        status["nominatedNodeName"] = nominated or None
    return {"status": status}


def _finish(info: ReservationInfo, phase: str, reason: str, now: float) -> dict[str, Any]:
    conditions = [c for c in _conditions(info) if c.get("type") != n.CONDITION_READY]
    conditions.append(_condition(n.CONDITION_READY, "False", reason, now))
    return {"status": {"phase": phase, "conditions": conditions}}


def expired_patch(info: ReservationInfo, now: float) -> dict[str, Any]:
    """Expired (or its node is gone): phase Failed, Ready=False with reason Expired."""
    return _finish(info, n.PHASE_FAILED, n.REASON_EXPIRED, now)


def succeeded_patch(info: ReservationInfo, now: float) -> dict[str, Any]:
    """Consumed by an owner with allocateOnce: phase Succeeded, Ready=False with reason Succeeded."""
    return _finish(info, n.PHASE_SUCCEEDED, n.REASON_SUCCEEDED, now)


def finished_at(info: ReservationInfo) -> float | None:
    """When a Succeeded/Failed reservation finished: its Ready condition's lastTransitionTime (epoch s),
    else its creation time; None when neither is known."""
    for cond in _conditions(info):
        if cond.get("type") == n.CONDITION_READY and cond.get("lastTransitionTime"):
            try:
                return parse_time(cond["lastTransitionTime"])
            except ValueError:
                break
    return info.created
