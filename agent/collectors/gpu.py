"""NVIDIA GPUs: discovery, health and usage (upstream ``metricsadvisor/devices/gpu`` and the GPU health
check of ``statesinformer/impl/states_device_linux.go``).

:class:`GPUCollector` asks :class:`~agent.collectors.nvml.NVML` for each GPU's UUID, minor, model, memory
total and PCI bus id; the NUMA node comes from NVML, else from sysfs (``-1``: unknown), the PCIe root
from sysfs (:mod:`agent.collectors.pci`).

Health: a GPU whose NVML queries fail is unhealthy (reason ``NVMLError``) and keeps the facts it last
answered with; a critical Xid event (application Xids 13, 31, 43, 45, 68, 109 excepted, as upstream)
makes it unhealthy (reason ``Xid<code>``) for ``xid_recovery_seconds`` after the last one. Once it
answers every query again and that time has passed it is healthy again (upstream never recovers; this
collector does, when the GPU answers).

Usage, as upstream: per GPU the sum over its compute processes of SM utilisation (percent) and used
memory (bytes); per pod the same over the processes whose ``/proc/<pid>/cgroup`` names the pod's uid.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent.collectors.nvml import APPLICATION_XIDS, NVML, NVMLError
from agent.collectors.pci import DEFAULT_SYS, UNKNOWN_NUMA, numa_node, pcie_root, sysfs_bus_id

log = logging.getLogger("agent.gpu")

#: How long a critical Xid keeps a GPU unhealthy after the last one (seconds).
DEFAULT_XID_RECOVERY_SECONDS = 300.0

_POD_UID = re.compile(r"pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})")


@dataclass(frozen=True, slots=True)
class GPUInfo:
    """One GPU as the agent reports it.

    Attributes:
        index: NVML index. uuid: ``GPU-...``. minor: ``/dev/nvidia<minor>``. model: NVML name (``NVIDIA H200``).
        memory_total: bytes. bus_id: sysfs form (``0000:00:06.0``), "" when NVML gave none.
        numa_node: NUMA node, ``-1`` unknown. pcie_root: ``pci0000:00``, "" unknown.
        healthy: False while queries fail or after a critical Xid; reason / message say why (``Xid79``,
            ``NVMLError``), empty while healthy.
    """

    index: int
    uuid: str
    minor: int
    model: str
    memory_total: int
    bus_id: str
    numa_node: int
    pcie_root: str
    healthy: bool = True
    reason: str = ""
    message: str = ""


@dataclass(slots=True)
class GPUUsage:
    """One usage sample: per minor ``(sm percent, memory bytes)`` for the node, per pod uid per minor."""

    node: dict[int, tuple[int, int]] = field(default_factory=dict)
    pods: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)


class GPUCollector:
    """Discovers GPUs and samples their usage through ``nvml``.

    Args:
        nvml: the NVML layer.
        sys_root: sysfs mount (``/sys``; ``/host/sys`` in a container).
        proc_root: proc mount, to map GPU processes to pods.
        clock: monotonic seconds (injectable for tests).
        xid_recovery_seconds: see the module docstring.
    """

    def __init__(
        self,
        nvml: NVML,
        *,
        sys_root: Path = DEFAULT_SYS,
        proc_root: Path = Path("/proc"),
        clock: Callable[[], float] = time.monotonic,
        xid_recovery_seconds: float = DEFAULT_XID_RECOVERY_SECONDS,
    ) -> None:
        self.nvml = nvml
        self.sys_root = Path(sys_root)
        self.proc_root = Path(proc_root)
        self.clock = clock
        self.xid_recovery_seconds = xid_recovery_seconds
        self.driver_version = ""
        self.gpus: list[GPUInfo] = []
        self._known: dict[int, GPUInfo] = {}
        self._xid: dict[str, tuple[float, int]] = {}

    # -- discovery ---------------------------------------------------------------------------------
    def _query(self, index: int) -> GPUInfo:
        uuid = self.nvml.uuid(index)
        minor = self.nvml.minor(index)
        model = self.nvml.name(index)
        total, _used = self.nvml.memory(index)
        raw_bus = self.nvml.pci_bus_id(index)
        try:
            bus = sysfs_bus_id(raw_bus)
        except ValueError:
            bus = ""
        try:
            numa = self.nvml.numa_node(index)
        except NVMLError as exc:
            if not exc.not_supported:
                raise
            numa = numa_node(self.sys_root, bus) if bus else UNKNOWN_NUMA
        if numa < 0:
            numa = UNKNOWN_NUMA
        root = pcie_root(self.sys_root, bus) if bus else ""
        return GPUInfo(index, uuid, minor, model, total, bus, numa, root)

    def _take_xids(self) -> None:
        try:
            events = self.nvml.xid_events()
        except NVMLError as exc:
            log.debug("Xid events not read: %s", exc)
            return
        now = self.clock()
        for uuid, xid in events:
            if xid in APPLICATION_XIDS:
                continue
            targets = [uuid] if uuid else [g.uuid for g in self._known.values()]
            for target in targets:
                if target not in self._xid:
                    log.warning("GPU %s reported critical Xid %d: unhealthy", target, xid)
                self._xid[target] = (now, xid)

    def discover(self) -> list[GPUInfo]:
        """Query every GPU and judge its health; returns (and keeps in :attr:`gpus`) the GPUs sorted by minor.

        A GPU that never answered cannot be reported (its UUID is unknown); one that answered before and
        fails now is reported unhealthy with its last facts. Raises nothing.
        """
        self._take_xids()
        try:
            self.driver_version = self.nvml.driver_version()
        except NVMLError as exc:
            log.debug("driver version not read: %s", exc)
        try:
            count = self.nvml.device_count()
        except NVMLError as exc:
            log.warning("NVML device count failed: %s; every known GPU is unhealthy", exc)
            count, failed_all = len(self._known), str(exc)
        else:
            failed_all = ""
        now = self.clock()
        previous = {g.index: g for g in self.gpus}
        seen: dict[int, GPUInfo] = {}
        for index in range(count):
            last = self._known.get(index)
            if failed_all:
                if last is not None:
                    seen[index] = replace(last, healthy=False, reason="NVMLError", message=failed_all)
                continue
            try:
                info = self._query(index)
            except NVMLError as exc:
                if last is None:
                    log.warning("GPU at NVML index %d does not answer (%s), never seen: not reported", index, exc)
                    continue
                if index not in previous or previous[index].healthy:
                    log.warning("GPU %s (minor %d) does not answer: %s; unhealthy", last.uuid, last.minor, exc)
                seen[index] = replace(last, healthy=False, reason="NVMLError", message=str(exc))
                continue
            self._known[index] = info
            xid = self._xid.get(info.uuid)
            if xid is not None and now - xid[0] < self.xid_recovery_seconds:
                info = replace(
                    info,
                    healthy=False,
                    reason=f"Xid{xid[1]}",
                    message=f"Xid error detected on device, error code: {xid[1]}",
                )
            elif index in previous and not previous[index].healthy:
                self._xid.pop(info.uuid, None)
                log.info("GPU %s (minor %d) answers again: healthy", info.uuid, info.minor)
            seen[index] = info
        self.gpus = sorted(seen.values(), key=lambda g: g.minor)
        return self.gpus

    # -- usage -------------------------------------------------------------------------------------
    def _pod_of(self, pid: int, cache: dict[int, str | None]) -> str | None:
        if pid in cache:
            return cache[pid]
        uid: str | None = None
        try:
            text = (self.proc_root / str(pid) / "cgroup").read_text()
        except OSError:
            text = ""
        m = _POD_UID.search(text)
        if m is not None:
            uid = m.group(1).replace("_", "-").lower()
        cache[pid] = uid
        return uid

    def usage(self) -> GPUUsage:
        """Sample every known healthy GPU's processes: per-minor sums for the node and per pod. A GPU whose
        process query fails is left out of this sample. Raises nothing."""
        out = GPUUsage()
        pods: dict[int, str | None] = {}
        for gpu in self.gpus:
            if not gpu.healthy:
                continue
            try:
                procs = self.nvml.processes(gpu.index)
            except NVMLError as exc:
                log.debug("GPU %s processes not read: %s", gpu.uuid, exc)
                continue
            sm = sum(p.sm_util for p in procs)
            mem = sum(p.memory_used for p in procs)
            out.node[gpu.minor] = (sm, mem)
            for p in procs:
                uid = self._pod_of(p.pid, pods)
                if uid is None:
                    continue
                per = out.pods.setdefault(uid, {})
                old = per.get(gpu.minor, (0, 0))
                per[gpu.minor] = (old[0] + p.sm_util, old[1] + p.memory_used)
        return out
