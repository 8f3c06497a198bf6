"""A NodeMetric reduced to the vectors LoadAwareScheduling uses.

Mirrors the parsing in ``podAssignCache.AddOrUpdateNodeMetric`` (``pod_assign_cache.go``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from app.api.koordext import PriorityClass
from app.api.timeparse import parse_time
from app.framework.duration import parse_duration
from app.plugins.loadaware.vector import Vec, Vectorizer, add

log = logging.getLogger(__name__)

#: Report interval assumed when the NodeMetric spec has none (``DefaultNodeMetricReportInterval``).
DEFAULT_REPORT_INTERVAL_SECONDS = 60.0


@dataclass(slots=True)
class MetricView:
    """What one NodeMetric says.

    Attributes:
        update_time: ``status.updateTime`` in epoch seconds, NaN when missing.
        report_interval: seconds (``spec.metricCollectPolicy.reportIntervalSeconds`` or 60).
        node_usage: ``status.nodeMetric.nodeUsage`` vector, None when ``status.nodeMetric`` is nil.
        aggregated: (type, duration seconds) -> vector; duration 0 aliases the longest per type.
        system_usage: ``status.nodeMetric.systemUsage`` vector (zeros when absent).
        pod_usages: ``namespace/name`` -> usage vector, for pods reporting non-empty usage.
        prod_pods: keys of pods the NodeMetric reports with priority ``koord-prod``.

    Nothing of the object itself is kept (the cache keeps it, packed): holding the decoded NodeMetric,
    a dict per reported pod, cost ~15 MB per 1,000 nodes of 20 pods.
    """

    update_time: float
    report_interval: float
    node_usage: Vec | None
    aggregated: dict[tuple[str, float], Vec] = field(default_factory=dict)
    system_usage: Vec | None = None
    pod_usages: dict[str, Vec] = field(default_factory=dict)
    prod_pods: set[str] = field(default_factory=set)

    def target_aggregated(self, aggregation_type: str, duration: float) -> Vec | None:
        """Aggregated usage of ``aggregation_type`` over ``duration`` (``getTargetAggregatedUsage``).

        Duration 0 means the longest reported; when nothing is reported for it, node usage.
        """
        vec = self.aggregated.get((aggregation_type, duration))
        if vec is None and duration == 0:
            vec = self.node_usage
        return vec


def _resources(usage: Any) -> Any:
    return usage.get("resources") if isinstance(usage, dict) else None


def parse_metric(obj: dict[str, Any], vectorizer: Vectorizer) -> MetricView:
    """Build a :class:`MetricView` from a NodeMetric object. Malformed parts are skipped with a log line."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    policy = (spec.get("metricCollectPolicy") or {}) if isinstance(spec, dict) else {}
    interval = policy.get("reportIntervalSeconds") if isinstance(policy, dict) else None
    report_interval = (
        float(interval) if isinstance(interval, int | float) and interval > 0 else DEFAULT_REPORT_INTERVAL_SECONDS
    )
    update_time = math.nan
    if isinstance(status, dict) and status.get("updateTime"):
        try:
            update_time = parse_time(status["updateTime"])
        except ValueError as exc:
            log.warning("NodeMetric %s: %s", (obj.get("metadata") or {}).get("name"), exc)
    view = MetricView(update_time=update_time, report_interval=report_interval, node_usage=None)
    info = status.get("nodeMetric") if isinstance(status, dict) else None
    if isinstance(info, dict):
        view.node_usage = vectorizer.from_resource_list(_resources(info.get("nodeUsage")))
        view.system_usage = vectorizer.from_resource_list(_resources(info.get("systemUsage")))
        longest: dict[str, float] = {}
        for agg in info.get("aggregatedNodeUsages") or []:
            if not isinstance(agg, dict):
                continue
            try:
                duration = parse_duration(agg.get("duration") or "0")
            except ValueError:
                continue
            for agg_type, usage in (agg.get("usage") or {}).items():
                res = _resources(usage)
                if not res:
                    continue
                view.aggregated[(agg_type, duration)] = vectorizer.from_resource_list(res)
                if duration > longest.get(agg_type, 0.0):
                    longest[agg_type] = duration
        for agg_type, duration in longest.items():
            view.aggregated[(agg_type, 0.0)] = view.aggregated[(agg_type, duration)]
    for entry in (status.get("podsMetric") or []) if isinstance(status, dict) else []:
        if not isinstance(entry, dict):
            continue
        res = _resources(entry.get("podUsage"))
        if not res:
            continue
        key = f"{entry.get('namespace', '')}/{entry.get('name', '')}"
        view.pod_usages[key] = vectorizer.from_resource_list(res)
        if entry.get("priority") == PriorityClass.PROD.value:
            view.prod_pods.add(key)
    return view


def prod_base_usage(view: MetricView, include_sys: bool, size: int) -> Vec:
    """Starting prod usage: zeros, plus system usage when ``prodUsageIncludeSys``."""
    vec = [0] * size
    if include_sys and view.node_usage is not None and view.system_usage is not None:
        add(vec, view.system_usage)
    return vec
