"""A node's GPU inventory from its Device object (``apis/scheduling/v1alpha1/device_types.go``).

Upstream ``buildDeviceResources`` (``deviceshare/device_cache.go``): each device of type ``gpu`` gives
its ``resources`` as the total of its minor; an unhealthy device has an empty total, so it is never
allocated. :func:`parse_device` gives the GPUs (the vectorised GPU table reads them);
:func:`parse_device_infos` gives every device of every type (``gpu``, ``rdma``, ``fpga``) with its
labels, topology and VF groups, for the RDMA/FPGA allocator, hint selectors and joint allocation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


#: Device types the scheduler allocates (``schedulingv1alpha1.GPU``, ``RDMA``, ``FPGA``).
DEVICE_TYPES: tuple[str, ...] = (n.GPU, n.RDMA, n.FPGA)


@dataclass(frozen=True, slots=True)
class Topology:
    """Where a device sits (``DeviceTopology``): socket, NUMA node (-1 = unknown), PCIe root and bus id."""

    socket_id: int = -1
    node_id: int = -1
    pcie_id: str = ""
    bus_id: str = ""


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    """One SR-IOV virtual function of a device (``VirtualFunction``): its ``minor`` and PCI ``bus_id``."""

    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class VFGroup:
    """VFs sharing ``labels`` (``VirtualFunctionGroup``); a hint's ``vfSelector`` matches the labels."""

    labels: dict[str, str]
    vfs: tuple[VirtualFunction, ...]


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One device of any type in a Device object (``DeviceInfo``).

    Attributes:
        type: ``gpu``, ``rdma`` or ``fpga``.
        minor: the device minor (0 when absent, as upstream's ``ptr.Deref``).
        id: ``spec.devices[].id`` (GPU UUID, PCI bus id for RDMA), written as the allocation's ``id``.
        healthy: ``health``; an unhealthy device has an empty total and is never allocated.
        resources: its total (``koordinator.sh/rdma: 100`` ...), empty when unhealthy.
        labels: device labels (matched by a hint's ``selector``).
        topology: its topology, or None when not reported.
        vf_groups: SR-IOV VF groups (RDMA), empty when SR-IOV is off.
    """

    type: str
    minor: int
    id: str
    healthy: bool
    resources: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    topology: Topology | None = None
    vf_groups: tuple[VFGroup, ...] = ()

    def total(self) -> dict[str, int]:
        """The total as upstream's ``buildDeviceResources`` keeps it: empty when unhealthy."""
        return dict(self.resources) if self.healthy else {}


def _int_field(value: Any, path: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeviceError(f"{path}: expected an integer, got {value!r}")
    return value


def _str_map(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DeviceError(f"{path}: expected a map of strings")
    return {str(k): str(v) for k, v in value.items()}


def _topology(raw: Any, path: str) -> Topology | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DeviceError(f"{path}: expected an object")
    return Topology(
        socket_id=_int_field(raw.get("socketID"), f"{path}.socketID", -1),
        node_id=_int_field(raw.get("nodeID"), f"{path}.nodeID", -1),
        pcie_id=str(raw.get("pcieID") or ""),
        bus_id=str(raw.get("busID") or ""),
    )


def _vf_groups(raw: Any, path: str) -> tuple[VFGroup, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise DeviceError(f"{path}: expected a list")
    groups = []
    for i, group in enumerate(raw):
        gpath = f"{path}[{i}]"
        if not isinstance(group, dict):
            raise DeviceError(f"{gpath}: expected an object")
        vfs_raw = group.get("vfs") or []
        if not isinstance(vfs_raw, list):
            raise DeviceError(f"{gpath}.vfs: expected a list")
        vfs = []
        for j, vf in enumerate(vfs_raw):
            if not isinstance(vf, dict):
                raise DeviceError(f"{gpath}.vfs[{j}]: expected an object")
            vfs.append(
                VirtualFunction(_int_field(vf.get("minor"), f"{gpath}.vfs[{j}].minor", 0), str(vf.get("busID") or ""))
            )
        groups.append(VFGroup(_str_map(group.get("labels"), f"{gpath}.labels"), tuple(vfs)))
    return tuple(groups)


def parse_device_infos(obj: dict[str, Any]) -> dict[str, dict[int, DeviceInfo]]:
    """Every device of a Device object: type -> minor -> :class:`DeviceInfo` (types other than gpu,
    rdma and fpga are ignored, as upstream has no handler for them).

    Raises:
        DeviceError: ``spec.devices`` is not a list, an entry is not an object, a field has the wrong
            type, a minor repeats within a type, or a quantity in ``resources`` is invalid.
    """
    name = str((obj.get("metadata") or {}).get("name", ""))
    spec = obj.get("spec") or {}
    devices = spec.get("devices") if isinstance(spec, dict) else None
    out: dict[str, dict[int, DeviceInfo]] = {}
    if devices is None:
        return out
    if not isinstance(devices, list):
        raise DeviceError(f"Device {name} spec.devices: expected a list")
    for i, dev in enumerate(devices):
        path = f"Device {name} spec.devices[{i}]"
        if not isinstance(dev, dict):
            raise DeviceError(f"{path}: expected an object")
        kind = dev.get("type")
        if kind not in DEVICE_TYPES:
            continue
        minor = _int_field(dev.get("minor"), f"{path}.minor", 0)
        of_type = out.setdefault(str(kind), {})
        if minor in of_type:
            raise DeviceError(f"{path}.minor: {kind} minor {minor} listed twice")
        try:
            res = parse_resource_list(dev.get("resources"), field=f"{path}.resources")
        except QuantityError as exc:
            raise DeviceError(str(exc)) from None
        of_type[minor] = DeviceInfo(
            type=str(kind),
            minor=minor,
            id=str(dev.get("id") or ""),
            healthy=bool(dev.get("health", False)),
            resources=res,
            labels=_str_map(dev.get("labels"), f"{path}.labels"),
            topology=_topology(dev.get("topology"), f"{path}.topology"),
            vf_groups=_vf_groups(dev.get("vfGroups"), f"{path}.vfGroups"),
        )
    return out
