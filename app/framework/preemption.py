"""kube-scheduler's generic preemption pieces that our preemption paths share.

- :func:`fit_shortfall`: what kube-scheduler's own NodeResourcesFit would still refuse on a node
  once some pods are gone (``Too many pods``, ``Insufficient <resource>``), over our cache. ``/preempt``
  uses it to check a victim list it narrowed against the in-tree reasons we can evaluate.
- :func:`pod_start_time`: a pod's start as upstream's ``GetPodStartTime``.
- :class:`Candidate` and :func:`pick_one_node_for_preemption`: a node with its victims, and the choice
  among candidates as ``pickOneNodeForPreemption`` in
  k8s.io/kubernetes/pkg/scheduler/framework/preemption/preemption.go.
- :func:`filter_pods_with_pdb_violation` and :func:`select_victims_on_node`: DefaultPreemption's victim
  choice on one node (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go
  ``SelectVictimsOnNode``, ``filterPodsWithPDBViolation``), over a fit check the caller supplies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.api.labelselector import SelectorError, selector_matches
from app.api.timeparse import parse_time
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo

#: ``math.MaxInt32 + 1``: added to each victim priority in the sum criterion so that negative
#: priorities still make a longer list weigh more (as upstream).
_PRIORITY_OFFSET = 2**31


def pod_start_time(pod: PodInfo, obj: dict[str, Any] | None, now: float) -> float:
    """``GetPodStartTime`` (pkg/scheduler/util): ``status.startTime`` of ``obj`` (epoch seconds), else the
    PodScheduled time, else ``now``."""
    raw = ((obj or {}).get("status") or {}).get("startTime")
    if isinstance(raw, str) and raw:
        try:
            return parse_time(raw)
        except ValueError:
            pass
    return pod.scheduled_time if pod.scheduled_time is not None else now


def fit_shortfall(node: NodeState, pod: PodInfo, removed: list[PodInfo]) -> list[str]:
    """kube-scheduler NodeResourcesFit's reasons against ``pod`` on ``node`` once ``removed`` are gone.

    Counts as upstream ``fitsRequest`` (pkg/scheduler/framework/plugins/noderesources/fit.go): the pod
    count against allocatable ``pods`` (``Too many pods``), then each resource the pod requests
    (> 0) against ``allocatable - requested`` (``Insufficient <name>``, sorted by name). ``removed``
    pods count only when they are on ``node``. Amounts are the cache's internal units (milli-cpu,
    bytes). Returns [] when the pod fits.
    """
    gone = [p for p in removed if p.uid in node.pods]
    reasons: list[str] = []
    max_pods = node.allocatable.get("pods")
    if max_pods is not None and len(node.pods) - len(gone) + 1 > max_pods:
        reasons.append("Too many pods")
    freed: dict[str, int] = {}
    for p in gone:
        for res, value in p.requests.items():
            freed[res] = freed.get(res, 0) + value
    for res, want in sorted(pod.requests.items()):
        if want <= 0 or res == "pods":
            continue
        free = node.allocatable.get(res, 0) - node.requested.get(res, 0) + freed.get(res, 0)
        if want > free:
            reasons.append(f"Insufficient {res}")
    return reasons


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where the preemptor fits once ``victims`` are gone (upstream ``preemption.Candidate``).

    Attributes:
        node: the node's name.
        victims: the pods to evict, most important first (upstream keeps ``Victims.Pods`` in that order).
        num_pdb_violations: victims whose eviction violates a PodDisruptionBudget.
    """

    node: str
    victims: tuple[PodInfo, ...]
    num_pdb_violations: int = 0


def pick_one_node_for_preemption(
    candidates: list[Candidate], start_time: Callable[[PodInfo], float]
) -> Candidate | None:
    """The candidate upstream's ``pickOneNodeForPreemption`` (default score functions) would choose.

    In order, keeping the ties of each step: fewest PDB violations; lowest priority of the most
    important victim; lowest sum of victim priorities (each + 2^31); fewest victims; latest earliest
    start time among the victims (``start_time`` gives a pod's start in epoch seconds); then the first
    in ``candidates`` order. Candidates without victims are ignored (upstream never holds one).
    None when no candidate has a victim.
    """
    pool = [c for c in candidates if c.victims]

    def earliest_start(c: Candidate) -> float:
        return min(start_time(v) for v in c.victims)

    scores: list[Callable[[Candidate], float]] = [
        lambda c: -c.num_pdb_violations,
        lambda c: -max(v.priority or 0 for v in c.victims),
        lambda c: -sum((v.priority or 0) + _PRIORITY_OFFSET for v in c.victims),
        lambda c: -len(c.victims),
        earliest_start,
    ]
    for score in scores:
        if len(pool) <= 1:
            break
        values = [score(c) for c in pool]
        best = max(values)
        pool = [c for c, v in zip(pool, values, strict=True) if v == best]
    return pool[0] if pool else None


#: DefaultPreemption's status message for a node without a lower-priority pod (UnschedulableAndUnresolvable).
NO_VICTIMS_MESSAGE = "No preemption victims found for incoming pod"
#: ``nodesWherePreemptionMightHelp``: a node whose Filter failure removing pods cannot cure.
NOT_HELPFUL_MESSAGE = "Preemption is not helpful for scheduling"
#: ``PodEligibleToPreemptOthers``: the preemptor's ``spec.preemptionPolicy`` is ``Never``.
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
#: ``PodEligibleToPreemptOthers``: a lower-priority pod on the nominated node is still terminating.
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."


def _field(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` when both are JSON objects, else {} (a malformed budget is read as empty, never raises)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _pdb_selects(pdb: dict[str, Any], pod: PodInfo) -> bool:
    """``pdb`` (a policy/v1 PodDisruptionBudget as JSON) is in the pod's namespace and its selector matches
    the pod's labels; a nil or empty selector, or a malformed one, matches nothing (as upstream)."""
    if (_field(pdb, "metadata").get("namespace") or "default") != pod.namespace:
        return False
    selector = _field(pdb, "spec").get("selector")
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    try:
        return selector_matches(selector, pod.labels)
    except SelectorError:
        return False


def filter_pods_with_pdb_violation(
    pods: list[PodInfo], pdbs: list[dict[str, Any]]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """``filterPodsWithPDBViolation``: split ``pods`` (order kept) into those whose eviction would violate a
    PodDisruptionBudget and those whose would not.

    Each matching budget's ``status.disruptionsAllowed`` is decremented per pod, in order; a pod that takes a
    budget below zero is violating. A pod without labels matches no budget; a pod already listed in the
    budget's ``status.disruptedPods`` does not count against it (the API server has processed it). A
    malformed budget (fields of the wrong type) selects nothing and allows nothing; nothing raises.
    """
    allowed = []
    for pdb in pdbs:
        raw = _field(pdb, "status").get("disruptionsAllowed")
        allowed.append(raw if type(raw) is int else 0)
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if not _pdb_selects(pdb, pod):
                    continue
                if pod.name in _field(_field(pdb, "status"), "disruptedPods"):
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine


def more_important_key(start_time: Callable[[PodInfo], float]) -> Callable[[PodInfo], tuple[int, float]]:
    """Sort key of ``util.MoreImportantPod``, most important first: higher priority, then earlier start
    (``start_time`` gives a pod's start in epoch seconds)."""
    return lambda p: (-(p.priority or 0), start_time(p))


def select_victims_on_node(
    priority: int,
    pods: list[PodInfo],
    fits: Callable[[list[PodInfo]], list[str]],
    pdbs: list[dict[str, Any]],
    start_time: Callable[[PodInfo], float],
) -> tuple[list[PodInfo], int, list[str]]:
    """DefaultPreemption's ``SelectVictimsOnNode`` for a preemptor of ``priority`` on a node holding ``pods``.

    Every pod of strictly lower priority is a potential victim (equal or higher never is); ``fits(removed)``
    answers the node's Filter verdict for the preemptor with ``removed`` gone ([] when it fits, else the
    reasons). With all potential victims gone the preemptor must fit, else the node is no candidate. Then the
    potential victims, most important first, the PDB-violating ones before the others, are reprieved one by
    one while the preemptor still fits without them.

    Returns:
        (victims, number of victims violating a PDB, reasons): victims most important first; reasons is
        non-empty (and victims empty) when the node is no candidate: ``[NO_VICTIMS_MESSAGE]`` or the
        Filter reasons with every potential victim gone.
    """
    potential = sorted((p for p in pods if (p.priority or 0) < priority), key=more_important_key(start_time))
    if not potential:
        return [], 0, [NO_VICTIMS_MESSAGE]
    removed = {p.uid: p for p in potential}
    reasons = fits(list(removed.values()))
    if reasons:
        return [], 0, reasons
    violating, fine = filter_pods_with_pdb_violation(potential, pdbs)
    victims: list[PodInfo] = []
    num_violating = 0
    for group, counts in ((violating, True), (fine, False)):
        for pod in group:
            del removed[pod.uid]
            if fits(list(removed.values())):
                removed[pod.uid] = pod
                victims.append(pod)
                num_violating += counts
    return victims, num_violating, []
