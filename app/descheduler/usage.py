"""Node usage from NodeMetric, as LowNodeLoad computes it (``getNodeUsage`` in
``pkg/descheduler/framework/plugins/loadaware/utilization_util.go``).

usage[r] = ``status.nodeMetric.systemUsage[r]`` + Σ ``status.podsMetric[*].podUsage[r]`` (not
``nodeUsage``); usage["pods"] = number of pods on the node; prod usage sums the pods whose
Koordinator priority class (with default) is ``koord-prod``. Nodes without a NodeMetric, without
``status.nodeMetric`` or whose ``updateTime`` is older than the expiration are skipped.
Units: cpu milli-cores, memory bytes, pods count.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from app.api.koordext import PriorityClass
from app.api.quantity import QuantityError, parse_resource_list
from app.api.timeparse import parse_time
from app.descheduler.model import ClusterView, NodeView, PodView

log = logging.getLogger("koord.descheduler")


@dataclass
class NodeUsage:
    """Usage of one node (``NodeUsage``).

    Attributes:
        node: the node.
        pods: non-terminated pods on it; prod_pods: those with priority class koord-prod.
        usage, prod_usage: resource -> amount (milli-cores for cpu), for the resources in question plus "pods".
        pod_metrics: ``namespace/name`` -> that pod's usage from the NodeMetric.
    """

    node: NodeView
    pods: list[PodView]
    prod_pods: list[PodView]
    usage: dict[str, int]
    prod_usage: dict[str, int]
    pod_metrics: dict[str, dict[str, int]] = field(default_factory=dict)


def metric_expired(update_time: Any, now: float, expiration_seconds: int) -> bool:
    """``isNodeMetricExpired``: no update time, or at least ``expiration_seconds`` old (>0 only)."""
    if not update_time:
        return True
    try:
        updated = parse_time(update_time)
    except ValueError:
        return True
    return expiration_seconds > 0 and now - updated >= expiration_seconds


def _resources(raw: Any, where: str) -> dict[str, int]:
    try:
        return parse_resource_list((raw or {}).get("resources") if isinstance(raw, dict) else None, field=where)
    except QuantityError as exc:
        log.warning("ignoring usage %s: %s", where, exc)
        return {}


def node_usage(
    view: ClusterView, node: NodeView, resource_names: list[str], expiration_seconds: int
) -> NodeUsage | None:
    """The usage of ``node``, or None when its NodeMetric is missing or stale (the node is then not
    considered at all, as upstream)."""
    metric = view.node_metrics.get(node.name)
    status = (metric or {}).get("status") or {}
    info = status.get("nodeMetric")
    if metric is None or not isinstance(info, dict):
        log.info("node %s skipped: no NodeMetric", node.name)
        return None
    if metric_expired(status.get("updateTime"), view.now, expiration_seconds):
        log.info("node %s skipped: NodeMetric has expired (effective period %ss)", node.name, expiration_seconds)
        return None
    pods = view.pods_by_node.get(node.name, [])
    prod_pods = [p for p in pods if p.info.priority_class == PriorityClass.PROD]
    prod_keys = {p.key for p in prod_pods}
    system = _resources(info.get("systemUsage"), f"NodeMetric {node.name} systemUsage")
    usage = {r: system.get(r, 0) for r in resource_names}
    prod_usage = dict.fromkeys(resource_names, 0)
    pod_metrics: dict[str, dict[str, int]] = {}
    for i, entry in enumerate(status.get("podsMetric") or []):
        if not isinstance(entry, dict):
            continue
        key = f"{entry.get('namespace') or 'default'}/{entry.get('name')}"
        pod_usage = _resources(entry.get("podUsage"), f"NodeMetric {node.name} podsMetric[{i}]")
        pod_metrics[key] = pod_usage
        for r in resource_names:
            usage[r] += pod_usage.get(r, 0)
            if key in prod_keys:
                prod_usage[r] += pod_usage.get(r, 0)
    usage["pods"] = len(pods)
    prod_usage["pods"] = len(prod_pods)
    return NodeUsage(node, pods, prod_pods, usage, prod_usage, pod_metrics)


def usage_percent(usage: dict[str, int], allocatable: dict[str, int]) -> dict[str, float]:
    """``resourceUsagePercentages``: 100 * usage / allocatable for resources with non-zero allocatable."""
    return {r: 100.0 * v / allocatable[r] for r, v in usage.items() if allocatable.get(r)}
