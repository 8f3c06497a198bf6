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
