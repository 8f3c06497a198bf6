"""Mid allocatable of one node: upstream's MidResource plugin.

Follows ``pkg/slo-controller/noderesource/plugins/midresource/plugin.go`` (``Calculate``, ``isDegradeNeeded``,
``getUnallocated``, ``getNodeUnused``) and ``plugins/util/util.go`` (``CalculateMidResourceByPolicy``,
``GetHostAppHPUsed``). Units: cpu in **milli-cores**, memory in **bytes**, all integers.

- Degrade (reset, the resources are removed): no NodeMetric, no ``status.updateTime``, or
  ``now > updateTime + degradeTimeMinutes``. A fresh NodeMetric without ``prodReclaimableMetric`` is not a
  degrade: the reclaimable counts as 0.
- ``midReclaimMode: static``:
  ``min(capacity * midStatic*ReservedPercent / 100, capacity * mid*ThresholdPercent / 100)``.
- Otherwise, per resource::

      alloc = min(prodReclaimable, int(capacity * mid*ThresholdPercent / 100), nodeUnused), floored at 0
      mid   = alloc + int(unallocated * midUnallocatedPercent / 100)

  ``nodeUnused = capacity - nodeUsage`` (0 when the NodeMetric has no complete node usage, "radically believing
  there is nothing left"); ``unallocated = max(capacity - nodeReserved - prod requests, 0)`` where prod requests
  are of the Running/Pending pods not of class koord-mid/batch/free, and ``nodeReserved = max(kubelet reserved,
  annotation reservation, systemUsage + usage of host applications of a priority above koord-mid)``.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.api.koordext import PriorityClass
from app.manager.batch import (
    DEFAULT_PRIORITY,
    RES,
    MetricInput,
    NodeInput,
    PodInput,
    ReclaimResult,
    Vec,
    is_degraded,
)
from app.manager.colocation import ColocationStrategy

DEGRADE_MESSAGE = "degrade node Mid resource because of abnormal nodeMetric, reason: degradedByMidResource"
#: ``configuration.MidReclaimModeStatic``.
MID_RECLAIM_MODE_STATIC = "static"
_LOW = (PriorityClass.MID, PriorityClass.BATCH, PriorityClass.FREE)


def _giga(v: int) -> int:
    """``ScaledValue(resource.Giga)``: rounded up to whole 10^9."""
    return -(-v // 10**9)


def prod_allocated(pods: Iterable[PodInput]) -> Vec:
    """Requests of the Running/Pending pods that are not koord-mid/batch/free (``getUnallocated``)."""
    out = {"cpu": 0, "memory": 0}
    for pod in pods:
        if pod.priority_class in _LOW or pod.phase not in ("Running", "Pending"):
            continue
        for r in RES:
            out[r] += pod.requests.get(r, 0)
    return out


def calculate_mid(
    strategy: ColocationStrategy, node: NodeInput, pods: Iterable[PodInput], metric: MetricInput | None, now: float
) -> ReclaimResult:
    """Mid allocatable of the node (see the module docstring); ``now`` is epoch seconds."""
    if metric is None or is_degraded(strategy, metric, now):
        return ReclaimResult(reset=True, cpu_message=DEGRADE_MESSAGE, memory_message=DEGRADE_MESSAGE)
    cap = {r: node.capacity.get(r, 0) for r in RES}
    cpu_ratio, mem_ratio = strategy.mid_cpu_percent / 100.0, strategy.mid_memory_percent / 100.0
    if strategy.mid_reclaim_mode == MID_RECLAIM_MODE_STATIC:
        cpu = min(int(cap["cpu"] * strategy.mid_static_cpu_percent / 100.0), int(cap["cpu"] * cpu_ratio))
        memory = min(int(cap["memory"] * strategy.mid_static_memory_percent / 100.0), int(cap["memory"] * mem_ratio))
        return ReclaimResult(
            False,
            cpu,
            memory,
            f"midAllocatable[CPU(milli-core)]:{cpu} = min(nodeCapacity:{cap['cpu']} * staticRatio:"
            f"{strategy.mid_static_cpu_percent / 100.0}, nodeCapacity:{cap['cpu']} * thresholdRatio:{cpu_ratio})",
            f"midAllocatable[Memory(GB)]:{_giga(memory)} = min(nodeCapacity:{_giga(cap['memory'])} * staticRatio:"
            f"{strategy.mid_static_memory_percent / 100.0}, nodeCapacity:{_giga(cap['memory'])} * thresholdRatio:"
            f"{mem_ratio})",
        )
    reclaimable = metric.prod_reclaimable or {}
    host_hp = {"cpu": 0, "memory": 0}
    for priority, usage in metric.host_apps:
        if DEFAULT_PRIORITY.get(priority, 0) > DEFAULT_PRIORITY["koord-mid"]:
            for r in RES:
                host_hp[r] += usage.get(r, 0)
    system_used = {r: metric.system_usage.get(r, 0) + host_hp[r] for r in RES}
    kubelet_reserved = {r: max(cap[r] - node.allocatable.get(r, 0), 0) for r in RES}
    reserved = {r: max(kubelet_reserved[r], node.reserved.get(r, 0), system_used[r]) for r in RES}
    allocated = prod_allocated(pods)
    unallocated = {r: max(cap[r] - reserved[r] - allocated[r], 0) for r in RES}
    node_usage = metric.node_usage
    unused = {r: cap[r] - node_usage[r] for r in RES} if node_usage is not None else {"cpu": 0, "memory": 0}
    unalloc_ratio = strategy.mid_unallocated_percent / 100.0
    out: dict[str, int] = {}
    for r, ratio in (("cpu", cpu_ratio), ("memory", mem_ratio)):
        alloc = reclaimable.get(r, 0)
        alloc = min(alloc, int(cap[r] * ratio), unused[r])
        out[r] = max(alloc, 0) + int(unallocated[r] * unalloc_ratio)
    cpu_message = (
        f"midAllocatable[CPU(milli-core)]:{out['cpu']} = min(nodeCapacity:{cap['cpu']} * thresholdRatio:{cpu_ratio}, "
        f"ProdReclaimable:{reclaimable.get('cpu', 0)}, NodeUnused:{unused['cpu']}) + Unallocated:"
        f"{unallocated['cpu']} * midUnallocatedRatio:{unalloc_ratio}"
    )
    memory_message = (
        f"midAllocatable[Memory(GB)]:{_giga(out['memory'])} = min(nodeCapacity:{_giga(cap['memory'])} * "
        f"thresholdRatio:{mem_ratio}, ProdReclaimable:{_giga(reclaimable.get('memory', 0))}, NodeUnused:"
        f"{_giga(unused['memory'])}) + Unallocated:{_giga(unallocated['memory'])} * midUnallocatedRatio:{unalloc_ratio}"
    )
    return ReclaimResult(False, out["cpu"], out["memory"], cpu_message, memory_message)
