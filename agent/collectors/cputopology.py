"""The machine's CPU topology from sysfs: sockets, physical cores, hyper-threads, NUMA nodes and their memory.

Upstream koordlet runs ``lscpu -e=CPU,NODE,SOCKET,CORE,CACHE,ONLINE`` (``pkg/util/cpuinfo.go``
``GetLocalCPUInfo``) and reads ``/sys/devices/system/node/node<N>/meminfo`` (``pkg/koordlet/util``
``GetNodeNUMAInfo``). This module reads the same facts from the files lscpu itself reads, with the
roots configurable so tests use fake trees:

- online cpus: ``<sys>/devices/system/cpu/online`` (every ``cpu<N>`` dir when absent);
- per cpu: ``cpu<N>/topology/physical_package_id``, ``die_id`` (when present) and ``core_id``;
- NUMA nodes: ``<sys>/devices/system/node/node<N>/cpulist`` and ``meminfo`` (``Node 0 MemTotal: ... kB``);
  without a node dir (a kernel without NUMA) every cpu is on node 0 and its memory is ``/proc/meminfo``'s
  ``MemTotal``;
- hyper-threading: ``<sys>/devices/system/cpu/smt/active`` (``1``), else more than one thread per core.

Core and socket ids are lscpu's logical numbers: indexes in the order of each core's (socket's) lowest
cpu id, machine-wide, so hyper-thread siblings share a core id and cores of different sockets never do
(sysfs ``core_id`` restarts on every socket and may have holes).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.collectors.node import ProcessorInfo, read_meminfo
from app.api.topology import CPUSetError, parse_cpuset

_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")


class TopologyReadError(Exception):
    """The cpu topology could not be read; the message names the file and the reason."""


@dataclass(frozen=True, slots=True)
class MachineTopology:
    """What the agent reports about the machine.

    Attributes:
        processors: online logical cpus sorted by id (machine-wide core and socket indexes, NUMA node id).
        numa_memory: NUMA node id -> ``MemTotal`` bytes (every node with cpus or memory).
        hyper_threading: SMT is active.
        cpu_model: ``model name`` of /proc/cpuinfo (``unknown`` when absent, as upstream).
        vendor_id: ``vendor_id`` of /proc/cpuinfo (empty when absent).
        turbo_enabled: ``intel_pstate/no_turbo`` is 0 (False without the file).
        cat_l3_cbm_mask: resctrl's ``info/L3/cbm_mask`` (empty without resctrl).
    """

    processors: tuple[ProcessorInfo, ...]
    numa_memory: dict[int, int]
    hyper_threading: bool
    cpu_model: str = "unknown"
    vendor_id: str = ""
    turbo_enabled: bool = False
    cat_l3_cbm_mask: str = ""

    def basic_info(self) -> dict[str, object]:
        """``node.koordinator.sh/cpu-basic-info`` (upstream ``extension.CPUBasicInfo``, empty fields omitted)."""
        out: dict[str, object] = {"cpuModel": self.cpu_model}
        if self.hyper_threading:
            out["hyperThreadEnabled"] = True
        if self.turbo_enabled:
            out["turboEnabled"] = True
        if self.cat_l3_cbm_mask:
            out["catL3CbmMask"] = self.cat_l3_cbm_mask
        if self.vendor_id:
            out["vendorID"] = self.vendor_id
        return out

    @property
    def numa_nodes(self) -> list[int]:
        """NUMA node ids, ascending (those with cpus and those with memory)."""
        return sorted({p.node_id for p in self.processors} | set(self.numa_memory))

    @property
    def sockets(self) -> int:
        """Number of sockets."""
        return len({p.socket_id for p in self.processors})

    @property
    def cores(self) -> int:
        """Number of physical cores."""
        return len({p.core_id for p in self.processors})

    @property
    def threads_per_core(self) -> int:
        """Logical cpus per physical core."""
        return len(self.processors) // max(self.cores, 1)

    def cpus_of_node(self, node: int) -> frozenset[int]:
        """Cpu ids of NUMA node ``node``."""
        return frozenset(p.cpu_id for p in self.processors if p.node_id == node)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise TopologyReadError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_int(path: Path) -> int:
    text = _read(path)
    try:
        return int(text)
    except ValueError:
        raise TopologyReadError(f"{path}: expected an integer, got {text!r}") from None


def _cpuset_file(path: Path) -> frozenset[int]:
    try:
        return parse_cpuset(_read(path))
    except CPUSetError as exc:
        raise TopologyReadError(f"{path}: {exc}") from None


def _scan(directory: Path, pattern: re.Pattern[str]) -> dict[int, Path]:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return {}
    out: dict[int, Path] = {}
    for e in entries:
        m = pattern.match(e.name)
        if m and e.is_dir():
            out[int(m.group(1))] = Path(e.path)
    return out


def _node_memtotal(meminfo: Path) -> int:
    """``Node <N> MemTotal: <kB> kB`` of a NUMA node's meminfo, in bytes."""
    for line in _read(meminfo).splitlines():
        parts = line.split()
        # "Node", "0", "MemTotal:", "65843632", "kB"
        if len(parts) >= 4 and parts[2] == "MemTotal:":
            try:
                value = int(parts[3])
            except ValueError:
                break
            return value * 1024 if len(parts) > 4 and parts[4] == "kB" else value
    raise TopologyReadError(f"{meminfo}: no MemTotal line")


def read_machine_topology(sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc")) -> MachineTopology:
    """Read the topology under ``sys_root`` (``/sys``; ``/host-sys`` in a container); see the module docstring.

    Raises:
        TopologyReadError: no online cpu has a readable topology, a file holds garbage, or a NUMA node's
            meminfo is unreadable.
    """
    cpu_root = sys_root / "devices" / "system" / "cpu"
    node_root = sys_root / "devices" / "system" / "node"
    cpu_dirs = _scan(cpu_root, _CPU_DIR)
    online = _cpuset_file(cpu_root / "online") if (cpu_root / "online").exists() else frozenset(cpu_dirs)
    raw: list[tuple[int, tuple[int, int, int], int]] = []  # (cpu, (package, die, core), package)
    for cpu in sorted(online):
        topo = cpu_root / f"cpu{cpu}" / "topology"
        if not topo.is_dir():
            raise TopologyReadError(f"{topo}: missing for online cpu {cpu}")
        package = _read_int(topo / "physical_package_id")
        die = _read_int(topo / "die_id") if (topo / "die_id").exists() else 0
        core = _read_int(topo / "core_id")
        raw.append((cpu, (package, die, core), package))
    if not raw:
        raise TopologyReadError(f"{cpu_root}: no online cpu")

    node_dirs = _scan(node_root, _NODE_DIR)
    cpu_node: dict[int, int] = {}
    numa_memory: dict[int, int] = {}
    for nid, ndir in sorted(node_dirs.items()):
        for cpu in _cpuset_file(ndir / "cpulist"):
            cpu_node[cpu] = nid
        numa_memory[nid] = _node_memtotal(ndir / "meminfo")
    if not node_dirs:
        try:
            numa_memory[0] = read_meminfo(proc_root).get("MemTotal", 0)
        except OSError as exc:
            raise TopologyReadError(f"cannot read {proc_root / 'meminfo'}: {exc.strerror or exc}") from None

    core_index: dict[tuple[int, int, int], int] = {}
    socket_index: dict[int, int] = {}
    for _cpu, key, package in raw:  # cpus ascending: indexes in order of each core's lowest cpu
        core_index.setdefault(key, len(core_index))
        socket_index.setdefault(package, len(socket_index))
    processors = tuple(
        ProcessorInfo(cpu, core_index[key], socket_index[package], cpu_node.get(cpu, 0)) for cpu, key, package in raw
    )
    smt = cpu_root / "smt" / "active"
    hyper_threading = _read(smt) == "1" if smt.exists() else len(processors) > len(core_index)
    model, vendor = read_cpuinfo_ids(proc_root)
    no_turbo = cpu_root / "intel_pstate" / "no_turbo"
    try:
        turbo = _read(no_turbo) == "0" if no_turbo.exists() else False
    except (OSError, TopologyReadError):
        turbo = False
    cbm = sys_root / "fs" / "resctrl" / "info" / "L3" / "cbm_mask"
    try:
        mask = cbm.read_text().strip() if cbm.exists() else ""
    except OSError:
        mask = ""
    return MachineTopology(processors, numa_memory, hyper_threading, model, vendor, turbo, mask)


def read_cpuinfo_ids(proc_root: Path = Path("/proc")) -> tuple[str, str]:
    """``(model name, vendor_id)`` from the first processor of ``/proc/cpuinfo`` (upstream ``getCPUModel``,
    ``GetVendorIDByCPUInfo``); ``("unknown", "")`` when the file or the lines are missing (arm64 has
    ``Model Name`` / ``CPU implementer``: the model is read from either spelling)."""
    model, vendor = "unknown", ""
    try:
        with (proc_root / "cpuinfo").open(errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if not sep:
                    if model != "unknown" or vendor:
                        break  # end of the first processor
                    continue
                key = key.strip()
                if key in ("model name", "Model Name") and model == "unknown":
                    model = value.strip() or "unknown"
                elif key == "vendor_id" and not vendor:
                    vendor = value.strip()
                if model != "unknown" and vendor:
                    break
    except OSError:
        pass
    return model, vendor
