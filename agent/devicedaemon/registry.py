"""The registry of device managers (upstream ``cmd/koord-device-daemon/init/init.go`` ``ManagerMap``).

:func:`manager_map` builds the managers this node can run, keyed by vendor (``nvidia``, ``rdma``). Another
vendor (an NPU, MLU, ...) is one more :class:`~agent.devicedaemon.resource.Manager` added here.
"""

from __future__ import annotations

from pathlib import Path

from agent.collectors.gpu import GPUCollector
from agent.collectors.nvml import NVML
from agent.devicedaemon.nvidia import NVIDIAManager
from agent.devicedaemon.rdma import RDMAManager
from agent.devicedaemon.resource import Manager


def manager_map(*, nvml: NVML | None, sys_root: Path, rdma: bool = True) -> dict[str, Manager]:
    """The managers to run, by vendor, in a stable order: NVIDIA when ``nvml`` answers (a driver or a
    capture), RDMA from ``sys_root`` unless ``rdma`` is False."""
    managers: dict[str, Manager] = {}
    if nvml is not None:
        managers[NVIDIAManager.vendor] = NVIDIAManager(GPUCollector(nvml, sys_root=sys_root))
    if rdma:
        managers[RDMAManager.vendor] = RDMAManager(sys_root)
    return managers
