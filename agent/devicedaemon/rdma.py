"""RDMA NICs for koord device-daemon, from sysfs through the agent's RDMA collector
(:mod:`agent.collectors.rdma`: one NIC per PCI physical function under ``class/infiniband``).

Prints: vendor ``rdma`` (NICs of every vendor, as sysfs lists them), model the ibdev driver prefix
(``mlx5``), uuid the PCI address, minor, resources ``koordinator.sh/rdma: 100``, topology, health (every
port ACTIVE). Label: ``node.koordinator.sh/rdma-count`` when the node has NICs.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.collectors.rdma import RDMAInfo, discover_rdma
from agent.devicedaemon.resource import DeviceTopology, XPUDeviceInfo
from app.api import devicenames as dn

_PREFIX = re.compile(r"^([A-Za-z]+\d*?)_?\d+$")


def nic_print(nic: RDMAInfo) -> XPUDeviceInfo:
    """One NIC as a print."""
    first = nic.ibdevs[0] if nic.ibdevs else ""
    m = _PREFIX.match(first)
    return XPUDeviceInfo(
        vendor=RDMAManager.vendor,
        model=m.group(1) if m else first,
        uuid=nic.bus_id,
        minor=str(nic.minor),
        resources={dn.RESOURCE_RDMA: "100"},
        topology=DeviceTopology(
            node_id=str(nic.numa_node) if nic.numa_node >= 0 else "", pcie_id=nic.pcie_root, bus_id=nic.bus_id
        ),
        healthy=nic.healthy,
        err_message="" if nic.healthy else "a port is not ACTIVE",
    )


class RDMAManager:
    """The RDMA :class:`~agent.devicedaemon.resource.Manager`.

    Args:
        sys_root: sysfs mount (``/sys``; ``/host/sys`` in a container).
    """

    vendor = dn.DEVICE_RDMA

    def __init__(self, sys_root: Path) -> None:
        self.sys_root = Path(sys_root)

    def devices(self) -> list[XPUDeviceInfo]:
        """See :class:`~agent.devicedaemon.resource.Manager`."""
        return [nic_print(n) for n in discover_rdma(self.sys_root)]

    def driver_version(self) -> str:
        """See :class:`~agent.devicedaemon.resource.Manager` (sysfs does not say: "")."""
        return ""

    def labels(self, devices: list[XPUDeviceInfo]) -> dict[str, str]:
        """See :class:`~agent.devicedaemon.resource.Manager`."""
        return {dn.LABEL_RDMA_COUNT: str(len(devices))} if devices else {}
