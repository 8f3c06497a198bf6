"""cpuset enforcement and CPU burst on this machine's real cgroup v1 tree (a throw-away kubepods subtree).

The machine has (at least) 2 cpus: the LSR pod is given cpu 1 by its resource-status, so the LS shared pool is
cpu 0. The kernel's own view is checked: ``cpuset.cpus`` of the pod and container dirs and the
``Cpus_allowed_list`` of processes already running in them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups import parse_cpuset
from agent.validator import read_online_cpus
from tests.agent.cgtree import SLEEP, CgroupTree
from tests.agent.test_real_cgroups import LS_RESOURCES, make_agent, node, pod, write_cluster
from tests.agent.test_real_cgroups import cluster as cluster  # the fixture

LSR_RESOURCES = {"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"


def _online() -> frozenset[int]:
    cpus = read_online_cpus()
    if cpus is None or not {0, 1} <= cpus:
        pytest.skip(f"needs online cpus 0 and 1, found {cpus}")
    return cpus


def _allowed(pid: int) -> set[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return set(parse_cpuset(line.split(":", 1)[1]))
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def lsr_pod(uid: str, cid: str, status: str) -> dict[str, Any]:
    obj = pod("lsr", uid, "LSR", cid, LSR_RESOURCES, "Guaranteed")
    obj["metadata"]["annotations"] = {RESOURCE_STATUS: status}
    return obj


def test_lsr_cpuset_and_ls_shared_pool_on_real_cgroups(cgtree: CgroupTree, cluster: Path, tmp_path: Path) -> None:
    """LSR gets cpu 1 (pod and container dirs, the process in it runs only on cpu 1, its cfs quota is unset);
    the LS pod gets the shared pool, cpu 0. Moving the LSR pod to cpu 0 then swaps both: on v1 this only works
    when every dir is widened top-down before it is narrowed bottom-up (EBUSY / EINVAL otherwise)."""
    online = _online()
    lsr_dir = cgtree.pod("lsr-0001", "guaranteed", ("lsrc",))
    ls_dir = cgtree.pod("ls-0001", "burstable", ("lsc",))
    bad_dir = cgtree.pod("bad-0001", "burstable", ("badc",))
    for rel in (lsr_dir, f"{lsr_dir}/lsrc"):
        (cgtree.root / "cpu" / rel / "cpu.cfs_quota_us").write_text("100000")
    bad = pod("bad", "bad-0001", "LS", "badc", LS_RESOURCES, "Burstable")
    bad["metadata"]["annotations"] = {RESOURCE_STATUS: '{"cpuset": "1-"}'}
    write_cluster(
        cluster,
        node(),
        lsr_pod("lsr-0001", "lsrc", json.dumps({"cpuset": "1"})),
        pod("ls", "ls-0001", "LS", "lsc", LS_RESOURCES, "Burstable"),
        bad,
    )
    lsr_proc = cgtree.start(f"{lsr_dir}/lsrc", SLEEP)
    ls_proc = cgtree.start(f"{ls_dir}/lsc", SLEEP)
    assert _allowed(lsr_proc.pid) == set(online) and _allowed(ls_proc.pid) == set(online)
    agent = make_agent(cgtree, cluster, tmp_path)
    agent.tick()
    assert agent.last_cpuset is not None
    assert "default/bad" in agent.last_cpuset.skipped  # malformed resource-status: skipped, the others enforced
    assert cgtree.read("cpuset", lsr_dir, "cpuset.cpus") == "1"
    assert cgtree.read("cpuset", f"{lsr_dir}/lsrc", "cpuset.cpus") == "1"
    assert _allowed(lsr_proc.pid) == {1}
    assert cgtree.read("cpu", lsr_dir, "cpu.cfs_quota_us") == "-1"
    assert cgtree.read("cpu", f"{lsr_dir}/lsrc", "cpu.cfs_quota_us") == "-1"
    pool = set(online) - {1}
    assert set(parse_cpuset(cgtree.read("cpuset", ls_dir, "cpuset.cpus"))) == pool
    assert set(parse_cpuset(cgtree.read("cpuset", f"{ls_dir}/lsc", "cpuset.cpus"))) == pool
    assert _allowed(ls_proc.pid) == pool
    assert set(parse_cpuset(cgtree.read("cpuset", bad_dir, "cpuset.cpus"))) == set(online)  # untouched

    # the scheduler moves the LSR pod to cpu 0: both pods swap cpus in one round
    write_cluster(
        cluster,
        node(),
        lsr_pod("lsr-0001", "lsrc", json.dumps({"cpuset": "0"})),
        pod("ls", "ls-0001", "LS", "lsc", LS_RESOURCES, "Burstable"),
    )
    agent.tick()
    assert cgtree.read("cpuset", lsr_dir, "cpuset.cpus") == "0"
    assert cgtree.read("cpuset", f"{lsr_dir}/lsrc", "cpuset.cpus") == "0"
    assert _allowed(lsr_proc.pid) == {0}
    pool = set(online) - {0}
    assert set(parse_cpuset(cgtree.read("cpuset", f"{ls_dir}/lsc", "cpuset.cpus"))) == pool
    assert _allowed(ls_proc.pid) == pool


def test_cpu_burst_written_to_ls_pod_on_real_cgroups(cgtree: CgroupTree, cluster: Path, tmp_path: Path) -> None:
    """policy auto, cpuBurstPercent 100: the LS container (limit 1 core) gets cpu.cfs_burst_us 100000 and its pod
    dir the sum, 100000 (the mainline kernel refuses a burst above the quota); the LSR pod gets none."""
    if not (cgtree.root / "cpu" / cgtree.kubepods / "cpu.cfs_burst_us").exists():
        pytest.skip("this kernel has no cpu.cfs_burst_us")
    ls_dir = cgtree.pod("ls-0002", "burstable", ("ls2c",))
    lsr_dir = cgtree.pod("lsr-0002", "guaranteed", ("lsr2c",))
    for rel in (ls_dir, f"{ls_dir}/ls2c", lsr_dir, f"{lsr_dir}/lsr2c"):
        (cgtree.root / "cpu" / rel / "cpu.cfs_quota_us").write_text("100000")
    slo = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": "agent-test-node"},
        "spec": {"cpuBurstStrategy": {"policy": "auto", "cpuBurstPercent": 100}},
    }
    write_cluster(
        cluster,
        node(),
        slo,
        pod("ls", "ls-0002", "LS", "ls2c", LS_RESOURCES, "Burstable"),
        lsr_pod("lsr-0002", "lsr2c", ""),
    )
    agent = make_agent(cgtree, cluster, tmp_path, features={"CPUBurst"})
    agent.tick()
    assert agent.last_burst is not None
    assert cgtree.read("cpu", f"{ls_dir}/ls2c", "cpu.cfs_burst_us") == "100000"
    assert cgtree.read("cpu", ls_dir, "cpu.cfs_burst_us") == "100000"
    assert cgtree.read("cpu", f"{lsr_dir}/lsr2c", "cpu.cfs_burst_us") == "0"
