"""kube-scheduler's generic preemption pieces that our preemption paths share.

- :func:`fit_shortfall`: what kube-scheduler's own NodeResourcesFit would still refuse on a node
  once some pods are gone (``Too many pods``, ``Insufficient <resource>``), over our cache. ``/preempt``
  uses it to check a victim list it narrowed against the in-tree reasons we can evaluate.
- :func:`pod_start_time`: a pod's start as upstream's ``GetPodStartTime``.
- :class:`Candidate` and :func:`pick_one_node_for_preemption`: a node with its victims, and the choice
  among candidates as ``pickOneNodeForPreemption`` in
  k8s.io/kubernetes/pkg/scheduler/framework/preemption/preemption.go.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
