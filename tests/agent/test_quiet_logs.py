"""The agent logs BE suppression on a change of regime only: while it adjusts the besteffort quota (or
cpuset) round after round, each step is a DEBUG line; starting, switching policy and stopping are INFO,
once. On real cgroups (a uniquely named subtree), driven tick by tick."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.agent.cgtree import CgroupTree
from tests.agent.test_real_cgroups import BE_RESOURCES, make_agent, node, node_slo, pod, write_cluster


def _infos(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and r.name.startswith("agent")]


def test_suppression_logs_its_regime_once_and_its_steps_at_debug(
    cgtree: CgroupTree, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    cgtree.pod("be-0031", "besteffort", ("be31c",))
    objs = (node(), pod("be", "be-0031", "BE", "be31c", BE_RESOURCES, "BestEffort"))
    write_cluster(cluster, *objs, node_slo(cpuSuppressPolicy="cfsQuota"))
    agent = make_agent(cgtree, cluster, tmp_path)
    with caplog.at_level(logging.DEBUG, logger="agent"):
        for _ in range(5):
            agent.tick()
            time.sleep(0.1)
        assert agent.last_suppress is not None and agent.last_suppress.policy == "cfsQuota"
        infos = _infos(caplog)
        regime = [m for m in infos if m.startswith("suppressBECPU: suppressing BE pods by cfsQuota")]
        assert len(regime) == 1, infos
        assert not [m for m in infos if "AdjustBEByNodeCPUUsage" in m], infos  # the steps are not INFO
        steps = [r for r in caplog.records if "AdjustBEByNodeCPUUsage" in r.getMessage()]
        assert all(r.levelno == logging.DEBUG for r in steps)
        assert any(r.getMessage().startswith("cgroup ") for r in steps)  # the first quota write, at least

        caplog.clear()
        write_cluster(cluster, *objs, node_slo(cpuSuppressPolicy="cpuset"))
        for _ in range(4):
            agent.tick()
            time.sleep(0.1)
        assert agent.last_suppress is not None and agent.last_suppress.policy == "cpuset"
        switched = [m for m in _infos(caplog) if m.startswith("suppressBECPU: suppressing BE pods by cpuset")]
        assert len(switched) == 1, _infos(caplog)

        caplog.clear()
        write_cluster(cluster, *objs, node_slo(cpuSuppressPolicy="cpuset", enable=False))
        for _ in range(3):
            agent.tick()
            time.sleep(0.1)
        stopped = [m for m in _infos(caplog) if m.startswith("suppressBECPU: BE pods no longer suppressed")]
        assert len(stopped) == 1, _infos(caplog)


def test_clamps_caused_by_a_suppression_step_are_debug(cgtree: CgroupTree, caplog: pytest.LogCaptureFixture) -> None:
    """A suppression step that lowers the besteffort quota below a pod's lowers the pod too (cgroup v1 refuses
    a child above its parent), and the next step that raises it raises the pod again: each of those pod
    writes is part of the step, so it is DEBUG like the step. A pod quota set for its own sake stays INFO."""
    from agent.cgroups import CgroupLayout
    from agent.executor import CgroupExecutor, CgroupWrite

    pod_dir = cgtree.pod("be-0032", "besteffort", ("be32c",))
    layout = CgroupLayout.detect(cgtree.root, cgtree.kubepods)
    executor = CgroupExecutor(layout)
    with caplog.at_level(logging.DEBUG, logger="agent"):
        assert executor.update(CgroupWrite("cpu.cfs_quota_us", pod_dir, "200000", "batchresource"))
        assert [r.levelno for r in caplog.records if "batchresource" in r.getMessage()] == [logging.INFO]
        caplog.clear()
        for quota in ("120800", "130000", "110000", "150000"):
            be = f"{cgtree.kubepods}/besteffort"
            step = CgroupWrite("cpu.cfs_quota_us", be, quota, "AdjustBEByNodeCPUUsage", routine=True)
            assert executor.update(step)
            assert cgtree.read("cpu", pod_dir, "cpu.cfs_quota_us") == quota  # the pod follows its parent
        assert caplog.records, "the steps and the pod writes they caused are logged"
        assert [r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG] == []
