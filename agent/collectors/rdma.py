"""RDMA NICs from sysfs (upstream ``metricsadvisor/devices/rdma/collector_rdma_linux.go`` and
``koordlet/util/system/rdma.go``).

Every ``/sys/class/infiniband/<ibdev>`` whose ``device`` link resolves to a PCI physical function (no
``physfn`` link: virtual functions are listed under their PF, not on their own) is one NIC:

- id and bus id: the PF's PCI address (``0000:3b:00.0``);
- minor: from the smallest ibdev name of the PF (``mlx5_1`` -> 1, upstream's ``^mlx\\d+_(\\d+)$``; other
  drivers: the name's trailing number, ``irdma0`` -> 0); a name without one, or a minor already taken,
  is skipped with a warning;
- health: every port's ``state`` says ``ACTIVE``;
- VFs: when SR-IOV is configured (``sriov_numvfs`` > 0), the ``virtfn*`` links' PCI addresses, sorted;
- NUMA node and PCIe root: :mod:`agent.collectors.pci`.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from agent.collectors.pci import DEFAULT_SYS, numa_node, pci_device_dir, pcie_root

log = logging.getLogger("agent.rdma")

_MLX_MINOR = re.compile(r"^mlx\d+_(\d+)$")
_TRAILING_NUMBER = re.compile(r"(\d+)$")
#: PCI base class of network controllers (``0x02xxxx``), as upstream's ``isNetDevice``.
_NET_CLASS = 0x02


@dataclass(frozen=True, slots=True)
class RDMAInfo:
    """One RDMA NIC (a PCI physical function).

    Attributes:
        bus_id: PCI address, also the Device entry's id. minor: see the module docstring.
        ibdevs: its ibdev names (``mlx5_0``, ...). healthy: every port ACTIVE.
        numa_node: ``-1`` unknown. pcie_root: ``pci0000:3a``, "" unknown. vfs: VF PCI addresses, sorted.
    """

    bus_id: str
    minor: int
    ibdevs: tuple[str, ...]
    healthy: bool
    numa_node: int
    pcie_root: str
    vfs: tuple[str, ...] = field(default=())


def rdma_minor(ibdev: str) -> int | None:
    """``mlx5_1`` -> 1, ``irdma0`` -> 0, ``foo`` -> None."""
    m = _MLX_MINOR.match(ibdev) or _TRAILING_NUMBER.search(ibdev)
    return int(m.group(1)) if m else None


def _ports_active(ib_dir: Path) -> bool:
    ports = ib_dir / "ports"
    try:
        names = sorted(os.listdir(ports))
    except OSError:
        return False
    if not names:
        return False
    for port in names:
        try:
            state = (ports / port / "state").read_text()
        except OSError:
            return False
        if "ACTIVE" not in state:
            return False
    return True


def _is_net(pci_dir: Path) -> bool:
    try:
        return int((pci_dir / "class").read_text().strip(), 16) >> 16 == _NET_CLASS
    except (OSError, ValueError):
        return True  # no class file: trust the infiniband class


def _vfs(pci_dir: Path) -> tuple[str, ...]:
    try:
        configured = int((pci_dir / "sriov_numvfs").read_text().strip()) > 0
    except (OSError, ValueError):
        configured = False
    if not configured:
        return ()
    out = []
    for entry in sorted(pci_dir.glob("virtfn*")):
        try:
            out.append(Path(os.path.realpath(entry, strict=True)).name)
        except OSError:
            continue
    return tuple(sorted(out))


def discover_rdma(sys_root: Path = DEFAULT_SYS) -> list[RDMAInfo]:
    """The node's RDMA NICs sorted by minor; empty when there is no ``class/infiniband``. Raises nothing."""
    ib_root = Path(sys_root) / "class" / "infiniband"
    try:
        ibdevs = sorted(os.listdir(ib_root))
    except OSError:
        return []
    by_bus: dict[str, list[str]] = {}
    for ibdev in ibdevs:
        try:
            target = Path(os.path.realpath(ib_root / ibdev / "device", strict=True))
        except OSError:
            log.debug("ibdev %s has no PCI device", ibdev)
            continue
        if (target / "physfn").exists() or not _is_net(target):
            continue
        by_bus.setdefault(target.name, []).append(ibdev)
    out: dict[int, RDMAInfo] = {}
    for bus, names in sorted(by_bus.items()):
        names.sort()
        minor = rdma_minor(names[0])
        if minor is None:
            log.warning("RDMA device %s (%s): no minor number in its name; not reported", names[0], bus)
            continue
        if minor in out:
            log.warning(
                "RDMA device %s (%s): minor %d already taken by %s; not reported",
                names[0],
                bus,
                minor,
                out[minor].bus_id,
            )
            continue
        pci_dir = pci_device_dir(Path(sys_root), bus)
        out[minor] = RDMAInfo(
            bus_id=bus,
            minor=minor,
            ibdevs=tuple(names),
            healthy=_ports_active(ib_root / names[0]),
            numa_node=numa_node(Path(sys_root), bus),
            pcie_root=pcie_root(Path(sys_root), bus),
            vfs=_vfs(pci_dir),
        )
    return [out[m] for m in sorted(out)]
