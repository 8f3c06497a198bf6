"""The cpu topology the agent reads from sysfs (three fake shapes and this machine) and the kubelet's
settings it reads from a KubeletConfiguration file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agent.collectors.cputopology import TopologyReadError, read_machine_topology
from agent.collectors.node import ProcessorInfo, read_meminfo
from agent.kubeletconfig import KubeletConfigError, parse_kubelet_config, read_kubelet_config, take_by_topology
from tests.agent.fakesysfs import (
    GIB_KB,
    FakeCPU,
    four_numa_no_ht,
    one_socket_eight_cores_ht,
    two_sockets_two_numa_ht,
    write_tree,
)

GIB = 1024**3


def _shape(topo: object) -> tuple[int, int, int, int]:
    return (topo.sockets, topo.cores, topo.threads_per_core, len(topo.numa_nodes))  # type: ignore[attr-defined]


def test_one_socket_eight_cores_with_hyper_threads(tmp_path: Path) -> None:
    topo = read_machine_topology(one_socket_eight_cores_ht(tmp_path), tmp_path)
    assert _shape(topo) == (1, 8, 2, 1)
    assert topo.hyper_threading
    assert [p.cpu_id for p in topo.processors] == list(range(16))
    # cpu i and i+8 are siblings: same core, one socket, one node
    assert topo.processors == tuple(ProcessorInfo(i, i % 8, 0, 0) for i in range(16))
    assert topo.numa_memory == {0: 32 * GIB}
    assert topo.cpus_of_node(0) == frozenset(range(16))


def test_two_sockets_two_numa_nodes_with_hyper_threads(tmp_path: Path) -> None:
    topo = read_machine_topology(two_sockets_two_numa_ht(tmp_path), tmp_path)
    assert _shape(topo) == (2, 16, 2, 2)
    # sysfs core ids restart per socket (0-3, 8-11): the reported core is machine-wide, in order of the
    # core's lowest cpu, so cpu c and its sibling c+16 share core c % 16 and sockets never share a core
    assert topo.processors == tuple(ProcessorInfo(c, c % 16, (c // 8) % 2, (c // 8) % 2) for c in range(32))
    assert topo.numa_memory == {0: 64 * GIB, 1: 32 * GIB}
    assert topo.cpus_of_node(1) == frozenset([*range(8, 16), *range(24, 32)])


def test_four_numa_nodes_without_hyper_threads(tmp_path: Path) -> None:
    topo = read_machine_topology(four_numa_no_ht(tmp_path), tmp_path)
    assert _shape(topo) == (2, 16, 1, 4)
    assert not topo.hyper_threading
    assert topo.processors == tuple(ProcessorInfo(c, c, c // 8, c // 4) for c in range(16))
    assert topo.numa_memory == {0: 16 * GIB, 1: 16 * GIB, 2: 16 * GIB, 3: 8 * GIB}


def test_offline_cpus_are_left_out_and_a_kernel_without_numa_is_one_node(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal:        8000000 kB\nMemAvailable:    4000000 kB\n")
    cpus = [FakeCPU(i, 0, i, 0) for i in range(4)]
    root = write_tree(tmp_path / "sys", cpus, None, smt_active=None, offline={2})
    topo = read_machine_topology(root, proc)
    assert [p.cpu_id for p in topo.processors] == [0, 1, 3]
    assert [p.core_id for p in topo.processors] == [0, 1, 2]
    assert topo.numa_memory == {0: 8000000 * 1024}
    assert not topo.hyper_threading  # no smt/active: one thread per core


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda r: (r / "devices/system/cpu/cpu3/topology/core_id").write_text("x\n"), r"core_id: expected an integer"),
        (lambda r: (r / "devices/system/cpu/online").write_text("3-1\n"), r"online: invalid cpuset"),
        (lambda r: (r / "devices/system/node/node0/meminfo").write_text("nothing\n"), r"no MemTotal line"),
        (lambda r: (r / "devices/system/cpu/online").write_text(""), r"no online cpu"),
    ],
)
def test_a_broken_tree_is_an_error_naming_the_file(tmp_path: Path, break_it: object, message: str) -> None:
    root = one_socket_eight_cores_ht(tmp_path)
    break_it(root)  # type: ignore[operator]
    with pytest.raises(TopologyReadError, match=message):
        read_machine_topology(root, tmp_path)


def test_this_machines_real_sysfs_matches_cpu_count_and_proc_cpuinfo() -> None:
    if not Path("/sys/devices/system/cpu/online").exists():
        pytest.skip("no /sys/devices/system/cpu/online on this machine")
    topo = read_machine_topology(Path("/sys"), Path("/proc"))
    cpuinfo = Path("/proc/cpuinfo").read_text()
    processors = [int(m) for m in re.findall(r"^processor\s*:\s*(\d+)", cpuinfo, re.M)]
    assert len(topo.processors) == os.cpu_count() == len(processors)
    assert sorted(p.cpu_id for p in topo.processors) == sorted(processors)
    blocks = [b for b in cpuinfo.split("\n\n") if b.strip()]
    packages = {re.search(r"^physical id\s*:\s*(\d+)", b, re.M) for b in blocks}
    if None not in packages:  # x86 names sockets and cores in cpuinfo
        sockets = {m.group(1) for m in packages if m}
        cores = {
            (
                re.search(r"^physical id\s*:\s*(\d+)", b, re.M).group(1),
                re.search(r"^core id\s*:\s*(\d+)", b, re.M).group(1),
            )  # type: ignore[union-attr]
            for b in blocks
        }
        assert topo.sockets == len(sockets)
        assert topo.cores == len(cores)
    assert topo.threads_per_core * topo.cores == len(topo.processors)
    # each NUMA node's memory is its meminfo's MemTotal, read here independently (a sandboxed /proc/meminfo
    # may not add up to the nodes' memory, e.g. in a VM sandbox, so it is only compared without NUMA)
    for nid, memory in topo.numa_memory.items():
        text = Path(f"/sys/devices/system/node/node{nid}/meminfo").read_text()
        kb = re.search(rf"^Node {nid} MemTotal:\s*(\d+) kB", text, re.M)
        assert kb is not None and memory == int(kb.group(1)) * 1024 > 0
    if not Path("/sys/devices/system/node").is_dir():
        assert topo.numa_memory == {0: read_meminfo(Path("/proc"))["MemTotal"]}
    assert {p.node_id for p in topo.processors} <= set(topo.numa_nodes)


# -- the kubelet's configuration ---------------------------------------------------------------------------


def test_kubelet_static_policy_with_reserved_cpus_taken_by_topology(tmp_path: Path) -> None:
    topo = read_machine_topology(two_sockets_two_numa_ht(tmp_path / "sys"), tmp_path)
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"
        "cpuManagerPolicyOptions: {full-pcpus-only: 'true'}\nkubeReserved: {cpu: '1'}\nsystemReserved: {cpu: 500m}\n"
        "topologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\n"
    )
    cfg = read_kubelet_config(path)
    assert cfg.cpu_manager_policy == "static"
    assert cfg.cpu_manager_policy_options == {"full-pcpus-only": "true"}
    assert cfg.topology_policy == "SingleNUMANodePodLevel"
    # ceil(1.5) = 2 cpus: the first whole core, cpu 0 and its sibling 16
    assert cfg.reserved_cpus(topo.processors) == {0, 16}


def test_kubelet_reserved_system_cpus_win_and_defaults_are_none() -> None:
    cfg = parse_kubelet_config(
        {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1", "kubeReserved": {"cpu": "4"}}
    )
    assert cfg.reserved_cpus([]) == {0, 1}
    none = parse_kubelet_config({"kind": "KubeletConfiguration"})
    assert (none.cpu_manager_policy, none.topology_policy) == ("none", "None")
    assert none.reserved_cpus([ProcessorInfo(0, 0, 0, 0)]) == frozenset()
    assert parse_kubelet_config({"topologyManagerPolicy": "best-effort"}).topology_policy == "BestEffortContainerLevel"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "expected a KubeletConfiguration map"),
        ({"kind": "Pod"}, "kind: expected KubeletConfiguration"),
        ({"cpuManagerPolicy": "dynamic"}, "cpuManagerPolicy: expected none or static"),
        ({"cpuManagerPolicy": 3}, "cpuManagerPolicy: expected a string"),
        ({"reservedSystemCPUs": "1-0"}, "reservedSystemCPUs: invalid cpuset"),
        ({"kubeReserved": {"cpu": "lots"}}, "kubeReserved.cpu: invalid quantity"),
        ({"cpuManagerPolicyOptions": ["full-pcpus-only"]}, "cpuManagerPolicyOptions: expected a map"),
    ],
)
def test_bad_kubelet_configs_are_refused_naming_the_field(doc: object, message: str) -> None:
    with pytest.raises(KubeletConfigError, match=re.escape(message)):
        parse_kubelet_config(doc)


def test_unreadable_or_non_yaml_kubelet_config_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(KubeletConfigError, match=r"cannot read .*missing\.yaml"):
        read_kubelet_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("cpuManagerPolicy: [static\n")
    with pytest.raises(KubeletConfigError, match=r"bad\.yaml: not YAML or JSON"):
        read_kubelet_config(bad)


def test_take_by_topology_packs_sockets_then_cores_then_cpus(tmp_path: Path) -> None:
    topo = read_machine_topology(two_sockets_two_numa_ht(tmp_path), tmp_path)
    assert take_by_topology(topo.processors, 0) == frozenset()
    assert take_by_topology(topo.processors, 1) == {0}
    assert take_by_topology(topo.processors, 3) == {0, 16, 1}
    # a whole socket (cpus 0-7 and 16-23) and then a core of the next
    assert take_by_topology(topo.processors, 18) == {*range(8), *range(16, 24), 8, 24}
    assert take_by_topology(topo.processors, 99) == frozenset(range(32))
    assert GIB_KB * 1024 == GIB
