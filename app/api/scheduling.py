"""Koordinator's DeviceInfo (``scheduling.koordinator.sh/v1alpha1``, ``apis/scheduling/v1alpha1/device_types.go``).

Only the per-device record is modelled: NodeMetric reports embed it (``ResourceMap.devices``, see
:mod:`app.api.slo`). Device objects themselves are read by the DeviceShare plugin from their JSON
(:mod:`app.plugins.deviceshare.devices`). Enumerated fields are plain strings so unknown values
survive; the accepted values are listed in each docstring.
"""

from __future__ import annotations

from pydantic import Field

from app.api.meta import Condition, KubeModel, ResourceList


class DeviceTopology(KubeModel):
    """Where a device sits: CPU socket, NUMA node, PCIe root and bus id (``device_types.go``).

    ``socketID``, ``nodeID`` and ``pcieID`` are required, as in upstream's schema.
    """

    socket_id: int = Field(alias="socketID")
    node_id: int = Field(alias="nodeID")
    pcie_id: str = Field(alias="pcieID")
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunction(KubeModel):
    """One SR-IOV virtual function: device ``minor`` (required) and PCI ``busID``."""

    minor: int
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunctionGroup(KubeModel):
    """A labelled group of virtual functions of one physical device."""

    labels: dict[str, str] | None = None
    vfs: list[VirtualFunction] | None = None


class DeviceInfo(KubeModel):
    """One physical device on a node (``device_types.go`` DeviceInfo).

    Attributes:
        type: ``gpu``, ``fpga`` or ``rdma``.
        uuid: the device id (JSON ``id``): GPU UUID or PCI bus id.
        minor / module_id: device minor number and module id.
        health: required; ``false`` means the device must not be allocated.
        resources: quantities the device offers, e.g. ``koordinator.sh/gpu-memory: 16Gi``.
    """

    type: str | None = None
    labels: dict[str, str] | None = None
    uuid: str | None = Field(default=None, alias="id")
    minor: int | None = None
    module_id: int | None = Field(default=None, alias="moduleID")
    health: bool
    resources: ResourceList | None = None
    topology: DeviceTopology | None = None
    vf_groups: list[VirtualFunctionGroup] | None = Field(default=None, alias="vfGroups")
    conditions: list[Condition] | None = None
