"""Node-wide memory settings from ``NodeSLO.spec.systemStrategy`` (feature gate ``SystemConfig``).

Follows upstream ``pkg/koordlet/qosmanager/plugins/sysreconcile/system_config.go`` (``caculateMemoryConfig``):

- ``/proc/sys/vm/min_free_kbytes`` = node memory capacity (KiB) x ``minFreeKbytesFactor`` / 10000 (default
  factor 100, i.e. 1 % of memory), written only within 10240 .. 10485760 KiB (upstream's validator; the
  executor refuses and logs anything else).
- ``/proc/sys/vm/watermark_scale_factor`` = ``watermarkScaleFactor`` (default 150; 10 .. 400).
- ``/sys/kernel/mm/memcg_reaper/reap_background`` = ``memcgReapBackGround`` (default 0; Anolis kernels only,
  skipped where the file is missing).
"""

from __future__ import annotations

from agent.hostfiles import HostRoots, HostWrite
from app.api.slo import NodeSLOSpec

REASON = "SystemConfig"


def system_writes(spec: NodeSLOSpec, memory_capacity: int, roots: HostRoots) -> list[HostWrite]:
    """The writes of ``systemStrategy`` for a node of ``memory_capacity`` bytes (0 or less: no min_free_kbytes)."""
    strategy = spec.system_strategy
    if strategy is None:
        return []
    writes: list[HostWrite] = []
    if strategy.min_free_kbytes_factor is not None and memory_capacity // 1024 > 0:
        value = memory_capacity // 1024 * strategy.min_free_kbytes_factor // 10000
        writes.append(HostWrite(roots.vm_file("min_free_kbytes"), str(value), REASON))
    if strategy.watermark_scale_factor is not None:
        writes.append(HostWrite(roots.vm_file("watermark_scale_factor"), str(strategy.watermark_scale_factor), REASON))
    if strategy.memcg_reap_back_ground is not None:
        writes.append(HostWrite(roots.reaper_file(), str(strategy.memcg_reap_back_ground), REASON))
    return writes
