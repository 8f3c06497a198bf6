"""Batch allocatable of one node: upstream's BatchResource formula.

Follows ``pkg/slo-controller/noderesource/plugins/batchresource/plugin.go`` (``calculateOnNode``,
``isDegradeNeeded``, ``Prepare``) and ``plugins/util/util.go`` (``CalculateBatchResourceByPolicy``,
``GetNodeSafetyMargin``). Units: cpu in **milli-cores**, memory in **bytes**, all integers.

- Degrade: no NodeMetric, no ``status.updateTime``, or ``now > updateTime + degradeTimeMinutes``
  -> the batch resources are reset (removed from the node).
- HP pods = Running/Pending pods on the node whose priority class (with default) is not
  koord-batch/koord-free. request += request; used += reported usage (LSE: cpu from the request)
  or the request when unreported; maxUsedReq += max(request, usage) for reported pods.
  Pods reported in the NodeMetric but not on the node count with their usage unless their metric
  priority is koord-batch/koord-free.
- ``safetyMargin = int(capacity * ((100 - reclaimPercent) / 100))``;
  ``nodeReserved = max(capacity - allocatable (>= 0), annotation node.koordinator.sh/reservation)``;
  ``systemUsed = max(NodeMetric systemUsage + usage of host applications above batch, nodeReserved)``.
- byUsage = cap - margin - systemUsed - HPused; byRequest = cap - margin - nodeReserved - HPrequest;
  byMaxUsageRequest = cap - margin - systemUsed - HPmaxUsedReq; each floored at 0. cpu: policy
  ``maxUsageRequest`` -> byMaxUsageRequest, else byUsage; memory: ``request`` -> byRequest,
  ``maxUsageRequest`` -> byMaxUsageRequest, else byUsage. ``batch*ThresholdPercent`` caps at
  ``int(capacity * pct / 100)``.
- Then batch allocations of third parties (annotation ``node.koordinator.sh/thirdPartyAllocations``)
  are subtracted (floored at 0) and batch-cpu is scaled by ``node.koordinator.sh/cpu-normalization-ratio``
  when that ratio is > 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.api.koordext import PriorityClass, QoSClass
from app.manager.colocation import ColocationStrategy

RES = ("cpu", "memory")
Vec = dict[str, int]

#: ``GetDefaultPriorityByPriorityClass``.
DEFAULT_PRIORITY = {"koord-prod": 9500, "koord-mid": 7500, "koord-batch": 5500, "koord-free": 3500}
LOW_PRIORITY = ("koord-batch", "koord-free")
DEGRADE_MESSAGE = "degrade node resource because of abnormal nodeMetric, reason: degradedByBatchResource"


@dataclass(frozen=True, slots=True)
class PodInput:
    """A pod on the node: ``key`` is ``namespace/name``; ``requests`` cpu milli-cores / memory bytes."""

    key: str
    phase: str
    priority_class: PriorityClass
    qos: QoSClass
    requests: Vec


@dataclass(frozen=True, slots=True)
class MetricInput:
    """The node's NodeMetric reduced to what the formula reads.

    Attributes:
        update_time: ``status.updateTime`` as epoch seconds, or None.
        system_usage: ``nodeMetric.systemUsage`` cpu (milli) / memory (bytes).
        pods: ``podsMetric`` by ``namespace/name``: (metric priority class string, usage).
        host_apps: ``hostApplicationMetric``: (priority class string, usage).
        node_usage: ``nodeMetric.nodeUsage`` cpu (milli) / memory (bytes); None when absent or incomplete.
        prod_reclaimable: ``prodReclaimableMetric.resource`` (the agent's prediction); None when absent.
    """

    update_time: float | None
    system_usage: Vec = field(default_factory=dict)
    pods: Mapping[str, tuple[str, Vec]] = field(default_factory=dict)
    host_apps: tuple[tuple[str, Vec], ...] = ()
    node_usage: Vec | None = None
    prod_reclaimable: Vec | None = None


@dataclass(frozen=True, slots=True)
class NodeInput:
    """The node: capacity and allocatable (cpu milli, memory bytes), annotation reservation, third-party
    batch allocations (already summed, batch-cpu milli / batch-memory bytes) and cpu normalization ratio."""

    capacity: Vec
    allocatable: Vec
    reserved: Vec = field(default_factory=dict)
    third_party_batch: Vec = field(default_factory=dict)
    cpu_normalization_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class ReclaimResult:
    """What a node's Batch (:func:`calculate_batch`) or Mid (:func:`app.manager.mid.calculate_mid`) calculation
    found: ``reset`` (remove the resources), else ``cpu`` milli-cores and ``memory`` bytes, with each one's message
    (upstream's pair of ``framework.ResourceItem``)."""

    reset: bool
    cpu: int = 0
    memory: int = 0
    cpu_message: str = ""
    memory_message: str = ""


def _add(a: Vec, b: Mapping[str, int]) -> Vec:
    return {r: a.get(r, 0) + b.get(r, 0) for r in RES}


def _sub(a: Vec, b: Mapping[str, int]) -> Vec:
    return {r: a.get(r, 0) - b.get(r, 0) for r in RES}


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> Vec:
    return {r: max(a.get(r, 0), b.get(r, 0)) for r in RES}


def _floor0(a: Vec) -> Vec:
    return {r: max(v, 0) for r, v in a.items()}


def is_degraded(strategy: ColocationStrategy, metric: MetricInput | None, now: float) -> bool:
    """``isDegradeNeeded``: NodeMetric missing, never updated, or older than degradeTimeMinutes."""
    if metric is None or metric.update_time is None:
        return True
    return now > metric.update_time + strategy.degrade_minutes * 60


def hp_totals(pods: Iterable[PodInput], metric: MetricInput) -> tuple[Vec, Vec, Vec]:
    """(HP request, HP used, HP max(used, request)) as ``calculateOnNode`` sums them."""
    req: Vec = {"cpu": 0, "memory": 0}
    used: Vec = {"cpu": 0, "memory": 0}
    max_used_req: Vec = {"cpu": 0, "memory": 0}
    dangling = dict(metric.pods)
    for pod in pods:
        if pod.phase not in ("Running", "Pending"):
            continue
        reported = metric.pods.get(pod.key)
        dangling.pop(pod.key, None)
        if pod.priority_class in (PriorityClass.BATCH, PriorityClass.FREE):
            continue
        req = _add(req, pod.requests)
        if reported is None:
            used = _add(used, pod.requests)
        elif pod.qos == QoSClass.LSE:
            usage = reported[1]
            used = _add(used, {"cpu": pod.requests.get("cpu", 0), "memory": usage.get("memory", 0)})
            max_used_req = _add(max_used_req, _max(pod.requests, usage))
        else:
            usage = reported[1]
            used = _add(used, usage)
            max_used_req = _add(max_used_req, _max(pod.requests, usage))
    for priority, usage in dangling.values():
        if priority in LOW_PRIORITY:
            continue
        used = _add(used, usage)
        max_used_req = _add(max_used_req, usage)
    return req, used, max_used_req


def safety_margin(strategy: ColocationStrategy, capacity: Vec) -> Vec:
    """``GetNodeSafetyMargin``: capacity x (100 - reclaim percent) / 100, truncated toward zero."""
    return {
        "cpu": int(capacity.get("cpu", 0) * ((100 - strategy.cpu_reclaim_percent) / 100.0)),
        "memory": int(capacity.get("memory", 0) * ((100 - strategy.memory_reclaim_percent) / 100.0)),
    }


def _giga(v: int) -> int:
    return math.ceil(v / 1e9)


def calculate_batch(
    strategy: ColocationStrategy, node: NodeInput, pods: Iterable[PodInput], metric: MetricInput | None, now: float
) -> ReclaimResult:
    """Batch allocatable of the node (see the module docstring); ``now`` is epoch seconds."""
    if metric is None or is_degraded(strategy, metric, now):
        return ReclaimResult(reset=True, cpu_message=DEGRADE_MESSAGE, memory_message=DEGRADE_MESSAGE)
    req, used, max_used_req = hp_totals(pods, metric)
    host_hp: Vec = {"cpu": 0, "memory": 0}
    for priority, usage in metric.host_apps:
        if DEFAULT_PRIORITY.get(priority, 0) > DEFAULT_PRIORITY["koord-batch"]:
            host_hp = _add(host_hp, usage)
    cap = {r: node.capacity.get(r, 0) for r in RES}
    margin = safety_margin(strategy, cap)
    kubelet_reserved = _floor0(_sub(cap, node.allocatable))
    node_reserved = _max(kubelet_reserved, node.reserved)
    system_used = _max(_add(metric.system_usage, host_hp), node_reserved)
    by_usage = _floor0(_sub(_sub(_sub(cap, margin), system_used), used))
    by_request = _floor0(_sub(_sub(_sub(cap, margin), node_reserved), req))
    by_max = _floor0(_sub(_sub(_sub(cap, margin), system_used), max_used_req))

    if strategy.cpu_policy == "maxUsageRequest":
        cpu, cpu_term, cpu_hp = by_max["cpu"], "podHPMaxUsedRequest", max_used_req["cpu"]
    else:
        cpu, cpu_term, cpu_hp = by_usage["cpu"], "podHPUsed", used["cpu"]
    formula = (
        f"nodeCapacity:{cap['cpu']} - nodeSafetyMargin:{margin['cpu']} - "
        f"systemUsageOrNodeReserved:{system_used['cpu']} - {cpu_term}:{cpu_hp}"
    )
    if strategy.batch_cpu_percent is not None:
        ratio = strategy.batch_cpu_percent / 100
        cpu = min(cpu, int(cap["cpu"] * ratio))
        cpu_message = (
            f"batchAllocatable[CPU(Milli-Core)]:{cpu} = "
            f"min(nodeCapacity:{cap['cpu']} * thresholdRatio:{ratio}, {formula})"
        )
    else:
        cpu_message = f"batchAllocatable[CPU(Milli-Core)]:{cpu} = {formula}"

    if strategy.memory_policy == "request":
        memory, terms = by_request["memory"], ("nodeReserved", node_reserved, "podHPRequest", req)
    elif strategy.memory_policy == "maxUsageRequest":
        memory, terms = by_max["memory"], ("systemUsage", system_used, "podHPMaxUsedRequest", max_used_req)
    else:
        memory, terms = by_usage["memory"], ("systemUsage", system_used, "podHPUsed", used)
    mformula = (
        f"nodeCapacity:{_giga(cap['memory'])} - nodeSafetyMargin:{_giga(margin['memory'])} - "
        f"{terms[0]}:{_giga(terms[1]['memory'])} - {terms[2]}:{_giga(terms[3]['memory'])}"
    )
    if strategy.batch_memory_percent is not None:
        ratio = strategy.batch_memory_percent / 100
        memory = min(memory, int(cap["memory"] * ratio))
        memory_message = (
            f"batchAllocatable[Mem(GB)]:{_giga(memory)} = min(nodeCapacity:{_giga(cap['memory'])} * "
            f"thresholdRatio:{ratio}, {mformula})"
        )
    else:
        memory_message = f"batchAllocatable[Mem(GB)]:{_giga(memory)} = {mformula}"

    # Prepare: third-party batch allocations, then cpu normalization.
    cpu = max(cpu - node.third_party_batch.get("kubernetes.io/batch-cpu", 0), 0)
    memory = max(memory - node.third_party_batch.get("kubernetes.io/batch-memory", 0), 0)
    ratio_n = node.cpu_normalization_ratio
    if ratio_n is not None and ratio_n > 1.0:
        cpu = math.ceil(int(cpu * 1000 * ratio_n) / 1000)
    return ReclaimResult(False, cpu, memory, cpu_message, memory_message)


def is_resource_diff(old: int | None, new: int | None, threshold: float) -> bool:
    """``IsResourceDiff``: presence changed, or ``|new - old| > old * threshold`` (milli-units as upstream)."""
    if (old is None) != (new is None):
        return True
    if old is None or new is None:
        return False
    return abs(new * 1000 - old * 1000) > old * 1000 * threshold
