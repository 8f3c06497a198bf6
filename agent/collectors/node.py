"""Node usage from /proc, and the node's processors.

Follows upstream ``metricsadvisor/collectors/noderesource`` (cpu ticks of ``/proc/stat``: user + nice +
system + irq + softirq + steal over wall time; memory ``MemTotal - MemAvailable`` of ``/proc/meminfo``,
i.e. without reclaimable page cache) and ``nodeinfo`` (``/sys/devices/system/cpu`` topology).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ProcessorInfo:
    """One logical cpu: its id, physical core, socket and NUMA node."""

    cpu_id: int
    core_id: int
    socket_id: int
    node_id: int


def read_cpu_ticks(proc: Path) -> int:
    """Busy ticks of all cpus: user + nice + system + irq + softirq + steal (``GetCPUStatUsageTicks``).

    Raises:
        OSError: /proc/stat is unreadable. ValueError: it is malformed.
    """
    with open(proc / "stat", "rb") as f:
        fields = f.readline().split()
    if not fields or fields[0] != b"cpu":
        raise ValueError(f"{proc / 'stat'}: no aggregate cpu line")
    v = [int(x) for x in fields[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return user + nice + system + irq + softirq + steal


def read_meminfo(proc: Path) -> dict[str, int]:
    """``/proc/meminfo`` in bytes by key (``MemTotal``, ``MemAvailable``, ...).

    Raises:
        OSError: unreadable.
    """
    out: dict[str, int] = {}
    with open(proc / "meminfo", "rb") as f:
        for line in f:
            key, _, rest = line.partition(b":")
            parts = rest.split()
            if parts:
                out[key.decode()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == b"kB" else 1)
    return out


def memory_used_without_page_cache(meminfo: dict[str, int]) -> int:
    """Node memory usage as upstream reports it (usageWithoutPageCache): ``MemTotal - MemAvailable`` bytes."""
    return max(meminfo.get("MemTotal", 0) - meminfo.get("MemAvailable", 0), 0)


class NodeCollector:
    """Node cpu (cores, from tick deltas) and memory (bytes) at each call.

    Args:
        proc: the proc mount (``/proc``; ``/host/proc`` in a container).
    """

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = Path(proc)
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._last: tuple[float, int] | None = None

    def collect(self, now: float) -> tuple[float | None, int]:
        """``(cpu cores or None on the first call, memory bytes)``.

        Raises:
            OSError / ValueError: /proc is unreadable or malformed.
        """
        ticks = read_cpu_ticks(self.proc)
        memory = memory_used_without_page_cache(read_meminfo(self.proc))
        cores = None
        if self._last is not None and now > self._last[0]:
            cores = max(ticks - self._last[1], 0) / self.hz / (now - self._last[0])
        self._last = (now, ticks)
        return cores, memory

    def memory_total(self) -> int:
        """``MemTotal`` in bytes (the machine's memory capacity)."""
        return read_meminfo(self.proc).get("MemTotal", 0)


_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_LINK = re.compile(r"^node(\d+)$")


def processors(sys_cpu: Path = Path("/sys/devices/system/cpu")) -> list[ProcessorInfo]:
    """Online logical cpus with their topology; falls back to ``os.cpu_count()`` cpus on one core each."""
    found: list[ProcessorInfo] = []
    try:
        entries = sorted(os.scandir(sys_cpu), key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:
        m = _CPU_DIR.match(entry.name)
        if not m:
            continue
        cpu = int(m.group(1))
        topo = Path(entry.path) / "topology"
        try:
            core = int((topo / "core_id").read_text())
            socket = int((topo / "physical_package_id").read_text())
        except (OSError, ValueError):
            continue
        node = 0
        try:
            for sub in os.scandir(entry.path):
                nm = _NODE_LINK.match(sub.name)
                if nm:
                    node = int(nm.group(1))
        except OSError:
            pass
        found.append(ProcessorInfo(cpu, core, socket, node))
    if not found:
        found = [ProcessorInfo(i, i, 0, 0) for i in range(os.cpu_count() or 1)]
    return sorted(found, key=lambda p: p.cpu_id)
