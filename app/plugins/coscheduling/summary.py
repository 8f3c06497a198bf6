"""A gang as the REST view shows it (upstream ``core/gang_summary.go`` ``GangSummary``).

Field names are upstream's JSON names; sets are JSON objects with empty values, as Go marshals a
``sets.Set[string]`` (``{"default/p-0": {}}``); ``waitTime`` is nanoseconds (a ``time.Duration``);
``createTime`` RFC 3339. ``gangGroupInfo`` carries upstream's exported field names. One field is
koordinator-py's: ``waitingPods``, each waiting member's uid, seconds waited and seconds left before its
Permit timeout (from the gang's wait time, capped at 15 minutes as the framework caps it).
"""

from __future__ import annotations

from typing import Any

from app.api.timeparse import format_time
from app.framework.waiting import MAX_TIMEOUT
from app.plugins.coscheduling.gang import Gang


def _set(keys: Any) -> dict[str, dict[str, Any]]:
    return {k: {} for k in sorted(keys)}


def gang_summary(gang: Gang, now: float) -> dict[str, Any]:
    """The summary of ``gang`` at ``now`` (epoch seconds); see the module docstring for the shape."""
    info = gang.group_info
    wait = min(gang.wait_time, MAX_TIMEOUT)
    waiting = []
    for key, pod in sorted(gang.waiting.items()):
        since = gang.waiting_since.get(pod.uid)
        waited = max(0.0, now - since) if since is not None else None
        waiting.append(
            {
                "pod": key,
                "uid": pod.uid,
                "node": pod.node_name,
                "waitedSeconds": round(waited, 3) if waited is not None else None,
                "timeLeftSeconds": round(max(0.0, wait - waited), 3) if waited is not None else None,
            }
        )
    return {
        "name": gang.name,
        "waitTime": round(gang.wait_time * 1e9),
        "createTime": format_time(gang.create_time),
        "mode": gang.mode,
        "gangMatchPolicy": gang.match_policy,
        "minRequiredNumber": gang.min_required,
        "totalChildrenNum": gang.total_children,
        "gangGroup": list(gang.gang_group),
        "children": _set(gang.children),
        "pendingChildren": _set(gang.pending),
        "waitingForBindChildren": _set(gang.waiting),
        "boundChildren": _set(gang.bound),
        "onceResourceSatisfied": gang.once_satisfied,
        "gangGroupInfo": None
        if info is None
        else {
            "Initialized": True,
            "GangGroupId": info.group_id,
            "GangGroup": list(info.group),
            "OnceResourceSatisfied": info.once_resource_satisfied,
            "WaitingGangIDs": _set(info.waiting_gang_ids),
            "RepresentativePodKey": "",
            "BindingMemberPods": _set(info.binding_members),
        },
        "gangFrom": gang.gang_from,
        "hasGangInit": gang.has_init,
        "waitingPods": waiting,
    }
