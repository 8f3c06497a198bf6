"""Resource isolation per QoS class: batch resources of BE pods, memory QoS, group identity.

Follows upstream:

- ``runtimehooks/hooks/batchresource/batch_resource.go`` + ``util/system/cgroup.go``: for BE pods
  (``koordinator.sh/qosClass=BE``) ``cpu.shares = clamp(batch-cpu request * 1024 / 1000, 2, 262144)``,
  ``cpu.cfs_quota_us = batch-cpu limit * 100000 / 1000`` (no limit: -1; at least 1000) and
  ``memory.limit_in_bytes = batch-memory limit`` (no limit: -1), on the pod and each container.
  Mid pods (priority class ``koord-mid``, with defaults) get the same three values from their
  ``kubernetes.io/mid-cpu`` / ``mid-memory``: the webhook moved their cpu and memory there, so the kubelet
  put them in the besteffort tree without limits, and only these writes bound them to what they were lent.
- ``qosmanager/plugins/cgreconcile/cgroup_reconcile.go``: with the class's ``memoryQOS.enable``,
  ``memory.min = request * minLimitPercent / 100``, ``memory.low = request * lowLimitPercent / 100``
  (raised to min), ``memory.high = floor((request + (limit or node allocatable - request) *
  throttlingPercent / 100) / page) * page`` (throttling 0: unlimited); written where the kernel offers the files.
- ``cgreconcile/cgroup_reconcile.go`` (the rest of memory QoS, Anolis kernels): per pod and container
  ``memory.wmark_ratio`` = ``wmarkRatio``, ``memory.wmark_scale_factor`` = ``wmarkScalePermill``,
  ``memory.wmark_min_adj`` = ``wmarkMinAdj``, ``memory.priority`` = ``priority``, ``memory.use_priority_oom`` =
  ``priorityEnable``, ``memory.oom.group`` = ``oomKillGroup``; on the QoS dirs (kubepods <- lsrClass, burstable
  <- lsClass, besteffort <- beClass) the last three. A class whose ``memoryQOS`` is disabled gets upstream's
  ``NoneMemoryQOS`` (0, 50, 0, 0, 0, 0), so turning it off resets the files. Each file is written only when the
  kubepods dir has it (checked once).
- ``runtimehooks/hooks/groupidentity/rule.go``: ``cpu.bvt_warp_ns`` per pod from its class
  (LSE/LSR -> lsrClass, LS -> lsClass, BE -> beClass; disabled class -> 0) and on the QoS dirs
  (besteffort = BE, burstable = LS, kubepods = 0), only when the kernel has the file.
"""

from __future__ import annotations

import logging
import mmap

from agent.cgroups import CFS_PERIOD_US, MAX_CPU_SHARES, MIN_CPU_SHARES, CgroupPathError
from agent.executor import CgroupWrite
from agent.qos.context import QoSContext
from agent.states.nodeslo import class_qos
from agent.states.pods import ContainerMeta, PodMeta
from app.api.koordext import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY, PriorityClass, QoSClass

log = logging.getLogger("agent.qos.isolation")

PAGE_SIZE = mmap.PAGESIZE
MIN_CFS_QUOTA = 1000


def batch_cpu_shares(request_milli: int) -> int:
    """``clamp(request * 1024 / 1000, 2, 262144)``; 0 request -> 2 (``MilliCPUToShares``)."""
    if request_milli <= 0:
        return MIN_CPU_SHARES
    return min(max(request_milli * 1024 // 1000, MIN_CPU_SHARES), MAX_CPU_SHARES)


def batch_cfs_quota(limit_milli: int | None) -> int:
    """``limit * 100000 / 1000`` at least 1000; None or <= 0 (no limit) -> -1 (``MilliCPUToQuota``)."""
    if limit_milli is None or limit_milli <= 0:
        return -1
    return max(limit_milli * CFS_PERIOD_US // 1000, MIN_CFS_QUOTA)


def _batch_values(
    requests: dict[str, int], limits: dict[str, int], complete: bool, names: tuple[str, str] = (BATCH_CPU, BATCH_MEMORY)
) -> tuple[int, int, int]:
    shares = batch_cpu_shares(requests.get(names[0], 0))
    quota = batch_cfs_quota(limits.get(names[0]) if complete else None)
    memory = limits.get(names[1], -1) if complete else -1
    return shares, quota, memory if memory > 0 else -1


def tier_resources(pod: PodMeta) -> tuple[tuple[str, str], str] | None:
    """The extended (cpu, memory) names whose values bound ``pod``'s cgroups, and the write reason:
    batch-* for a BE pod, mid-* for a koord-mid pod, None for any other pod."""
    if pod.priority_class == PriorityClass.MID:
        return (MID_CPU, MID_MEMORY), "midresource"
    if pod.qos_raw == QoSClass.BE:
        return (BATCH_CPU, BATCH_MEMORY), "batchresource"
    return None


def batch_writes(ctx: QoSContext, pod: PodMeta) -> list[CgroupWrite]:
    """cpu.shares / cfs quota / memory limit of a BE pod (from its batch resources) or a Mid pod (from its mid
    resources), and of its containers; nothing for other pods."""
    tier = tier_resources(pod)
    if tier is None or pod.cgroup_dir is None:
        return []
    names, reason = tier
    cpu_complete = bool(pod.containers) and all(names[0] in c.limits for c in pod.containers)
    mem_complete = bool(pod.containers) and all(names[1] in c.limits for c in pod.containers)
    shares, quota, _ = _batch_values(pod.requests, pod.limits, cpu_complete, names)
    _, _, memory = _batch_values(pod.requests, pod.limits, mem_complete, names)
    writes = [
        CgroupWrite("cpu.shares", pod.cgroup_dir, str(shares), reason),
        CgroupWrite("cpu.cfs_quota_us", pod.cgroup_dir, str(quota), reason),
        CgroupWrite("memory.limit_in_bytes", pod.cgroup_dir, str(memory), reason),
    ]
    for c in pod.containers:
        writes += _container_batch(ctx, pod, c, names, reason)
    return writes


def _container_batch(
    ctx: QoSContext, pod: PodMeta, c: ContainerMeta, names: tuple[str, str], reason: str
) -> list[CgroupWrite]:
    if not c.container_id or pod.cgroup_dir is None:
        return []
    try:
        cdir = ctx.layout.container_dir(pod.cgroup_dir, c.container_id)
    except CgroupPathError as exc:
        log.warning("pod %s container %s: %s; not touched", pod.key, c.name, exc)
        return []
    shares = batch_cpu_shares(c.requests.get(names[0], 0))
    quota = batch_cfs_quota(c.limits.get(names[0]))
    memory = c.limits.get(names[1], -1)
    return [
        CgroupWrite("cpu.shares", cdir, str(shares), reason),
        CgroupWrite("cpu.cfs_quota_us", cdir, str(quota), reason),
        CgroupWrite("memory.limit_in_bytes", cdir, str(memory if memory > 0 else -1), reason),
    ]


def memory_qos_values(
    request: int, limit: int, min_pct: int, low_pct: int, throttling_pct: int
) -> tuple[int, int, int]:
    """``(memory.min, memory.low, memory.high)`` in bytes; high -1 = unlimited (throttling 0)."""
    mem_min = request * min_pct // 100
    mem_low = max(request * low_pct // 100, mem_min)
    if throttling_pct <= 0:
        return mem_min, mem_low, -1
    high = request + (limit - request) * throttling_pct // 100
    return mem_min, mem_low, high // PAGE_SIZE * PAGE_SIZE


def memory_qos_writes(ctx: QoSContext, pod: PodMeta) -> list[CgroupWrite]:
    """memory.min/low/high of a pod when its class enables memory QoS (BE pods count batch-memory)."""
    if pod.cgroup_dir is None:
        return []
    cfg = class_qos(ctx.slo, pod.qos.value).memory_qos
    if cfg is None or not cfg.enable:
        return []
    res = BATCH_MEMORY if pod.qos == QoSClass.BE else "memory"
    request = pod.requests.get(res, 0)
    limit = pod.limits.get(res) or ctx.allocatable.get("memory") or ctx.capacity_memory
    mem_min, mem_low, mem_high = memory_qos_values(
        request, limit, cfg.min_limit_percent or 0, cfg.low_limit_percent or 0, cfg.throttling_percent or 0
    )
    return [
        CgroupWrite("memory.min", pod.cgroup_dir, str(mem_min), "memoryQOS"),
        CgroupWrite("memory.low", pod.cgroup_dir, str(mem_low), "memoryQOS"),
        CgroupWrite("memory.high", pod.cgroup_dir, str(mem_high), "memoryQOS"),
    ]


#: Anolis memory QoS files and the ``memoryQOS`` field each takes (cgreconcile's ``makeCgroupResources``).
ANOLIS_MEMORY: tuple[tuple[str, str], ...] = (
    ("memory.wmark_ratio", "wmark_ratio"),
    ("memory.wmark_scale_factor", "wmark_scale_permill"),
    ("memory.wmark_min_adj", "wmark_min_adj"),
    ("memory.priority", "priority"),
    ("memory.use_priority_oom", "priority_enable"),
    ("memory.oom.group", "oom_kill_group"),
)
#: Upstream's ``NoneMemoryQOS`` values of those fields (a disabled class).
NONE_MEMORY_QOS = {
    "wmark_ratio": 0,
    "wmark_scale_permill": 50,
    "wmark_min_adj": 0,
    "priority": 0,
    "priority_enable": 0,
    "oom_kill_group": 0,
}
#: The QoS-dir files (cgreconcile's ``calculateQoSResources``).
QOS_DIR_MEMORY = ("memory.priority", "memory.use_priority_oom", "memory.oom.group")


def anolis_memory_values(ctx: QoSContext, qos: str) -> dict[str, int]:
    """resource -> value of the Anolis memory QoS files for a koord QoS class (its ``memoryQOS`` when enabled,
    else ``NoneMemoryQOS``)."""
    cfg = class_qos(ctx.slo, qos).memory_qos
    enabled = cfg is not None and bool(cfg.enable)
    out: dict[str, int] = {}
    for resource, attr in ANOLIS_MEMORY:
        value = getattr(cfg, attr, None) if enabled else None
        out[resource] = value if value is not None else NONE_MEMORY_QOS[attr]
    return out


def anolis_memory_writes(ctx: QoSContext, pod: PodMeta, supported: frozenset[str]) -> list[CgroupWrite]:
    """The Anolis memory QoS writes of a pod dir and its container dirs, for the files in ``supported``."""
    if pod.cgroup_dir is None or not supported:
        return []
    values = anolis_memory_values(ctx, pod.qos.value if pod.qos != QoSClass.LSE else "LSR")
    dirs = [pod.cgroup_dir]
    for c in pod.containers:
        if c.container_id:
            try:
                dirs.append(ctx.layout.container_dir(pod.cgroup_dir, c.container_id))
            except CgroupPathError:
                continue
    return [
        CgroupWrite(resource, d, str(value), "memoryQOS")
        for d in dirs
        for resource, value in values.items()
        if resource in supported
    ]


def group_identity_value(ctx: QoSContext, qos: str) -> int:
    """bvt value of a koord QoS class: its ``cpuQOS.groupIdentity`` when enabled, else 0."""
    cfg = class_qos(ctx.slo, qos).cpu_qos
    if cfg is None or not cfg.enable:
        return 0
    return cfg.group_identity or 0


class Isolation:
    """Plans isolation writes each round; group identity only where ``cpu.bvt_warp_ns`` exists."""

    def __init__(self) -> None:
        self._bvt: bool | None = None
        self._anolis: frozenset[str] | None = None
        self._key: object = None
        self._writes: list[CgroupWrite] = []

    def group_identity_supported(self, ctx: QoSContext) -> bool:
        """Whether the kubepods dir offers ``cpu.bvt_warp_ns`` (checked once, logged when absent)."""
        if self._bvt is None:
            path = ctx.layout.file_path("cpu.bvt_warp_ns", ctx.layout.kubepods)
            self._bvt = path is not None and path.exists()
            if not self._bvt:
                log.info("group identity skipped: the kernel has no cpu.bvt_warp_ns")
        return self._bvt

    def anolis_memory_supported(self, ctx: QoSContext) -> frozenset[str]:
        """The Anolis memory QoS files the kubepods dir offers (checked once, logged when none)."""
        if self._anolis is None:
            found = set()
            for resource, _ in ANOLIS_MEMORY:
                path = ctx.layout.file_path(resource, ctx.layout.kubepods)
                if path is not None and path.exists():
                    found.add(resource)
            self._anolis = frozenset(found)
            if not found:
                log.info("memory watermark / priority / oom group skipped: the kernel has no memory.wmark_ratio etc.")
        return self._anolis

    def plan(self, ctx: QoSContext) -> list[CgroupWrite]:
        """All isolation writes for the active pods (the executor drops unchanged ones)."""
        writes: list[CgroupWrite] = []
        anolis = self.anolis_memory_supported(ctx)
        if anolis:
            layout = ctx.layout
            for kube_qos, qos in (("Guaranteed", "LSR"), ("Burstable", "LS"), ("BestEffort", "BE")):
                values = anolis_memory_values(ctx, qos)
                writes += [
                    CgroupWrite(r, layout.qos_dir(kube_qos), str(values[r]), "memoryQOS")
                    for r in QOS_DIR_MEMORY
                    if r in anolis
                ]
        gi = self.group_identity_supported(ctx)
        if gi:
            layout = ctx.layout
            writes += [
                CgroupWrite("cpu.bvt_warp_ns", layout.kubepods, "0", "groupIdentity"),
                CgroupWrite(
                    "cpu.bvt_warp_ns",
                    layout.qos_dir("Burstable"),
                    str(group_identity_value(ctx, "LS")),
                    "groupIdentity",
                ),
                CgroupWrite(
                    "cpu.bvt_warp_ns",
                    layout.qos_dir("BestEffort"),
                    str(group_identity_value(ctx, "BE")),
                    "groupIdentity",
                ),
            ]
        for pod in ctx.pods:
            if not pod.active or pod.cgroup_dir is None:
                continue
            writes += batch_writes(ctx, pod)
            writes += memory_qos_writes(ctx, pod)
            writes += anolis_memory_writes(ctx, pod, anolis)
            if gi:
                qos = pod.qos.value if pod.qos != QoSClass.LSE else "LSR"
                writes.append(
                    CgroupWrite("cpu.bvt_warp_ns", pod.cgroup_dir, str(group_identity_value(ctx, qos)), "groupIdentity")
                )
        return writes

    def plan_cached(self, ctx: QoSContext, key: object) -> tuple[list[CgroupWrite], bool]:
        """``(writes, rebuilt)``: the plan of :meth:`plan`, rebuilt only when ``key`` (what the plan depends on:
        the states generation, node memory) differs from the last call's; otherwise the previous list."""
        if key != self._key:
            self._writes = self.plan(ctx)
            self._key = key
            return self._writes, True
        return self._writes, False
