"""A fake NVML for the agent tests: the H200 capture or a made-up 8-GPU node, with failures on demand, and
a fake sysfs tree (PCI devices under their PCIe roots, NUMA nodes, RDMA NICs with ports and SR-IOV VFs)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.collectors.nvml import NVMLError, RecordedNVML

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
H200 = FIXTURES / "gpu-node-h200"
H200_UUID = "GPU-ad7723cc-c000-c2e0-1213-74918b7d7a51"
H200_MEMORY = 150_754_820_096

A100_MEMORY = 85_899_345_920  # 80 GiB
#: The made-up node: 4 PCIe roots, 2 per NUMA node, each with 2 GPUs behind a switch and 1 RDMA NIC.
ROOTS = ("17", "3a", "5d", "80")


def gpu_bus(i: int) -> str:
    """sysfs bus id of GPU ``i`` (two per root)."""
    root = ROOTS[i // 2]
    return f"0000:{int(root, 16) + 2 + i % 2:02x}:00.0"


def nic_bus(j: int) -> str:
    """sysfs bus id of NIC ``j`` (one per root)."""
    return f"0000:{int(ROOTS[j], 16) + 5:02x}:00.0"


def eight_gpu_capture() -> dict[str, Any]:
    """An nvml.json for 8 x ``NVIDIA A100-SXM4-80GB``; NVML indices in PCI order, minors reversed (minor
    = 7 - index) so sorting by minor is visible; NUMA node NotSupported like the H200 (sysfs knows it)."""
    devices = []
    for i in range(8):
        domain, rest = gpu_bus(i).split(":", 1)
        devices.append(
            {
                "index": i,
                "minor": 7 - i,
                "uuid": f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd",
                "name": "NVIDIA A100-SXM4-80GB",
                "memory": {"total": A100_MEMORY, "used": 0},
                "utilization": {"gpu": 0},
                "pci_bus_id": f"0000{domain.upper()}:{rest.upper()}",
                "numa_node": {"error": "NVMLError_NotSupported: Not Supported"},
                "processes": [],
            }
        )
    return {"driver": "535.129.03", "cuda_driver_version": 12020, "count": 8, "devices": devices}


def h200_capture() -> dict[str, Any]:
    """The H200 node's NVML answers (tests/fixtures/gpu-node-h200/nvml.json)."""
    data: dict[str, Any] = json.loads((H200 / "nvml.json").read_text())
    return data


class FakeNVML(RecordedNVML):
    """A :class:`RecordedNVML` whose GPUs can stop answering (``failing``: NVML indices; ``all_fail``: even the
    device count) and report Xid events (``xid(uuid, code)``)."""

    def __init__(self, capture: dict[str, Any]) -> None:
        super().__init__(capture)
        self.failing: set[int] = set()
        self.all_fail = False

    def xid(self, uuid: str, code: int) -> None:
        self.events.append((uuid, code))

    def _dev(self, index: int) -> dict[str, Any]:
        if self.all_fail or index in self.failing:
            raise NVMLError(f"GPU {index}: NVML_ERROR_GPU_IS_LOST")
        return super()._dev(index)

    def device_count(self) -> int:
        if self.all_fail:
            raise NVMLError("nvmlDeviceGetCount: NVML_ERROR_UNKNOWN")
        return super().device_count()


@dataclass
class FakeSys:
    """A sysfs tree under ``root``."""

    root: Path
    pci: dict[str, Path] = field(default_factory=dict)

    def pci_device(self, root_complex: str, bus: str, *, numa: int, pci_class: str = "0x030200") -> Path:
        """A PCI function under ``pci0000:<root_complex>`` behind one bridge, with its bus link and numa_node."""
        real = self.root / "devices" / f"pci0000:{root_complex}" / f"0000:{root_complex}:00.0" / bus
        real.mkdir(parents=True, exist_ok=True)
        (real / "numa_node").write_text(f"{numa}\n")
        (real / "class").write_text(f"{pci_class}\n")
        links = self.root / "bus" / "pci" / "devices"
        links.mkdir(parents=True, exist_ok=True)
        link = links / bus
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(real, links))
        self.pci[bus] = real
        return real

    def ib_device(self, name: str, pci_dir: Path, *, states: tuple[str, ...] = ("4: ACTIVE",)) -> None:
        """``class/infiniband/<name>`` pointing at ``pci_dir``, with one port per state."""
        ib = self.root / "class" / "infiniband" / name
        (ib / "ports").mkdir(parents=True, exist_ok=True)
        (ib / "device").symlink_to(os.path.relpath(pci_dir, ib))
        for n, state in enumerate(states, start=1):
            (ib / "ports" / str(n)).mkdir(exist_ok=True)
            (ib / "ports" / str(n) / "state").write_text(f"{state}\n")

    def vfs(self, pf: Path, root_complex: str, buses: list[str], *, numa: int) -> list[Path]:
        """SR-IOV VFs of ``pf``: ``sriov_numvfs``, ``virtfnN`` links and each VF's ``physfn``."""
        (pf / "sriov_numvfs").write_text(f"{len(buses)}\n")
        out = []
        for n, bus in enumerate(buses):
            vf = self.pci_device(root_complex, bus, numa=numa, pci_class="0x020000")
            (vf / "physfn").symlink_to(os.path.relpath(pf, vf))
            (pf / f"virtfn{n}").symlink_to(os.path.relpath(vf, pf))
            out.append(vf)
        return out


def h200_sys(root: Path) -> FakeSys:
    """The H200 VM's sysfs: the GPU at 0000:00:06.0 with numa_node -1, no infiniband."""
    fs = FakeSys(root)
    fs.pci_device("00", "0000:00:06.0", numa=-1)
    return fs


def eight_gpu_sys(root: Path) -> FakeSys:
    """The made-up node's sysfs: 8 GPUs and 4 NICs (mlx5_0..3) on 4 roots (NUMA 0: 17, 3a; NUMA 1: 5d, 80);
    mlx5_1 has SR-IOV on with 2 VFs (whose own ibdevs mlx5_4/5 must not count), mlx5_3's port is DOWN."""
    fs = FakeSys(root)
    for i in range(8):
        fs.pci_device(ROOTS[i // 2], gpu_bus(i), numa=i // 4)
    for j in range(4):
        pf = fs.pci_device(ROOTS[j], nic_bus(j), numa=j // 2, pci_class="0x020000")
        fs.ib_device(f"mlx5_{j}", pf, states=("1: DOWN",) if j == 3 else ("4: ACTIVE",))
        if j == 1:
            vfs = fs.vfs(pf, ROOTS[j], ["0000:3f:00.3", "0000:3f:00.2"], numa=0)
            for n, vf in enumerate(vfs):
                fs.ib_device(f"mlx5_{4 + n}", vf)
    return fs
