"""LowNodeLoad thresholds: percentages per pool into quantities per node.

Mirrors ``newThresholds`` (``low_node_load.go``) and ``getNodeThresholds`` / ``resourceThreshold`` /
``calcAverageResourceUsagePercent`` (``utilization_util.go``). Quantities are in the resource's
internal unit (cpu milli-cores, memory bytes, pods count).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.descheduler.config import MAX_PERCENT, MIN_PERCENT, NodePool
from app.descheduler.usage import NodeUsage


@dataclass
class PoolThresholds:
    """The four percentage maps of a pool after filling (every resource of any map, plus memory, in each)."""

    low: dict[str, float]
    high: dict[str, float]
    prod_low: dict[str, float]
    prod_high: dict[str, float]

    @property
    def resource_names(self) -> list[str]:
        """``getResourceNames(lowThresholds)``, sorted for determinism."""
        return sorted(self.low)


@dataclass
class NodeThresholds:
    """``NodeThresholds``: quantities per resource."""

    low: dict[str, int]
    high: dict[str, int]
    prod_low: dict[str, int]
    prod_high: dict[str, int]


def new_thresholds(pool: NodePool) -> PoolThresholds:
    """Fill the pool's maps: a resource named in any map (and memory, always) that a low/prod-low map lacks
    gets 100% low and high (0 in deviation mode, which means "capacity"); one the low map has but the high
    map lacks gets a high of 0, as upstream's ``newThresholds`` leaves it (Go's zero value: 0 %, or the
    mean itself in deviation mode)."""
    low, high = dict(pool.low_thresholds), dict(pool.high_thresholds)
    prod_low, prod_high = dict(pool.prod_low_thresholds), dict(pool.prod_high_thresholds)
    names = {*low, *high, *prod_low, *prod_high, "memory"}
    fill = MIN_PERCENT if pool.use_deviation_thresholds else MAX_PERCENT
    for name in sorted(names):
        if name not in low:
            low[name] = fill
            high[name] = fill
        if name not in prod_low:
            prod_low[name] = fill
            prod_high[name] = fill
        # a low threshold without its high one: Go reads the missing map entry as 0 (deviation: the mean)
        high.setdefault(name, 0.0)
        prod_high.setdefault(name, 0.0)
    return PoolThresholds(low, high, prod_low, prod_high)


def _clamp(pct: float) -> float:
    return min(MAX_PERCENT, max(MIN_PERCENT, pct))


def resource_threshold(allocatable: dict[str, int], name: str, pct: float) -> int:
    """``int(pct * 0.01 * allocatable)`` (milli-cores for cpu), truncated as Go's int64 conversion."""
    return int(pct * 0.01 * float(allocatable.get(name, 0)))


def average_usage_percent(usages: dict[str, NodeUsage]) -> tuple[dict[str, float], dict[str, float]]:
    """Mean usage percent per resource over the nodes (all and prod), zero-allocatable nodes adding 0."""
    total: dict[str, float] = {}
    prod: dict[str, float] = {}
    for u in usages.values():
        alloc = u.node.allocatable
        for name, used in u.usage.items():
            if alloc.get(name):
                total[name] = total.get(name, 0.0) + used / alloc[name] * 100.0
        for name, used in u.prod_usage.items():
            if alloc.get(name):
                prod[name] = prod.get(name, 0.0) + used / alloc[name] * 100.0
    n = len(usages) or 1
    return {k: v / n for k, v in total.items()}, {k: v / n for k, v in prod.items()}


def node_thresholds(
    usages: dict[str, NodeUsage], pct: PoolThresholds, use_deviation: bool
) -> dict[str, NodeThresholds]:
    """Thresholds of each node. Absolute: ``pct * allocatable``. Deviation: average ∓ configured,
    clamped to [0, 100]; a configured 0 makes both low and high the capacity."""
    avg, prod_avg = average_usage_percent(usages) if use_deviation else ({}, {})
    out: dict[str, NodeThresholds] = {}
    for name, u in usages.items():
        alloc = u.node.allocatable
        t = NodeThresholds({}, {}, {}, {})
        for r in pct.resource_names:
            if use_deviation:
                cap = alloc.get(r, 0)
                if pct.low[r] == MIN_PERCENT:
                    t.low[r] = t.high[r] = cap
                else:
                    t.low[r] = resource_threshold(alloc, r, _clamp(avg.get(r, 0.0) - pct.low[r]))
                    t.high[r] = resource_threshold(alloc, r, _clamp(avg.get(r, 0.0) + pct.high[r]))
                if pct.prod_low[r] == MIN_PERCENT:
                    t.prod_low[r] = t.prod_high[r] = cap
                else:
                    t.prod_low[r] = resource_threshold(alloc, r, _clamp(prod_avg.get(r, 0.0) - pct.prod_low[r]))
                    t.prod_high[r] = resource_threshold(alloc, r, _clamp(prod_avg.get(r, 0.0) + pct.prod_high[r]))
            else:
                t.low[r] = resource_threshold(alloc, r, pct.low[r])
                t.high[r] = resource_threshold(alloc, r, pct.high[r])
                t.prod_low[r] = resource_threshold(alloc, r, pct.prod_low[r])
                t.prod_high[r] = resource_threshold(alloc, r, pct.prod_high[r])
        out[name] = t
    return out


def overutilized(usage: dict[str, int], thresholds: dict[str, int]) -> dict[str, int]:
    """``isNodeOverutilized``: the resources whose usage is strictly above their threshold (resource -> usage)."""
    return {r: usage[r] for r, t in thresholds.items() if r in usage and usage[r] > t}


def underutilized(usage: dict[str, int], thresholds: dict[str, int]) -> bool:
    """``isNodeUnderutilized``: every threshold resource at or below its threshold."""
    return all(usage[r] <= t for r, t in thresholds.items() if r in usage)
