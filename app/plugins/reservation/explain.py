"""Why a Reservation is (not) placed, and what preemption would take: the answer of
``GET /apis/v1/plugins/Reservation/reservations/{name}/explain`` (``koord explain reservation NAME``).

A dry run of the placement round (:func:`~.placement.place`) and, when no node fits, of the preemption
(:func:`~.preemption.find_candidates`, :func:`~.preemption.choose`): nothing is reserved, evicted or written.
koordinator-py's own view; upstream has no such endpoint.
"""

from __future__ import annotations

from typing import Any

from app.framework.handle import Handle
from app.framework.preemption import NOT_ELIGIBLE_TERMINATING
from app.framework.runtime import Framework
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.placement import place
from app.plugins.reservation.preemption import (
    Nomination,
    choose,
    find_candidates,
    not_eligible_reason,
    reservation_priority,
    victim_view,
)
from app.plugins.reservation.store import ReservationStore

#: Why a Reservation without a priority of its own never preempts (koordinator-py's rule, :mod:`.preemption`).
NO_PRIORITY_REASON = "the Reservation has no priority of its own (template priority or priorityClassName)"


def explain_reservation(
    handle: Handle,
    framework: Framework | None,
    store: ReservationStore,
    info: ReservationInfo,
    nomination: Nomination | None,
) -> dict[str, Any]:
    """The explanation of ``info`` (JSON-shaped).

    Keys: ``name``, ``phase`` (Pending when unset), ``nodeName``, ``nominatedNodeName``; for a pending
    Reservation also ``fits`` (the node the next round would choose, "" when none), ``message`` (kube-
    scheduler's fit error, with the PostFilter's message when preemption cannot help), ``nodes`` (node ->
    ``{"reasons": [...]}``, refused nodes only) and ``preemption``: ``priority`` (None without one),
    ``eligible``, ``reason`` (why not, ""), ``node`` and ``victims`` (namespace, name, uid, priority) of
    the candidate it would choose (or of the preemption under way), ``numPDBViolations``, and
    ``candidates`` (node -> victims' names).
    """
    out: dict[str, Any] = {
        "name": info.name,
        "phase": info.phase or "Pending",
        "nodeName": info.node_name,
        "nominatedNodeName": nomination.node if nomination else "",
    }
    if not info.pending or framework is None:
        return out
    now = handle.now()
    result = place(handle, framework, store, info)
    out["fits"] = result.node or ""
    out["message"] = result.message
    out["nodes"] = {node: {"reasons": list(reasons)} for node, reasons in sorted((result.reasons or {}).items())}
    if result.node is not None:
        return out
    priority = reservation_priority(info, dict(handle.snapshot.objects("PriorityClass")))
    pre: dict[str, Any] = {"priority": priority, "eligible": False, "reason": "", "node": "", "victims": []}
    out["preemption"] = pre
    if priority is None:
        pre["reason"] = NO_PRIORITY_REASON
        return out
    why = not_eligible_reason(info, nomination, handle, now)
    if why:
        pre["reason"] = why
        out["message"] = f"{result.message} {why}."
        if nomination is not None and why == NOT_ELIGIBLE_TERMINATING:  # what the preemption under way takes
            pre.update(node=nomination.node, victims=[dict(v) for v in nomination.victims])
        return out
    candidates, failure = find_candidates(handle, framework, store, info, result, priority)
    best = choose(handle, candidates, now)
    if best is None:
        pre["reason"] = failure
        out["message"] = f"{result.message} {failure}."
        return out
    pre.update(
        eligible=True,
        node=best.node,
        victims=[dict(v) for v in victim_view(best)],
        numPDBViolations=best.num_pdb_violations,
        candidates={c.node: [f"{v.namespace}/{v.name}" for v in c.victims] for c in candidates},
    )
    return out
