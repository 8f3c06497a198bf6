"""A node's GPU inventory from its Device object (``apis/scheduling/v1alpha1/device_types.go``).

Upstream ``buildDeviceResources`` (``deviceshare/device_cache.go``): each device of type ``gpu`` gives
its ``resources`` as the total of its minor; an unhealthy device has an empty total, so it is never
allocated. Only GPUs are modelled here (RDMA and FPGA entries are ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.api.quantity import QuantityError, parse_resource_list
from app.plugins.deviceshare import names as n


class DeviceError(ValueError):
    """A Device object is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class GPUDevice:
    """One GPU of a node.

    Attributes:
        minor: the device minor number (``/dev/nvidia<minor>``).
        uuid: the device id (``spec.devices[].id``), written into the allocation annotation.
        healthy: ``spec.devices[].health``.
        core: total gpu-core percent (100 for one card; 0 when unhealthy).
        ratio: total gpu-memory-ratio percent (100; 0 when unhealthy).
        memory: total gpu-memory bytes (0 when unhealthy).
    """

    minor: int
    uuid: str
    healthy: bool
    core: int
    ratio: int
    memory: int

    def totals(self) -> dict[str, int]:
        """The total as a resource map (empty for an unhealthy device, as upstream)."""
        if not self.healthy:
            return {}
        out = {
            n.RESOURCE_GPU_CORE: self.core,
            n.RESOURCE_GPU_MEMORY_RATIO: self.ratio,
            n.RESOURCE_GPU_MEMORY: self.memory,
        }
        return {k: v for k, v in out.items() if v}


def parse_device(obj: dict[str, Any]) -> list[GPUDevice]:
    """The GPUs of a Device object, sorted by minor.

    Raises:
        DeviceError: ``spec.devices`` is not a list, a GPU has no integer ``minor``, a minor repeats,
            or a quantity in ``resources`` is invalid.
    """
    name = str((obj.get("metadata") or {}).get("name", ""))
    spec = obj.get("spec") or {}
    devices = spec.get("devices") if isinstance(spec, dict) else None
    if devices is None:
        return []
    if not isinstance(devices, list):
        raise DeviceError(f"Device {name} spec.devices: expected a list")
    out: dict[int, GPUDevice] = {}
    for i, dev in enumerate(devices):
        path = f"Device {name} spec.devices[{i}]"
        if not isinstance(dev, dict):
            raise DeviceError(f"{path}: expected an object")
        if dev.get("type") != n.GPU:
            continue
        minor = dev.get("minor")
        if isinstance(minor, bool) or not isinstance(minor, int) or minor < 0:
            raise DeviceError(f"{path}.minor: expected a non-negative integer, got {minor!r}")
        if minor in out:
            raise DeviceError(f"{path}.minor: minor {minor} listed twice")
        try:
            res = parse_resource_list(dev.get("resources"), field=f"{path}.resources")
        except QuantityError as exc:
            raise DeviceError(str(exc)) from None
        out[minor] = GPUDevice(
            minor=minor,
            uuid=str(dev.get("id") or ""),
            healthy=bool(dev.get("health", False)),
            core=res.get(n.RESOURCE_GPU_CORE, 0),
            ratio=res.get(n.RESOURCE_GPU_MEMORY_RATIO, 0),
            memory=res.get(n.RESOURCE_GPU_MEMORY, 0),
        )
    return [out[m] for m in sorted(out)]
