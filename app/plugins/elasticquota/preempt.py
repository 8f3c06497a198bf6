"""Quota-aware victim selection for ``/preempt`` (upstream ``preempt.go`` ``canPreempt`` / ``SelectVictimsOnNode``).

kube-scheduler proposes victims per node; a victim stays eligible only if it is preemptible, is
in the preemptor's quota, has a lower priority, and (with disableDefaultQuotaPreemption) is not in
the default quota. A node is dropped when no eligible victim remains (``No victims found on node
<node> for preemptor pod <pod>``, unresolvable), when removing every eligible victim still leaves
the quota over its limit, or when the pod would still not fit the node's allocatable. Then, most
important first, victims are reprieved while both the quota and the node still fit without them.
"""

from __future__ import annotations

from app.api import elasticquota as n
from app.cache.podinfo import PodInfo
from app.framework.handle import SnapshotLister
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

    def quota_ok(kept: set[str]) -> tuple[bool, ResourceList, list[str]]:
        used = dict(info.used)
        for v in eligible:
            if v.uid not in kept:
                used = subtract(used, mask(v.requests, info.max))
        new_used = mask(add(used, pod_req), pod_req)
        ok, exceeded = less_equal(new_used, limit)
        return ok, used, exceeded

    def freed(kept: set[str]) -> ResourceList:
        out: ResourceList = {}
        for v in eligible:
            if v.uid not in kept and v.node_name == node:
                out = add(out, v.requests)
        return out

    ok, used, exceeded = quota_ok(set())
    if not ok:
        return [], Status.unschedulable(
            f"Insufficient quotas, quotaName: {quota_name}, runtime: {print_resource_list(limit)}, "
            f"used: {print_resource_list(used)}, pod's request: {print_resource_list(pod_req)}, "
            f"exceedDimensions: {go_list(exceeded)}"
        )
    short = _node_fits(snapshot, node, pod, freed(set()))
    if short:
        return [], Status.unschedulable(*(f"Insufficient {res}" for res in short))
    kept: set[str] = set()
    order = sorted(eligible, key=lambda v: importance_key(v, snapshot.pod_object(v.uid), now))
    for victim in order:
        trial = kept | {victim.uid}
        if quota_ok(trial)[0] and not _node_fits(snapshot, node, pod, freed(trial)):
            kept = trial
    return [v for v in eligible if v.uid not in kept], SUCCESS
