"""Evictions: BE memory (node memory above threshold) and BE CPU satisfaction.

Follows upstream ``qosmanager/plugins/memoryevict/memory_evict.go`` (``BEMemoryEvict``) and
``qosmanager/plugins/cpuevict/cpu_evict.go`` (``BECPUEvict``). Both return the pods to evict in
order with the amount each releases; the agent evicts them (API or recorded) and then cools down
(memory 4 s, cpu 20 s). Victims are taken until the amount to release is covered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent.qos.context import BE_CPU_REAL_LIMIT, BE_CPU_REQUEST, BE_CPU_USAGE, NODE_MEMORY, QoSContext
from agent.states.pods import PodMeta, batch_cpu_request
from app.api.koordext import QoSClass

log = logging.getLogger("agent.qos.evict")

EVICT_REASON_PREFIX = "trigger by koordlet feature "
MEMORY_RELEASE_BUFFER_PERCENT = 2
BE_CPU_SATISFACTION_LOW_PERCENT_MAX = 60
BE_CPU_SATISFACTION_UPPER_PERCENT_MAX = 100
BE_CPU_USAGE_THRESHOLD_PERCENT = 90
MEMORY_EVICT_COOL_SECONDS = 4.0
CPU_EVICT_COOL_SECONDS = 20.0


@dataclass(slots=True)
class Victim:
    """A pod to evict, the reason (``trigger by koordlet feature <Gate>``) and what it releases."""

    pod: PodMeta
    reason: str
    releases: int


def _take(victims: list[Victim], need: int) -> list[Victim]:
    out, released = [], 0
    for v in victims:
        if released >= need:
            break
        out.append(v)
        released += v.releases
    return out


def memory_to_release(used: int, capacity: int, threshold: int, lower: int | None) -> int:
    """Bytes to release (0 when below the threshold): ``capacity * (usage% - lower%) / 100`` with integer
    percent ``used * 100 / capacity`` and ``lower`` defaulting to ``threshold - 2``."""
    if capacity <= 0:
        return 0
    usage = used * 100 // capacity
    if usage < threshold:
        return 0
    low = lower if lower is not None else threshold - MEMORY_RELEASE_BUFFER_PERCENT
    return capacity * (usage - low) // 100


def sort_be_by_memory(pods: list[PodMeta], used: dict[str, float]) -> list[PodMeta]:
    """BE pods ordered as ``getSortedBEPodInfos``: priority asc, then memory desc (pods without usage last,
    among those name desc)."""
    import functools

    def cmp(a: PodMeta, b: PodMeta) -> int:
        if a.priority is not None and b.priority is not None and a.priority != b.priority:
            return -1 if a.priority < b.priority else 1
        ua, ub = int(used.get(a.uid, 0)), int(used.get(b.uid, 0))
        if ua and ub:
            return -1 if ua > ub else (1 if ua < ub else 0)
        if not ua and not ub:
            return -1 if a.name > b.name else (1 if a.name < b.name else 0)
        return -1 if ub == 0 else 1

    return sorted(pods, key=functools.cmp_to_key(cmp))


def be_memory_victims(ctx: QoSContext) -> list[Victim]:
    """Victims of ``BEMemoryEvict`` this round (empty when disabled, invalid or below threshold)."""
    if not ctx.feature_active("BEMemoryEvict"):
        return []
    th = ctx.thresholds
    threshold = th.memory_evict_threshold_percent
    if threshold is None or threshold < 0:
        log.warning("skip memory evict: threshold percent(%s) invalid", threshold)
        return []
    lower = th.memory_evict_lower_percent
    if (lower if lower is not None else threshold - MEMORY_RELEASE_BUFFER_PERCENT) >= threshold:
        log.warning("skip memory evict: lower percent(%s) should less than threshold percent(%s)", lower, threshold)
        return []
    node_used = ctx.cache.last(NODE_MEMORY, ctx.now, 2 * ctx.interval + 0.5)
    if node_used is None:
        return []
    need = memory_to_release(int(node_used), ctx.capacity_memory, threshold, lower)
    if need <= 0:
        return []
    used = ctx.last_pod_values("pod_memory")
    candidates = [p for p in ctx.pods if p.qos_raw == QoSClass.BE and p.active and p.eviction_enabled]
    reason = EVICT_REASON_PREFIX + "BEMemoryEvict"
    ordered = [Victim(p, reason, int(used.get(p.uid, 0))) for p in sort_be_by_memory(candidates, used)]
    log.info("memoryEvict: node memory %d of %d bytes, releasing %d bytes", int(node_used), ctx.capacity_memory, need)
    return _take(ordered, need)


def satisfaction_config_error(lower: int | None, upper: int | None) -> str | None:
    """Why the satisfaction percents are invalid (``isSatisfactionConfigValid``), None when valid."""
    if lower is None or upper is None:
        return "CPUEvictBESatisfactionLowerPercent or CPUEvictBESatisfactionUpperPercent not config"
    if lower > BE_CPU_SATISFACTION_LOW_PERCENT_MAX or lower <= 0:
        return (
            f"CPUEvictBESatisfactionLowerPercent({lower}) is not valid! must (0,{BE_CPU_SATISFACTION_LOW_PERCENT_MAX}]"
        )
    if upper >= BE_CPU_SATISFACTION_UPPER_PERCENT_MAX or upper <= 0:
        return (
            f"CPUEvictBESatisfactionUpperPercent({upper}) is not valid,must (0,{BE_CPU_SATISFACTION_UPPER_PERCENT_MAX})"
        )
    if upper < lower:
        return f"CPUEvictBESatisfactionUpperPercent({upper}) < CPUEvictBESatisfactionLowerPercent({lower})"
    return None


def usage_high_enough(usage: float, limit: float, threshold: int | None) -> bool:
    """``isBECPUUsageHighEnough``: limit <= 0 -> False; limit < 1 core -> True; else usage/limit >= threshold%."""
    if limit <= 0:
        return False
    if limit < 1000:
        return True
    return usage / limit >= (threshold if threshold is not None else BE_CPU_USAGE_THRESHOLD_PERCENT) / 100


def cpu_to_release(request: float, limit: float, lower: int, upper: int) -> int:
    """Milli-cores to release: ``request * (upper% - limit/request)`` when ``limit/request <= lower%``."""
    if request <= 0:
        return 0
    rate = limit / request
    if rate > lower / 100:
        return 0
    gap = upper / 100 - rate
    return int(request * gap) if gap > 0 else 0


def be_cpu_victims(ctx: QoSContext) -> list[Victim]:
    """Victims of ``BECPUEvict`` (BE satisfaction) this round."""
    if not ctx.feature_active("BECPUEvict"):
        return []
    th = ctx.thresholds
    err = satisfaction_config_error(
        th.cpu_evict_be_satisfaction_lower_percent, th.cpu_evict_be_satisfaction_upper_percent
    )
    if err:
        log.warning("skip cpu evict, invalid config: %s", err)
        return []
    lower, upper = th.cpu_evict_be_satisfaction_lower_percent or 0, th.cpu_evict_be_satisfaction_upper_percent or 0
    window = max(ctx.interval, float(th.cpu_evict_time_window_seconds or 0))
    start = ctx.now - window
    aggs = [ctx.cache.aggregate(k, start, ctx.now) for k in (BE_CPU_USAGE, BE_CPU_REQUEST, BE_CPU_REAL_LIMIT)]
    if any(a is None for a in aggs):
        return []
    usage, request, real_limit = (a.value for a in aggs if a is not None)
    count = min(a.count for a in aggs if a is not None)
    if count * max(int(ctx.interval), 1) < int(window) // 3:
        log.warning("cpuEvict skipped, metricsCount(%d) not enough! windowSize: %s", count, window)
        return []
    allocatable = float(ctx.allocatable.get("kubernetes.io/batch-cpu", -1))
    if allocatable == 0:
        allocatable = 1.0
    limit = allocatable if th.cpu_evict_policy == "evictByAllocatable" else real_limit
    if not usage_high_enough(usage, limit, th.cpu_evict_be_usage_threshold_percent):
        return []
    release = cpu_to_release(request, limit, lower, upper)
    if release <= 0:
        return []
    cur = [
        ctx.cache.last(k, ctx.now, 2 * ctx.interval + 0.5) for k in (BE_CPU_USAGE, BE_CPU_REQUEST, BE_CPU_REAL_LIMIT)
    ]
    if any(v is None for v in cur):
        return []
    cur_usage, cur_request, cur_real = (float(v) for v in cur if v is not None)
    cur_limit = allocatable if th.cpu_evict_policy == "evictByAllocatable" else cur_real
    if not usage_high_enough(cur_usage, cur_limit, th.cpu_evict_be_usage_threshold_percent):
        return []
    if not (cur_request == request and cur_limit == limit):
        by_current = cpu_to_release(cur_request, cur_limit, lower, upper)
        if by_current <= 0:
            return []
        release = min(release, by_current)
    cpu_used = ctx.last_pod_values("pod_cpu")
    candidates = [p for p in ctx.pods if p.qos_raw == QoSClass.BE and p.active and p.eviction_enabled]

    def ratio(p: PodMeta) -> float:
        req = batch_cpu_request(p)
        return cpu_used.get(p.uid, 0.0) * 1000 / req if req > 0 else 0.0

    candidates.sort(key=lambda p: (p.priority if p.priority is not None else 0, -ratio(p)))
    reason = EVICT_REASON_PREFIX + "BECPUEvict"
    log.info("cpuEvict: BE satisfaction %.2f, releasing %d milli-cores", limit / request if request else 0, release)
    return _take([Victim(p, reason, batch_cpu_request(p)) for p in candidates], release)
