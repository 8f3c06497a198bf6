"""NVIDIA GPUs for koord device-daemon, through the agent's NVML layer (:mod:`agent.collectors.nvml`) and
GPU collector (:mod:`agent.collectors.gpu`): the same discovery, sysfs topology and health the agent reports
in the Device object.

Upstream's koord-device-daemon registers only non-NVIDIA managers (``cmd/koord-device-daemon/init``:
Huawei, Cambricon, Baidu, MetaX) because koordlet reads NVIDIA GPUs itself; this rebuild registers NVIDIA as
well so the node is labelled without koordlet. Prints as upstream's NVIDIA example in
``docs/proposals/koordlet/20250425-heterogeneous-GPU-device-reporting.md``: vendor ``nvidia``, model the
normalised NVML name, uuid, minor, resources ``koordinator.sh/gpu-core: 100``, ``gpu-memory`` (total),
``gpu-memory-ratio: 100``.

Labels: ``node.koordinator.sh/gpu-vendor``, ``gpu-model`` (the first GPU by minor, as koordlet), ``gpu-count``,
``gpu-memory`` (the first GPU's total, a quantity such as ``143771Mi``), ``gpu-driver-version`` and
``gpu-cuda-version`` (``nvmlSystemGetCudaDriverVersion``, ``13.0``) when NVML answers them.
"""

from __future__ import annotations

import logging

from agent.collectors.gpu import GPUCollector, GPUInfo
from agent.collectors.nvml import NVMLError
from agent.devicedaemon.resource import DeviceTopology, XPUDeviceInfo
from app.api import devicenames as dn
from app.api.quantity import format_resource

log = logging.getLogger("agent.devicedaemon")


def gpu_print(gpu: GPUInfo) -> XPUDeviceInfo:
    """One GPU as upstream's prints carry it."""
    topology = None
    if gpu.bus_id:
        topology = DeviceTopology(
            node_id=str(gpu.numa_node) if gpu.numa_node >= 0 else "",
            pcie_id=gpu.pcie_root,
            bus_id=gpu.bus_id,
        )
    return XPUDeviceInfo(
        vendor=dn.GPU_VENDOR_NVIDIA,
        model=dn.gpu_model_label(gpu.model),
        uuid=gpu.uuid,
        minor=str(gpu.minor),
        resources={
            dn.RESOURCE_GPU_CORE: "100",
            dn.RESOURCE_GPU_MEMORY: format_resource(dn.RESOURCE_GPU_MEMORY, gpu.memory_total),
            dn.RESOURCE_GPU_MEMORY_RATIO: "100",
        },
        topology=topology,
        healthy=gpu.healthy,
        err_code=gpu.reason,
        err_message=gpu.message,
    )


class NVIDIAManager:
    """The NVIDIA :class:`~agent.devicedaemon.resource.Manager`.

    Args:
        collector: the agent's GPU collector over an NVML backend (a driver, or ``--nvml-capture``).
    """

    vendor = dn.GPU_VENDOR_NVIDIA

    def __init__(self, collector: GPUCollector) -> None:
        self.collector = collector
        self.cuda_version = ""

    def devices(self) -> list[XPUDeviceInfo]:
        """See :class:`~agent.devicedaemon.resource.Manager`."""
        gpus = self.collector.discover()
        try:
            self.cuda_version = self.collector.nvml.cuda_driver_version()
        except NVMLError as exc:
            log.debug("CUDA driver version not read: %s", exc)
            self.cuda_version = ""
        return [gpu_print(g) for g in gpus]

    def driver_version(self) -> str:
        """See :class:`~agent.devicedaemon.resource.Manager`."""
        return self.collector.driver_version

    def labels(self, devices: list[XPUDeviceInfo]) -> dict[str, str]:
        """See :class:`~agent.devicedaemon.resource.Manager` and the module docstring."""
        if not devices:
            return {}
        first = devices[0]
        out = {
            dn.LABEL_GPU_VENDOR: dn.GPU_VENDOR_NVIDIA,
            dn.LABEL_GPU_MODEL: first.model,
            dn.LABEL_GPU_COUNT: str(len(devices)),
            dn.LABEL_GPU_MEMORY: first.resources[dn.RESOURCE_GPU_MEMORY],
        }
        if self.driver_version():
            out[dn.LABEL_GPU_DRIVER_VERSION] = self.driver_version()
        if self.cuda_version:
            out[dn.LABEL_GPU_CUDA_VERSION] = self.cuda_version
        return out
