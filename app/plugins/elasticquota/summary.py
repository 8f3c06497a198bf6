"""REST views of quotas: upstream's ``QuotaInfoSummary`` (``core/quota_summary.go``) and a tree.

ResourceLists are Kubernetes quantity strings; field names are upstream's JSON names.
"""

from __future__ import annotations

from typing import Any

from app.api import elasticquota as n
from app.api.quantity import display_resource_list
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.quotainfo import QuotaInfo


def quota_summary(manager: QuotaManager, info: QuotaInfo, include_pods: bool) -> dict[str, Any]:
    """``QuotaInfoSummary`` of ``info`` (runtime must be refreshed by the caller).

    ``podCache`` maps ``namespace/name`` to ``{isAssigned, resource}`` when ``include_pods``.
    """
    fmt = display_resource_list
    body: dict[str, Any] = {
        "name": info.name,
        "namespace": info.namespace,
        "parentName": info.parent,
        "isParent": info.is_parent,
        "runtimeVersion": info.runtime_version,
        "allowLentResource": info.allow_lent,
        "tree": info.tree_id,
        "max": fmt(info.max),
        "min": fmt(info.min),
        "autoScaleMin": fmt(info.auto_min or info.min),
        "used": fmt(info.used),
        "nonPreemptibleUsed": fmt(info.np_used),
        "request": fmt(info.request),
        "nonPreemptibleRequest": fmt(info.np_request),
        "sharedWeight": fmt(info.shared_weight),
        "runtime": fmt(info.runtime),
        "childRequest": fmt(info.child_request),
        "allocated": {},
        "guaranteed": {},
        "selfUsed": fmt(info.self_used),
        "selfNonPreemptibleUsed": fmt(info.self_np_used),
        "selfRequest": fmt(info.self_request),
        "selfNonPreemptibleRequest": fmt(info.self_np_request),
        "children": sorted(info.children),
    }
    if include_pods:
        body["podCache"] = {
            f"{e.namespace}/{e.name}": {"isAssigned": e.assigned, "resource": fmt(e.request)}
            for e in sorted(info.pods.values(), key=lambda e: (e.namespace, e.name))
        }
    return body


def quota_summaries(manager: QuotaManager) -> dict[str, Any]:
    """Every quota except the root (``GetQuotaSummaries``), by name, runtimes refreshed, without pods."""
    manager.refresh_all()
    return {
        name: quota_summary(manager, info, include_pods=False)
        for name, info in sorted(manager.quotas.items())
        if name != n.ROOT_QUOTA_NAME
    }


def quota_tree(manager: QuotaManager) -> dict[str, Any]:
    """The tree from the root: ``{name, min, max, runtime, used, request, children: [...]}``.

    The system and default quotas appear as the root's children; quotas whose parent is missing
    are listed under ``orphans``.
    """
    manager.refresh_all()
    fmt = display_resource_list

    def node(info: QuotaInfo, seen: set[str]) -> dict[str, Any]:
        seen.add(info.name)
        return {
            "name": info.name,
            "isParent": info.is_parent,
            "allowLentResource": info.allow_lent,
            "min": fmt(info.min),
            "max": fmt(info.max),
            "runtime": fmt(info.runtime),
            "used": fmt(info.used),
            "request": fmt(info.request),
            "pods": len(info.pods),
            "children": [
                node(manager.quotas[c], seen) for c in sorted(info.children) if c in manager.quotas and c not in seen
            ],
        }

    seen: set[str] = set()
    root = node(manager.quotas[n.ROOT_QUOTA_NAME], seen)
    orphans = [node(info, seen) for name, info in sorted(manager.quotas.items()) if name not in seen]
    return {"root": root, "orphans": orphans, "clusterTotal": fmt(manager.cluster_total)}
