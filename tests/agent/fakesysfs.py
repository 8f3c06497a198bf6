"""Fake sysfs trees for the cpu topology reader: the files lscpu reads, laid out as the kernel does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.api.topology import format_cpuset

GIB_KB = 1024 * 1024


@dataclass(frozen=True)
class FakeCPU:
    """One logical cpu as sysfs describes it (``core_id`` restarts on every socket, as on real machines)."""

    cpu: int
    package: int
    core_id: int
    node: int


def write_tree(
    root: Path,
    cpus: list[FakeCPU],
    node_memory_kb: dict[int, int] | None,
    *,
    smt_active: bool | None,
    offline: set[int] = frozenset(),  # type: ignore[assignment]
) -> Path:
    """Write ``<root>/devices/system/{cpu,node}`` for ``cpus`` and return ``root`` (the ``--sys-root``).

    ``node_memory_kb`` None: no node dir (a kernel without NUMA). ``offline`` cpus have a dir but are left
    out of ``online`` and have no topology dir, as the kernel shows them.
    """
    cpu_root = root / "devices" / "system" / "cpu"
    cpu_root.mkdir(parents=True)
    for c in cpus:
        d = cpu_root / f"cpu{c.cpu}"
        d.mkdir()
        if c.cpu in offline:
            continue
        topo = d / "topology"
        topo.mkdir()
        (topo / "physical_package_id").write_text(f"{c.package}\n")
        (topo / "core_id").write_text(f"{c.core_id}\n")
        (topo / "die_id").write_text("0\n")
        siblings = [o.cpu for o in cpus if (o.package, o.core_id) == (c.package, c.core_id)]
        (topo / "thread_siblings_list").write_text(format_cpuset(siblings) + "\n")
    (cpu_root / "online").write_text(format_cpuset(c.cpu for c in cpus if c.cpu not in offline) + "\n")
    (cpu_root / "possible").write_text(format_cpuset(c.cpu for c in cpus) + "\n")
    (cpu_root / "cpufreq").mkdir()  # not a cpu<N> dir: ignored
    if smt_active is not None:
        (cpu_root / "smt").mkdir()
        (cpu_root / "smt" / "active").write_text("1\n" if smt_active else "0\n")
    if node_memory_kb is not None:
        node_root = root / "devices" / "system" / "node"
        node_root.mkdir(parents=True)
        (node_root / "online").write_text(format_cpuset(node_memory_kb) + "\n")
        for nid, kb in node_memory_kb.items():
            d = node_root / f"node{nid}"
            d.mkdir()
            (d / "cpulist").write_text(format_cpuset(c.cpu for c in cpus if c.node == nid) + "\n")
            (d / "meminfo").write_text(
                f"Node {nid} MemTotal:       {kb} kB\nNode {nid} MemFree:        {kb // 2} kB\n"
                f"Node {nid} MemUsed:        {kb - kb // 2} kB\n"
            )
    return root


def one_socket_eight_cores_ht(root: Path) -> Path:
    """1 socket, 8 cores, 2 threads each: cpu i and i+8 are siblings; one NUMA node of 32 GiB."""
    cpus = [FakeCPU(i, 0, i % 8, 0) for i in range(16)]
    return write_tree(root, cpus, {0: 32 * GIB_KB}, smt_active=True)


def two_sockets_two_numa_ht(root: Path) -> Path:
    """2 sockets = 2 NUMA nodes, 8 cores each, 2 threads: socket 0 holds cpus 0-7 and their siblings
    16-23, socket 1 holds 8-15 and 24-31. sysfs core ids restart per socket with holes (0-3, 8-11), as
    on many Xeons; 64 GiB on node 0, 32 GiB on node 1."""
    core_ids = [0, 1, 2, 3, 8, 9, 10, 11]
    cpus = []
    for cpu in range(32):
        socket = (cpu // 8) % 2
        cpus.append(FakeCPU(cpu, socket, core_ids[cpu % 8], socket))
    return write_tree(root, cpus, {0: 64 * GIB_KB, 1: 32 * GIB_KB}, smt_active=True)


def four_numa_no_ht(root: Path) -> Path:
    """2 sockets, 4 NUMA nodes (sub-NUMA clustering), 16 cores without SMT: 4 cpus per node, node n on
    socket n // 2; 16 GiB per node except node 3 with 8 GiB."""
    cpus = [FakeCPU(cpu, cpu // 8, cpu % 8, cpu // 4) for cpu in range(16)]
    return write_tree(root, cpus, {0: 16 * GIB_KB, 1: 16 * GIB_KB, 2: 16 * GIB_KB, 3: 8 * GIB_KB}, smt_active=False)
