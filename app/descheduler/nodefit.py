"""nodeFit: whether an evicted pod could land on some target node without pushing it over its high
threshold (``podFitsAnyNodeWithThreshold`` in ``utilization_util.go`` over the sigs descheduler's
``nodeutil.NodeFit``: node selector and required node affinity, NoSchedule/NoExecute taints, requests
against allocatable minus requested, unschedulable). A fitting target gets the pod's usage added to its
usage so that later candidates see it, exactly as upstream (the addition is never taken back).
"""

from __future__ import annotations

from app.api.nodeaffinity import required_affinity_matches
from app.api.tolerations import untolerated_taint
from app.descheduler.model import NodeView, PodView


def node_fit(pod: PodView, node: NodeView) -> str | None:
    """``NodeFit``: None when the pod could be placed on ``node``, else why not."""
    if node.unschedulable:
        return f"node {node.name} is unschedulable"
    spec = pod.obj.get("spec") or {}
    if not required_affinity_matches(spec, node.labels, node.name):
        return f"pod does not match node {node.name}'s labels (nodeSelector/affinity)"
    taint = untolerated_taint(node.taints, spec.get("tolerations") or [])
    if taint is not None:
        return f"pod does not tolerate taint {taint.get('key')} of node {node.name}"
    for r, want in pod.info.requests.items():
        if want <= 0:
            continue
        free = node.allocatable.get(r, 0) - node.requested.get(r, 0)
        if want > free:
            return f"insufficient {r} on node {node.name}"
    return None


def fits_any_with_threshold(
    pod: PodView,
    pod_usage: dict[str, int],
    targets: list[NodeView],
    usages: dict[str, dict[str, int]],
    highs: dict[str, dict[str, int]],
) -> str | None:
    """The first target where the pod fits and adding ``pod_usage`` keeps every threshold resource at or
    under the high threshold; that target's usage in ``usages`` is increased by the pod's usage. None
    when no target qualifies."""
    for node in targets:
        if node_fit(pod, node) is not None:
            continue
        usage, high = usages.get(node.name), highs.get(node.name)
        if usage is not None and high is not None:
            if any(r in usage and usage[r] + pod_usage.get(r, 0) > t for r, t in high.items()):
                continue
            for r in high:
                if r in usage:
                    usage[r] += pod_usage.get(r, 0)
        return node.name
    return None
