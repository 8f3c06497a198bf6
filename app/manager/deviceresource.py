"""Node resources and labels from the node's Device object: koord-manager's device resource plugins of the
node resource controller (``pkg/slo-controller/noderesource/plugins/gpudeviceresource`` and
``rdmadevicereource``).

GPU (``gpudeviceresource``): when the Device has at least one healthy ``gpu`` entry, the node gets the sum
over healthy GPUs of their resources, for the names upstream reconciles (``koordinator.sh/gpu-core``,
``gpu-memory``, ``gpu-memory-ratio``, the Huawei NPU names), plus ``koordinator.sh/gpu`` = the summed
gpu-core when the Device's vendor label is ``nvidia`` or absent; the Device's vendor, model and driver
labels are copied onto the Node (never removed, as upstream). Without a Device, or without a healthy GPU,
every GPU resource name is removed. ``koordinator.sh/gpu.shared`` is left alone (upstream's
``EnableSyncGPUSharedResource`` gate is off by default).

RDMA (``rdmadevicereource``): ``koordinator.sh/rdma`` = 100 x the healthy ``rdma`` entries; removed when
there is none.

Both go into ``status.capacity`` and ``status.allocatable``. Unlike upstream, which waits for a change above
``resourceDiffThreshold`` (10 %), any difference is written: a GPU going unhealthy on a 16-GPU node (6 %)
must not stay allocatable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.api import devicenames as dn
from app.api.quantity import QuantityError, format_resource, parse_resource_list


class DeviceResourceError(ValueError):
    """The Device object is malformed; the message names the field. The node is left as it is."""


@dataclass(slots=True)
class DeviceResources:
    """What the node should carry.

    Attributes:
        resources: resource name -> internal integer (bytes for gpu-memory, percent units otherwise), or
            None to remove the resource.
        labels: node labels to set.
    """

    resources: dict[str, int | None] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def _entries(device: dict[str, Any]) -> list[dict[str, Any]]:
    name = str((device.get("metadata") or {}).get("name", ""))
    spec = device.get("spec") or {}
    devices = spec.get("devices") if isinstance(spec, dict) else None
    if devices is None:
        return []
    if not isinstance(devices, list):
        raise DeviceResourceError(f"Device {name} spec.devices: expected a list")
    for i, dev in enumerate(devices):
        if not isinstance(dev, dict):
            raise DeviceResourceError(f"Device {name} spec.devices[{i}]: expected an object")
    return devices


def device_resources(device: dict[str, Any] | None) -> DeviceResources:
    """The node resources and labels ``device`` gives (None: no Device, every device resource removed).

    Raises:
        DeviceResourceError: ``spec.devices`` is not a list of objects, or a healthy device's ``resources``
            holds an invalid quantity.
    """
    out = DeviceResources()
    entries = _entries(device) if device is not None else []
    name = str(((device or {}).get("metadata") or {}).get("name", ""))
    gpus = [d for d in entries if d.get("type") == dn.DEVICE_GPU and d.get("health") is True]
    rdmas = [d for d in entries if d.get("type") == dn.DEVICE_RDMA and d.get("health") is True]
    if not gpus:
        out.resources.update(dict.fromkeys(dn.GPU_NODE_RESOURCES))
    else:
        total: dict[str, int] = {}
        for dev in gpus:
            try:
                res = parse_resource_list(dev.get("resources"), field=f"Device {name} gpu minor {dev.get('minor')}")
            except QuantityError as exc:
                raise DeviceResourceError(str(exc)) from None
            for key, value in res.items():
                total[key] = total.get(key, 0) + value
        labels = ((device or {}).get("metadata") or {}).get("labels") or {}
        vendor = labels.get(dn.LABEL_GPU_VENDOR, "") if isinstance(labels, dict) else ""
        if vendor in ("", dn.GPU_VENDOR_NVIDIA):
            total[dn.RESOURCE_GPU] = total.get(dn.RESOURCE_GPU_CORE, 0)
        for key in dn.GPU_NODE_RESOURCES:
            if key in total and key != dn.RESOURCE_GPU_SHARED:
                out.resources[key] = total[key]
        if isinstance(labels, dict):
            out.labels = {k: str(labels[k]) for k in dn.GPU_NODE_LABELS if k in labels}
    out.resources[dn.RESOURCE_RDMA] = 100 * len(rdmas) if rdmas else None
    return out


def node_patches(
    desired: DeviceResources,
    allocatable: dict[str, int],
    capacity: dict[str, int],
    labels: dict[str, str],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(status patch, metadata patch)`` bringing a node with ``allocatable`` / ``capacity`` (internal
    integers) and ``labels`` to ``desired``; None where nothing differs. A resource to remove that the node
    does not have is not mentioned."""
    values: dict[str, str | None] = {}
    for key, value in sorted(desired.resources.items()):
        if value is None:
            if key in allocatable or key in capacity:
                values[key] = None
        elif allocatable.get(key) != value or capacity.get(key) != value:
            values[key] = format_resource(key, value)
    status = {"status": {"allocatable": values, "capacity": values}} if values else None
    changed = {k: v for k, v in desired.labels.items() if labels.get(k) != v}
    meta = {"metadata": {"labels": changed}} if changed else None
    return status, meta
