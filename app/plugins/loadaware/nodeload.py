"""Per-node load book-keeping: the NodeMetric plus the pods assigned to the node.

Mirrors ``nodeInfo`` of ``pod_assign_cache.go``: pods are added and removed incrementally; a new
NodeMetric recomputes everything. Vectors are cpu milli-cores and base units otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from app.plugins.loadaware.metricview import MetricView, prod_base_usage
from app.plugins.loadaware.vector import Vec, add, add_delta, sub


@dataclass(slots=True)
class AssignInfo:
    """One assigned pod: ``namespace/name`` key, assign time (epoch s), estimate, deadline, prod flag,
    and the ``(spec, status.conditions)`` it was assigned with (to detect upstream's renewals)."""

    key: str
    timestamp: float
    estimated: Vec | None
    deadline: float | None
    prod: bool
    fingerprint: Any = None


@dataclass(slots=True)
class NodeLoad:
    """Load state of one node (vectors of the plugin's vectorizer size)."""

    size: int
    metric: MetricView | None = None
    pods: dict[str, AssignInfo] = field(default_factory=dict)
    prod_usage: Vec = field(default_factory=list)
    node_delta: Vec = field(default_factory=list)
    prod_delta: Vec = field(default_factory=list)
    node_estimated: Vec = field(default_factory=list)
    node_delta_pods: set[str] = field(default_factory=set)
    prod_delta_pods: set[str] = field(default_factory=set)
    include_sys: bool = False
    #: Last reported ``status.updateTime`` (epoch s); a NodeMetric without one keeps the previous
    #: value, -inf (Go's zero time) until one is seen (``nodeInfo.updateTime``).
    update_time: float = -math.inf

    def is_empty(self) -> bool:
        """No metric and no pods: the entry can be dropped."""
        return self.metric is None and not self.pods

    def set_metric(self, metric: MetricView | None) -> None:
        """Install a new NodeMetric (or remove it) and recompute every aggregate from the pods."""
        self.metric = metric
        if metric is not None and not math.isnan(metric.update_time):
            self.update_time = metric.update_time
        zeros = [0] * self.size
        self.prod_usage = prod_base_usage(metric, self.include_sys, self.size) if metric else list(zeros)
        self.node_delta, self.prod_delta, self.node_estimated = list(zeros), list(zeros), list(zeros)
        self.node_delta_pods, self.prod_delta_pods = set(), set()
        if metric is not None:
            for info in self.pods.values():
                self._account(info, 1)

    def upsert_pod(self, uid: str, info: AssignInfo) -> bool:
        """Add or replace an assigned pod; True when the node's sums may have changed.

        A replacement that :meth:`accounts_alike` the entry it replaces (e.g. a pod confirmed bound by the
        watch: the PodScheduled time replaces the assume's clock time, and both are inside the estimation
        window) only swaps the entry: taking the old one out of the sums and putting the new one in would
        leave every sum and pod set as it is (issue 29). Without a NodeMetric nothing is summed.
        """
        old = self.pods.get(uid)
        self.pods[uid] = info
        if self.metric is None or (old is not None and self.accounts_alike(old, info)):
            return False
        if old is not None:
            self._account(old, -1)
        self._account(info, 1)
        return True

    def remove_pod(self, uid: str) -> None:
        """Remove an assigned pod (no-op when unknown)."""
        old = self.pods.pop(uid, None)
        if old is not None and self.metric is not None:
            self._account(old, -1)

    def accounts_alike(self, held: AssignInfo, other: AssignInfo) -> bool:
        """:meth:`_account` of ``other`` would change every sum and pod set exactly as that of ``held``
        does, under the NodeMetric installed now (which must be set).

        :meth:`_account` reads of an entry only its key (the pod's reported usage and prod activity), the
        prod flag, the estimate, and whether it is still estimated (:meth:`_estimating`, from the timestamp
        and the deadline): when all of these agree, removing ``held`` and adding ``other`` is a no-op.
        """
        if held.key != other.key or held.prod != other.prod or held.estimated != other.estimated:
            return False
        if held.estimated is None:
            return True  # only prod usage is summed, by key and prod flag
        metric = self.metric
        assert metric is not None
        used = metric.pod_usages.get(held.key)
        return used is None or self._estimating(held, metric) == self._estimating(other, metric)

    def _estimating(self, info: AssignInfo, metric: MetricView) -> bool:
        """The pod's reported usage is not trusted yet: assigned after the metric's report window began, or
        before its estimation deadline (the time test of upstream's ``addPod``; a pod without reported usage is
        estimated regardless)."""
        update = self.update_time
        return update - metric.report_interval < info.timestamp or (
            info.deadline is not None and info.deadline > update
        )

    def _account(self, info: AssignInfo, sign: int) -> None:
        """``addPod`` (sign 1) / ``deletePod`` (sign -1) of upstream."""
        metric = self.metric
        assert metric is not None
        used = metric.pod_usages.get(info.key)
        active_prod = info.prod and info.key in metric.prod_pods
        if active_prod and used is not None:
            (add if sign > 0 else sub)(self.prod_usage, used)
        e = info.estimated
        if e is None:
            return
        should = used is None or self._estimating(info, metric)
        if should and add_delta(self.node_delta, e, used, sign):
            (self.node_delta_pods.add if sign > 0 else self.node_delta_pods.discard)(info.key)
        (add if sign > 0 else sub)(self.node_estimated, e)
        if not info.prod:
            return
        if not active_prod and used is not None:
            used, should = None, True
        if should and add_delta(self.prod_delta, e, used, sign):
            (self.prod_delta_pods.add if sign > 0 else self.prod_delta_pods.discard)(info.key)

    def plain_base(self) -> Vec | None:
        """nodeUsage + nodeDelta, or nodeEstimated when the NodeMetric has no nodeMetric."""
        if self.metric is None:
            return None
        if self.metric.node_usage is None:
            return list(self.node_estimated)
        out = list(self.metric.node_usage)
        add(out, self.node_delta)
        return out

    def prod_base(self) -> Vec:
        """prodUsage + prodDelta."""
        out = list(self.prod_usage)
        add(out, self.prod_delta)
        return out

    def aggregated_base(self, aggregation_type: str, duration: float) -> Vec | None:
        """Aggregated usage + nodeDelta; nodeEstimated alone when that aggregate is missing."""
        if self.metric is None:
            return None
        vec = self.metric.target_aggregated(aggregation_type, duration)
        if vec is None:
            return list(self.node_estimated)
        out = list(vec)
        add(out, self.node_delta)
        return out
