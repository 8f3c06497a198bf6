"""Preemption for a pending Reservation: kube-scheduler's DefaultPreemption run on its reserve pod.

Upstream schedules the reserve pod in koord-scheduler's ordinary cycle, so a reserve pod that fits no node
goes through the PostFilter of kube-scheduler's DefaultPreemption like any pod
(``pkg/scheduler/framework/preemption/preemption.go`` ``Evaluator.Preempt``,
``plugins/defaultpreemption/default_preemption.go``). Here the service places Reservations itself
(:mod:`.placement`), so it runs the same steps:

1. eligibility (``PodEligibleToPreemptOthers``): the Reservation has a priority of its own (its template's
   ``spec.priority``, else its ``priorityClassName`` resolved against the PriorityClasses); one without
   (whose reserve pod defaults to MaxInt32) never preempts, a koordinator-py choice: upstream would let it
   preempt every pod. ``preemptionPolicy: Never`` is not eligible (``not eligible due to
   preemptionPolicy=Never.``), nor is a Reservation whose victims on its nominated node are still there
   (``not eligible due to a terminating pod on the nominated node.``);
2. candidates among the nodes where preemption might help (:attr:`.placement.Placement.helpful`), in name
   order (upstream starts at a random offset), until :func:`num_candidates` of them violate no
   PodDisruptionBudget: on each,
   :func:`~app.framework.preemption.select_victims_on_node` (pods of strictly lower priority, fewest needed,
   PodDisruptionBudgets counted), the victims then narrowed by the PostFilter plugins' ``select_victims``
   (ElasticQuota keeps its own rules for quota-bound victims) and re-checked;
3. one node chosen by :func:`~app.framework.preemption.pick_one_node_for_preemption` (fewest PDB
   violations, lowest highest victim priority, ...).

With no candidate the message is kube-scheduler's:
``preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not
helpful for scheduling.``
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from app.cache.podinfo import PodInfo
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.preemption import (
    NO_VICTIMS_MESSAGE,
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    NOT_HELPFUL_MESSAGE,
    Candidate,
    pick_one_node_for_preemption,
    pod_start_time,
    select_victims_on_node,
)
from app.framework.runtime import Framework
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.placement import Placement, fit_error_message, fit_reasons
from app.plugins.reservation.store import ReservationStore

#: Seconds a nominated Reservation waits for its victims to go before it may preempt again (the eviction
#: of a pod the API server never deletes must not hold the Reservation forever).
NOMINATION_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Nomination:
    """A preemption under way for one Reservation.

    Attributes:
        node: the nominated node (also written as ``status.nominatedNodeName``).
        victims: ``{"namespace", "name", "uid", "priority"}`` of each pod evicted, most important first.
        started: epoch seconds when it was decided.
        pdb_violations: victims whose eviction violates a PodDisruptionBudget.
    """

    node: str
    victims: tuple[dict[str, Any], ...]
    started: float
    pdb_violations: int = 0

    def waiting(self, handle: Handle, now: float) -> bool:
        """Younger than :data:`NOMINATION_TIMEOUT` and a victim is still in the cache."""
        if now - self.started >= NOMINATION_TIMEOUT:
            return False
        return any(handle.snapshot.pod(v["uid"]) is not None for v in self.victims)


def reservation_priority(info: ReservationInfo, priority_classes: dict[str, dict[str, Any]]) -> int | None:
    """The priority a Reservation preempts with: its template's ``spec.priority`` (an int), else the ``value``
    of the PriorityClass its template's ``priorityClassName`` names; None when it has neither (or the class
    is unknown)."""
    spec = ((info.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    priority = spec.get("priority")
    if type(priority) is int:
        return priority
    name = spec.get("priorityClassName")
    if isinstance(name, str) and name:
        value = (priority_classes.get(name) or {}).get("value")
        if type(value) is int:
            return value
    return None


def preemption_policy(info: ReservationInfo) -> str:
    """The template's ``spec.preemptionPolicy`` (``PreemptLowerPriority`` when unset)."""
    spec = ((info.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return str(spec.get("preemptionPolicy") or "PreemptLowerPriority")


def not_eligible_reason(info: ReservationInfo, nomination: Nomination | None, handle: Handle, now: float) -> str:
    """``PodEligibleToPreemptOthers`` for the reserve pod ("" when eligible; see the module docstring)."""
    if preemption_policy(info) == "Never":
        return NOT_ELIGIBLE_NEVER
    if nomination is not None and nomination.waiting(handle, now):
        return NOT_ELIGIBLE_TERMINATING
    return ""


def find_candidates(
    handle: Handle,
    framework: Framework,
    store: ReservationStore,
    info: ReservationInfo,
    placement: Placement,
    priority: int,
) -> tuple[list[Candidate], str]:
    """Step 2 of the module docstring over ``placement`` (a failed :func:`~.placement.place`).

    Returns:
        (candidates in node-name order, "") or ([], kube-scheduler's ``preemption: 0/N nodes are
        available: ...`` message).
    """
    snapshot = handle.snapshot
    state = placement.state if placement.state is not None else CycleState(handle.now())
    pdbs = list(snapshot.objects("PodDisruptionBudget").values())
    now = state.now

    def start_time(pod: PodInfo) -> float:
        return pod_start_time(pod, snapshot.pod_object(pod.uid), now)

    helpful = set(placement.helpful)
    limit = num_candidates(placement.total)
    reasons: Counter[str] = Counter()
    out: list[Candidate] = []
    for name in sorted(placement.reasons or {}):
        node = snapshot.node(name)
        if name not in helpful or node is None:
            reasons[NOT_HELPFUL_MESSAGE] += 1
            continue
        if sum(1 for c in out if not c.num_pdb_violations) >= limit:
            break  # DryRunPreemption stops once it holds enough candidates that violate no budget
        pods = [p for p in (snapshot.pod(uid) for uid in node.pods) if p is not None and not p.terminated]

        def fits(removed: list[PodInfo], node_name: str = name) -> list[str]:
            return fit_reasons(handle, framework, store, info, state, node_name, removed)

        victims, violations, why = select_victims_on_node(priority, pods, fits, pdbs, start_time)
        if victims:
            allowed, status = framework.run_select_victims(state, info.reserve_info, name, victims)
            kept = {p.uid for p in allowed}
            if not status.is_success() or not kept:
                why = list(status.reasons) or [NO_VICTIMS_MESSAGE]
                victims = []
            elif len(kept) < len(victims):
                victims = [v for v in victims if v.uid in kept]
                why = fit_reasons(handle, framework, store, info, state, name, victims)
                if why:
                    victims = []
        if victims:
            out.append(Candidate(name, tuple(victims), min(violations, len(victims))))
        else:
            reasons.update(why)
    if out:
        return out, ""
    return [], "preemption: " + fit_error_message(placement.total, reasons)


def num_candidates(nodes: int) -> int:
    """``calculateNumCandidates`` with DefaultPreemption's defaults (minCandidateNodesPercentage 10,
    minCandidateNodesAbsolute 100): 10 % of ``nodes``, at least 100, at most ``nodes``."""
    return min(max(nodes * 10 // 100, 100), nodes)


def choose(handle: Handle, candidates: list[Candidate], now: float) -> Candidate | None:
    """Step 3: ``pickOneNodeForPreemption`` over ``candidates``."""
    snapshot = handle.snapshot
    return pick_one_node_for_preemption(candidates, lambda v: pod_start_time(v, snapshot.pod_object(v.uid), now))


def victim_view(candidate: Candidate) -> tuple[dict[str, Any], ...]:
    """The victims of ``candidate`` as recorded in a :class:`Nomination`."""
    return tuple(
        {"namespace": v.namespace, "name": v.name, "uid": v.uid, "priority": v.priority or 0} for v in candidate.victims
    )
