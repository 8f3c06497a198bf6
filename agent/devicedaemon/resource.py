"""What a device manager answers (upstream ``pkg/device-daemon/resource/types.go`` and the prints shape,
``pkg/koordlet/util/device.go`` ``XPUDeviceInfo``).

A :class:`Manager` knows one kind of hardware: it lists the node's devices as upstream's prints
(:class:`XPUDeviceInfo`: vendor, model, uuid, minor, resources, topology, status) and says which node labels
they make. Managers never write anything; :mod:`agent.devicedaemon.writer` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class DeviceTopology:
    """Where a device sits (upstream ``DeviceTopology``); every field a string, "" unknown.

    Attributes:
        socket_id: CPU socket. node_id: NUMA node. pcie_id: PCIe root (``pci0000:3a``). bus_id: PCI address.
    """

    socket_id: str = ""
    node_id: str = ""
    pcie_id: str = ""
    bus_id: str = ""

    def to_json(self) -> dict[str, str]:
        """The JSON object upstream writes (``socketID``, ``nodeID``, ``pcieID``, ``busID``; empty ones left out)."""
        raw = {"socketID": self.socket_id, "nodeID": self.node_id, "pcieID": self.pcie_id, "busID": self.bus_id}
        return {k: v for k, v in raw.items() if v}


@dataclass(frozen=True, slots=True)
class XPUDeviceInfo:
    """One device as upstream's prints carry it (``XPUDeviceInfo``).

    Attributes:
        vendor: ``nvidia``, ``huawei``, ... (``GPUVendor*``). model: normalised model (``H200``).
        uuid: the device's identifier (GPU UUID; PCI address for a NIC). minor: ``/dev/xxx<minor>``, a string
            as upstream. resources: resource name -> quantity string (``koordinator.sh/gpu-memory: 143771Mi``).
        topology: where it sits, None unknown. healthy / err_code / err_message: upstream's ``DeviceStatus``.
    """

    vendor: str
    model: str
    uuid: str
    minor: str
    resources: dict[str, str] = field(default_factory=dict)
    topology: DeviceTopology | None = None
    healthy: bool = True
    err_code: str = ""
    err_message: str = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON object upstream writes to its prints file."""
        out: dict[str, Any] = {"vendor": self.vendor, "model": self.model, "uuid": self.uuid, "minor": self.minor}
        if self.resources:
            out["resources"] = dict(self.resources)
        if self.topology is not None and self.topology.to_json():
            out["topology"] = self.topology.to_json()
        status: dict[str, Any] = {"healthy": self.healthy}
        if self.err_code:
            status["errCode"] = self.err_code
        if self.err_message:
            status["errMessage"] = self.err_message
        out["status"] = status
        return out


class Manager(Protocol):
    """One kind of hardware (upstream ``resource.Manager``: ``GetDeviceVendor``, ``GetDevices``,
    ``GetDriverVersion``), plus the node labels its devices make.

    Implementations raise nothing from these methods: a device that cannot be read is left out or reported
    unhealthy, and logged.
    """

    @property
    def vendor(self) -> str:
        """The registry key and prints vendor (``nvidia``; ``rdma`` for NICs of any vendor)."""
        ...

    def devices(self) -> list[XPUDeviceInfo]:
        """Scan the node now; the devices sorted by minor."""
        ...

    def driver_version(self) -> str:
        """The driver's version as the last :meth:`devices` found it, "" unknown."""
        ...

    def labels(self, devices: list[XPUDeviceInfo]) -> dict[str, str]:
        """The node labels ``devices`` (this manager's latest scan) make; empty when there are none."""
        ...
