"""The LowNodeLoad balance plugin: one round over every node pool, producing an eviction plan.

Mirrors ``Balance`` / ``processOneNodePool`` (``low_node_load.go``) and ``evictPodsFromSourceNodes`` /
``balancePods`` / ``evictPods`` (``utilization_util.go``) of koordinator-sh/koordinator. Pure apart from
the anomaly detectors it keeps between rounds; the caller executes :attr:`RoundResult.evictions`.

Where Go iterates a map (target and low-node order), this rebuild sorts: targets by weighted usage
ascending then name, sources by weighted usage descending then name, so a round is deterministic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from app.api.labelselector import selector_matches
from app.descheduler.anomaly import DetectorCache, filter_abnormal, mark_normal, reset_nodes
from app.descheduler.classify import EXPLAIN, NodeClass, classify
from app.descheduler.config import DefaultEvictorArgs, LowNodeLoadArgs, NodePool
from app.descheduler.evictorfilter import evict_filter, lownodeload_filter, pdb_blocks
from app.descheduler.limits import EvictionLimits
from app.descheduler.model import ClusterView, PodView
from app.descheduler.nodefit import fits_any_with_threshold
from app.descheduler.podorder import sort_pods
from app.descheduler.thresholds import NodeThresholds, PoolThresholds, new_thresholds, node_thresholds, overutilized
from app.descheduler.usage import NodeUsage, node_usage, usage_percent

log = logging.getLogger("koord.descheduler")


@dataclass
class NodeReport:
    """One node's classification: usage and thresholds (internal units), usage percent, class, why."""

    name: str
    pool: str
    node_class: NodeClass
    explanation: str
    usage: dict[str, int]
    usage_percent: dict[str, float]
    low: dict[str, int]
    high: dict[str, int]
    prod_usage: dict[str, int]
    prod_low: dict[str, int]
    prod_high: dict[str, int]
    allocatable: dict[str, int] = field(default_factory=dict)
    abnormal: bool = False


@dataclass
class PlannedEviction:
    """A pod to evict: identity, its node, the target nodeFit found ("" without nodeFit), the reason."""

    namespace: str
    name: str
    uid: str
    node: str
    target: str
    reason: str
    prod: bool = False
    pod: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class SkippedPod:
    """A pod on a source node that was not chosen, with the reason."""

    namespace: str
    name: str
    node: str
    reason: str


@dataclass
class RoundResult:
    """Everything one round decided (what ``--dry-run -o json`` prints and ``explain`` shows)."""

    nodes: list[NodeReport] = field(default_factory=list)
    evictions: list[PlannedEviction] = field(default_factory=list)
    skipped: list[SkippedPod] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON-shaped summary (pods by ``namespace/name``; quantities in internal units)."""
        return {
            "nodes": [
                {
                    "name": n.name,
                    "nodePool": n.pool,
                    "class": str(n.node_class),
                    "explanation": n.explanation,
                    "abnormal": n.abnormal,
                    "usage": n.usage,
                    "usagePercent": {k: round(v, 2) for k, v in n.usage_percent.items()},
                    "lowThreshold": n.low,
                    "highThreshold": n.high,
                    "prodUsage": n.prod_usage,
                    "prodLowThreshold": n.prod_low,
                    "prodHighThreshold": n.prod_high,
                    "lowThresholdPercent": _percent(n.low, n.allocatable),
                    "highThresholdPercent": _percent(n.high, n.allocatable),
                }
                for n in self.nodes
            ],
            "evictions": [
                {"pod": f"{e.namespace}/{e.name}", "uid": e.uid, "node": e.node, "target": e.target, "reason": e.reason}
                for e in self.evictions
            ],
            "skipped": [{"pod": f"{s.namespace}/{s.name}", "node": s.node, "reason": s.reason} for s in self.skipped],
            "messages": self.messages,
        }


def _percent(amounts: dict[str, int], allocatable: dict[str, int]) -> dict[str, float]:
    return {r: round(100.0 * v / allocatable[r], 2) for r, v in amounts.items() if allocatable.get(r)}


def node_score(usage: dict[str, int], allocatable: dict[str, int], weights: dict[str, int]) -> int:
    """``ResourceUsageScorer``: Σ w·min(used, alloc)·1000//alloc / Σ w over the usage's resources (integer)."""
    score = weight_sum = 0
    for r, used in usage.items():
        w = weights.get(r, 0)
        cap = allocatable.get(r, 0)
        s = 0 if cap == 0 else min(used, cap) * 1000 // cap
        score += s * w
        weight_sum += w
    return score // weight_sum if weight_sum else 0


def _reason(u: NodeUsage, t: NodeThresholds, pct: PoolThresholds, prod: bool) -> str:
    """``overUtilizedEvictionReason``."""
    usage, thr, percents, word = (
        (u.prod_usage, t.prod_high, pct.prod_high, "prod") if prod else (u.usage, t.high, pct.high, "node")
    )
    over = overutilized(usage, thr)
    used_pct = usage_percent(usage, u.node.allocatable)
    infos = [
        f"{word} {r} usage({used_pct.get(r, 0.0):.2f}%)>threshold({percents[r]:.2f}%)"
        for r in sorted(percents)
        if r in over
    ]
    return "node is overutilized, " + ", ".join(infos)


class LowNodeLoad:
    """The plugin with its state across rounds (the node and prod anomaly detector caches).

    Args:
        args: parsed LowNodeLoadArgs.
        evictor: DefaultEvictorArgs of the default evictor filter (defaults when None).
    """

    def __init__(self, args: LowNodeLoadArgs, evictor: DefaultEvictorArgs | None = None) -> None:
        self.args = args
        self.evictor = evictor or DefaultEvictorArgs()
        self.node_detectors = DetectorCache(args.detector_cache_timeout)
        self.prod_detectors = DetectorCache(args.detector_cache_timeout)

    def balance(
        self, view: ClusterView, limits: EvictionLimits | None = None, node_selector: dict[str, Any] | None = None
    ) -> RoundResult:
        """Run one round: every pool in order, a node taken by a pool's sources is not seen by later pools.

        ``node_selector`` is the DeschedulerConfiguration's top-level one (None = all nodes).
        """
        result = RoundResult()
        if self.args.paused:
            result.messages.append("LowNodeLoad is paused")
            return result
        limits = limits or EvictionLimits()
        names = sorted(
            n for n, node in view.nodes.items() if node_selector is None or selector_matches(node_selector, node.labels)
        )
        processed: set[str] = set()
        for pool in self.args.node_pools:
            self._pool(view, pool, names, processed, limits, result)
        return result

    # ------------------------------------------------------------------------------------------
    def _pool(
        self,
        view: ClusterView,
        pool: NodePool,
        names: list[str],
        processed: set[str],
        limits: EvictionLimits,
        result: RoundResult,
    ) -> None:
        now = view.now
        if pool.node_selector is not None:
            names = [
                n for n in names if n not in processed and selector_matches(pool.node_selector, view.nodes[n].labels)
            ]
        if not names:
            result.messages.append(f"{pool.name}: no nodes to process")
            return
        pct = new_thresholds(pool)
        resources = pct.resource_names
        usages: dict[str, NodeUsage] = {}
        for n in names:
            u = node_usage(view, view.nodes[n], resources, self.args.node_metric_expiration_seconds)
            if u is not None:
                usages[n] = u
        thresholds = node_thresholds(usages, pct, pool.use_deviation_thresholds)
        classes = {n: classify(usages[n], thresholds[n]) for n in sorted(usages)}
        by_class: dict[NodeClass, list[str]] = {c: [n for n, k in classes.items() if k == c] for c in NodeClass}
        reports = {}
        for n, c in classes.items():
            u, t = usages[n], thresholds[n]
            reports[n] = NodeReport(
                n,
                pool.name,
                c,
                EXPLAIN[c],
                dict(u.usage),
                usage_percent(u.usage, u.node.allocatable),
                dict(t.low),
                dict(t.high),
                dict(u.prod_usage),
                dict(t.prod_low),
                dict(t.prod_high),
                dict(u.node.allocatable),
            )
        result.nodes.extend(reports.values())
        for n, report in reports.items():
            log.debug("node %s is %s (%s): usage %s", n, report.node_class, report.explanation, report.usage_percent)
        log.info(
            "%s: criteria for nodes under low thresholds and above high thresholds: %s",
            pool.name,
            ", ".join(f"{len(by_class[c])} {c}" for c in NodeClass),
        )
        high, prod_high = by_class[NodeClass.HIGH], by_class[NodeClass.PROD_HIGH]
        low, prod_low, both_low = by_class[NodeClass.LOW], by_class[NodeClass.PROD_LOW], by_class[NodeClass.BOTH_LOW]
        if not high and not prod_high:
            result.messages.append(f"{pool.name}: all nodes are under target utilization, nothing to do here")
            return
        abnormal = filter_abnormal(high, self.node_detectors, pool.anomaly_condition, now)
        abnormal_prod = filter_abnormal(prod_high, self.prod_detectors, pool.anomaly_condition, now)
        for n in (*abnormal, *abnormal_prod):
            reports[n].abnormal = True
        if not abnormal and not abnormal_prod:
            result.messages.append(f"{pool.name}: none of the nodes were detected as anomalous, nothing to do here")
            return
        if not low and not prod_low and not both_low:
            result.messages.append(
                f"{pool.name}: no nodes are underutilized, nothing to do here, you might tune your thresholds further"
            )
            return
        reset_nodes(low, self.node_detectors, now)
        reset_nodes(prod_low, self.prod_detectors, now)
        reset_nodes(both_low, self.node_detectors, now)
        all_low = len(low) + len(prod_low) + len(both_low)
        if all_low <= self.args.number_of_nodes:
            result.messages.append(
                f"{pool.name}: number of nodes underutilized ({all_low}) is less or equal than numberOfNodes "
                f"({self.args.number_of_nodes}), nothing to do here"
            )
            return
        if all_low == len(usages):
            result.messages.append(f"{pool.name}: all nodes are underutilized, nothing to do here")
            return

        def by_score(nodes: list[str], prod: bool, descending: bool) -> list[str]:
            def key(n: str) -> tuple[int, str]:
                u = usages[n]
                s = node_score(u.prod_usage if prod else u.usage, u.node.allocatable, pool.resource_weights)
                return (-s if descending else s, n)

            return sorted(nodes, key=key)

        ctx = _Balance(self, view, pool, pct, usages, thresholds, resources, limits, result)
        # node balancing: low + bothLow targets
        avail = ctx.available(low, prod=False)
        both_avail = ctx.available(both_low, prod=False)
        node_avail = {r: avail[r] + both_avail[r] for r in resources}
        ctx.balance_pods(by_score(abnormal, False, True), by_score([*low, *both_low], False, False), node_avail, False)
        # prod balancing: prodLow + bothLow targets; bothLow's share limited by what node balancing left
        for r in resources:
            both_avail[r] = min(both_avail[r], node_avail[r])
        prod_avail = ctx.available(prod_low, prod=True)
        prod_both = ctx.available(both_low, prod=True)
        prod_total = {r: prod_avail[r] + min(prod_both[r], both_avail[r]) for r in resources}
        ctx.balance_pods(
            by_score(abnormal_prod, True, True), by_score([*prod_low, *both_low], True, False), prod_total, True
        )
        mark_normal(abnormal, self.node_detectors, now)
        mark_normal(abnormal_prod, self.prod_detectors, now)
        processed.update(high)


@dataclass
class _Balance:
    """Working state of one pool's eviction pass."""

    plugin: LowNodeLoad
    view: ClusterView
    pool: NodePool
    pct: PoolThresholds
    usages: dict[str, NodeUsage]
    thresholds: dict[str, NodeThresholds]
    resources: list[str]
    limits: EvictionLimits
    result: RoundResult

    def available(self, nodes: list[str], prod: bool) -> dict[str, int]:
        """``targetAvailableUsage``: Σ (high threshold - usage) over ``nodes`` per resource."""
        out = dict.fromkeys(self.resources, 0)
        for n in nodes:
            u, t = self.usages[n], self.thresholds[n]
            for r in self.resources:
                out[r] += (t.prod_high[r] - u.prod_usage[r]) if prod else (t.high[r] - u.usage[r])
        return out

    def _continue(self, n: str, avail: dict[str, int], prod: bool) -> bool:
        u, t = self.usages[n], self.thresholds[n]
        usage, high = (u.prod_usage, t.prod_high) if prod else (u.usage, t.high)
        if not overutilized(usage, high):
            reset_nodes([n], self.plugin.prod_detectors if prod else self.plugin.node_detectors, self.view.now)
            return False
        return all(avail[r] > 0 for r in self.resources if r in avail)

    def _filter(self, pod: PodView) -> str | None:
        job = self.view.migrating.get(pod.key)
        if job is not None:
            return f"pod is already being migrated by PodMigrationJob {job}"
        return (
            lownodeload_filter(pod, self.plugin.args)
            or evict_filter(pod, self.plugin.evictor)
            or pdb_blocks(pod, self.view.pdbs)
        )

    def balance_pods(self, sources: list[str], targets: list[str], avail: dict[str, int], prod: bool) -> None:
        """``balancePods`` + ``evictPods`` for one kind (node or prod)."""
        if not targets:
            return
        target_views = [self.usages[n].node for n in targets]
        target_usage = {n: (self.usages[n].prod_usage if prod else self.usages[n].usage) for n in targets}
        target_high = {n: (self.thresholds[n].prod_high if prod else self.thresholds[n].high) for n in targets}
        for src in sources:
            u, t = self.usages[src], self.thresholds[src]
            removable: list[PodView] = []
            chosen_target: dict[str, str] = {}
            for pod in u.prod_pods if prod else u.pods:
                why = self._filter(pod)
                if why is None and self.plugin.args.node_fit:
                    metric = u.pod_metrics.get(pod.key)
                    if metric is None:
                        why = "pod has no usage in the NodeMetric"
                    else:
                        target = fits_any_with_threshold(pod, metric, target_views, target_usage, target_high)
                        if target is None:
                            why = "pod fits no target node without exceeding its high threshold"
                        else:
                            chosen_target[pod.key] = target
                if why is not None:
                    self.result.skipped.append(SkippedPod(pod.info.namespace, pod.info.name, src, why))
                else:
                    removable.append(pod)
            if not removable:
                continue
            usage, high = (u.prod_usage, t.prod_high) if prod else (u.usage, t.high)
            excess = {r: v - high[r] for r, v in overutilized(usage, high).items()}
            ordered = sort_pods(removable, u.pod_metrics, excess, self.pool.resource_weights)
            for i, pod in enumerate(ordered):
                if not self._continue(src, avail, prod):
                    for rest in ordered[i:]:
                        self.result.skipped.append(
                            SkippedPod(
                                rest.info.namespace, rest.info.name, src, "source node no longer needs evictions"
                            )
                        )
                    break
                refusal = self.limits.refusal(src, pod.info.namespace)
                if refusal is not None:
                    self.result.skipped.append(SkippedPod(pod.info.namespace, pod.info.name, src, refusal))
                    continue
                self.limits.record(src, pod.info.namespace)
                self.result.evictions.append(
                    PlannedEviction(
                        pod.info.namespace,
                        pod.info.name,
                        pod.info.uid,
                        src,
                        chosen_target.get(pod.key, ""),
                        _reason(u, t, self.pct, prod),
                        prod,
                        pod.obj,
                    )
                )
                metric = u.pod_metrics.get(pod.key)
                if metric is None:
                    continue
                for r in avail:
                    q = 1 if r == "pods" else metric.get(r, 0)
                    avail[r] -= q
                    if r in u.usage:
                        u.usage[r] -= q
                    if prod and r in u.prod_usage:
                        u.prod_usage[r] -= q
