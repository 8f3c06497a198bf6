"""Quota-aware victim selection for ``/preempt`` (upstream ``preempt.go`` ``canPreempt`` / ``SelectVictimsOnNode``).

kube-scheduler proposes victims per node; a victim stays eligible only if it is preemptible, is
in the preemptor's quota, has a lower priority, and (with disableDefaultQuotaPreemption) is not in
the default quota. A node is dropped when no eligible victim remains (``No victims found on node
<node> for preemptor pod <pod>``, unresolvable), when removing every eligible victim still leaves
the quota over its limit, or when the pod would still not fit the node's allocatable. Then, most
important first, victims are reprieved while both the quota and the node still fit without them.

The same selection serves the preemption the service runs itself for a pod the quota rejected
(:func:`quota_candidates`, :func:`not_eligible_reason`; see
:meth:`~app.plugins.elasticquota.plugin.ElasticQuota.select_candidates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.api import elasticquota as n
from app.cache.podinfo import PodInfo
from app.framework.handle import SnapshotLister
from app.framework.preemption import Candidate
from app.framework.status import SUCCESS, Status
from app.plugins.elasticquota.importance import importance_key
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.resourcelist import (
    ResourceList,
    add,
    go_list,
    less_equal,
    mask,
    print_resource_list,
    subtract,
)


def can_preempt(manager: QuotaManager, disable_default: bool, pod: PodInfo, victim: PodInfo) -> bool:
    """``canPreempt``: victim preemptible, same quota, strictly lower priority, not in the default quota
    when ``disable_default``."""
    if n.is_pod_non_preemptible(victim.labels):
        return False
    pod_quota = manager.quota_name_of(pod.labels, pod.namespace)
    victim_quota = manager.quota_name_of(victim.labels, victim.namespace)
    if disable_default and victim_quota == n.DEFAULT_QUOTA_NAME:
        return False
    return (pod.priority or 0) > (victim.priority or 0) and pod_quota == victim_quota


def _node_fits(snapshot: SnapshotLister, node: str, pod: PodInfo, freed: ResourceList) -> list[str]:
    """Resources the pod requests that ``node`` cannot hold even with ``freed`` released."""
    state = snapshot.node(node)
    if state is None:
        return []
    short = []
    for res, want in sorted(pod.requests.items()):
        if want <= 0:
            continue
        free = state.allocatable.get(res, 0) - state.requested.get(res, 0) + freed.get(res, 0)
        if want > free:
            short.append(res)
    return short


def select_victims(
    manager: QuotaManager,
    snapshot: SnapshotLister,
    disable_default: bool,
    pod: PodInfo,
    node: str,
    victims: list[PodInfo],
    now: float,
) -> tuple[list[PodInfo], Status]:
    """Victims allowed on ``node`` and the status (non-success drops the node); see the module docstring."""
    eligible = [v for v in victims if can_preempt(manager, disable_default, pod, v)]
    if not eligible:
        return [], Status.unresolvable(f"No victims found on node {node} for preemptor pod {pod.name}")
    quota_name = manager.quota_name_of(pod.labels, pod.namespace)
    info = manager.quotas[quota_name]
    manager.refresh_runtime(quota_name)
    limit = manager.used_limit(info)
    pod_req = mask(pod.requests, info.max)

    masked = {v.uid: mask(v.requests, info.max) for v in eligible}

    def quota_ok(used: ResourceList) -> tuple[bool, list[str]]:
        return less_equal(mask(add(used, pod_req), pod_req), limit)

    # every eligible victim gone; then add the most important back one by one (sums kept incrementally:
    # integer arithmetic, so the same as recomputing from scratch, in O(victims) instead of O(victims^2))
    used = dict(info.used)
    freed: ResourceList = {}
    for v in eligible:
        used = subtract(used, masked[v.uid])
        if v.node_name == node:
            freed = add(freed, v.requests)
    ok, exceeded = quota_ok(used)
    if not ok:
        return [], Status.unschedulable(
            f"Insufficient quotas, quotaName: {quota_name}, runtime: {print_resource_list(limit)}, "
            f"used: {print_resource_list(used)}, pod's request: {print_resource_list(pod_req)}, "
            f"exceedDimensions: {go_list(exceeded)}"
        )
    short = _node_fits(snapshot, node, pod, freed)
    if short:
        return [], Status.unschedulable(*(f"Insufficient {res}" for res in short))
    kept: set[str] = set()
    order = sorted(eligible, key=lambda v: importance_key(v, snapshot.pod_object(v.uid), now))
    for victim in order:
        trial_used = add(used, masked[victim.uid])
        trial_freed = subtract(freed, victim.requests) if victim.node_name == node else freed
        if quota_ok(trial_used)[0] and not _node_fits(snapshot, node, pod, trial_freed):
            kept.add(victim.uid)
            used, freed = trial_used, trial_freed
    return [v for v in eligible if v.uid not in kept], SUCCESS


#: Seconds a preemptor waits for the victims of its last preemption to go before it may preempt again
#: (upstream waits while they terminate; here an eviction the file source only records never ends them).
PENDING_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class PendingPreemption:
    """A preemption under way: the nominated node, the victims' uids and when it was decided (epoch s)."""

    node: str
    victims: tuple[str, ...]
    started: float


def still_pending(pending: PendingPreemption | None, snapshot: SnapshotLister, now: float) -> bool:
    """``pending`` is younger than :data:`PENDING_TIMEOUT` and one of its victims is still in the cache."""
    if pending is None or now - pending.started >= PENDING_TIMEOUT:
        return False
    return any(uid in snapshot.pods for uid in pending.victims)


def is_terminating(obj: dict[str, Any] | None) -> bool:
    """The pod object carries ``metadata.deletionTimestamp`` (graceful deletion under way)."""
    meta = (obj or {}).get("metadata")
    return isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))


def not_eligible_reason(
    manager: QuotaManager,
    snapshot: SnapshotLister,
    pod: PodInfo,
    pod_obj: dict[str, Any],
    pending: PendingPreemption | None,
    now: float,
) -> str:
    """Why ``pod`` may not preempt now ("" when it may), as upstream ``PodEligibleToPreemptOthers``.

    Not eligible: ``spec.preemptionPolicy: Never``; a preemption of ours for it younger than
    :data:`PENDING_TIMEOUT` whose victims are still in the cache; a terminating pod of its quota with a
    lower priority on its ``status.nominatedNodeName`` (upstream's rule).
    """
    raw_spec = pod_obj.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    if spec.get("preemptionPolicy") == "Never":
        return "not eligible due to preemptionPolicy=Never."
    if pending is not None and still_pending(pending, snapshot, now):
        return f"not eligible: its victims on node {pending.node} are still being evicted"
    raw_status = pod_obj.get("status")
    status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    nominated = status.get("nominatedNodeName")
    node = snapshot.node(nominated) if isinstance(nominated, str) and nominated else None
    if node is not None:
        quota = manager.quota_name_of(pod.labels, pod.namespace)
        for uid in node.pods:
            other = snapshot.pod(uid)
            if other is None or not is_terminating(snapshot.pod_object(uid)):
                continue
            if manager.quota_name_of(other.labels, other.namespace) == quota and (other.priority or 0) < (
                pod.priority or 0
            ):
                return "not eligible due to a terminating pod on the nominated node."
    return ""


def quota_candidates(
    manager: QuotaManager,
    snapshot: SnapshotLister,
    disable_default: bool,
    pod: PodInfo,
    quota_name: str,
    nodes: list[str],
    now: float,
) -> list[Candidate]:
    """Upstream ElasticQuota's dry run (``DryRunPreemption`` over its ``SelectVictimsOnNode``) on ``nodes``.

    The potential victims on a node are the assigned pods of the preemptor's quota there (only they can
    pass ``canPreempt``); :func:`select_victims` picks the fewest that make the quota and the node fit.
    Candidates come in ``nodes`` order, victims most important first. Terminating pods stay potential
    victims, as upstream (their eviction is skipped).
    """
    info = manager.quotas.get(quota_name)
    if info is None or (disable_default and quota_name == n.DEFAULT_QUOTA_NAME):
        return []  # no pod of the default quota may be a victim: nothing to look at
    wanted = set(nodes)
    priority = pod.priority or 0
    by_node: dict[str, list[PodInfo]] = {}
    for uid, entry in info.pods.items():
        if not entry.assigned or entry.priority >= priority:  # canPreempt's priority rule, checked cheaply first
            continue
        victim = snapshot.pod(uid)
        if victim is not None and victim.node_name in wanted:
            by_node.setdefault(victim.node_name, []).append(victim)
    out: list[Candidate] = []
    for node in nodes:
        victims = by_node.get(node)
        if not victims:
            continue
        allowed, status = select_victims(manager, snapshot, disable_default, pod, node, victims, now)
        if status.is_success() and allowed:
            allowed.sort(key=lambda v: importance_key(v, snapshot.pod_object(v.uid), now))
            out.append(Candidate(node, tuple(allowed)))
    return out
