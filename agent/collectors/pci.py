"""PCI facts of a device from sysfs: canonical bus id, NUMA node and PCIe root complex.

Follows upstream ``pkg/koordlet/metricsadvisor/devices/helper/topology.go`` (``ParsePCIInfo``): the
PCIe root is the first ``pciDDDD:BB`` component of the device's resolved sysfs path
(``/sys/devices/pci0000:3a/0000:3a:00.0/...`` -> ``pci0000:3a``); the NUMA node is
``/sys/bus/pci/devices/<bus id>/numa_node``. Unlike upstream, which reads ``-1`` as node 0, ``-1`` stays
``-1`` (unknown): a machine whose firmware does not say has no NUMA placement to report.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: ``/sys`` (a container mounts the host's elsewhere, e.g. ``/host/sys``).
DEFAULT_SYS = Path("/sys")

_PCIE_ROOT = re.compile(r"pci[0-9a-fA-F]{4}:[0-9a-fA-F]{2}")
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")

#: NUMA node of a device whose firmware reports none (sysfs ``-1``) or that could not be read.
UNKNOWN_NUMA = -1


def sysfs_bus_id(bus_id: str) -> str:
    """A PCI address in sysfs form, lower case with a 4-digit domain: NVML's ``00000000:00:06.0`` ->
    ``0000:00:06.0``; ``3b:00.0`` -> ``0000:3b:00.0``.

    Raises:
        ValueError: not a PCI address.
    """
    m = _BUS_ID.match(bus_id.strip())
    if m is None:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    domain, bus, dev, fn = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def pci_device_dir(sys_root: Path, bus_id: str) -> Path:
    """``<sys>/bus/pci/devices/<bus id>``."""
    return sys_root / "bus" / "pci" / "devices" / bus_id


def numa_node(sys_root: Path, bus_id: str) -> int:
    """The device's NUMA node from ``numa_node``; :data:`UNKNOWN_NUMA` when the file is missing, unreadable,
    not an integer, or says ``-1``."""
    try:
        value = int((pci_device_dir(sys_root, bus_id) / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return UNKNOWN_NUMA
    return value if value >= 0 else UNKNOWN_NUMA


def pcie_root(sys_root: Path, bus_id: str) -> str:
    """The PCIe root complex (``pci0000:3a``) above the device, "" when its sysfs link cannot be resolved."""
    link = pci_device_dir(sys_root, bus_id)
    try:
        target = os.path.realpath(link, strict=True)
    except OSError:
        return ""
    m = _PCIE_ROOT.search(target)
    return m.group(0).lower() if m else ""
