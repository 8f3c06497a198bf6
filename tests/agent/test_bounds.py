"""Bad input never poisons state (agent): cgroup values are bounded at the executor, NodeSLOs are validated
on intake and a refused one keeps the last good spec. Fake cgroup trees; the real-cgroup cases are in
test_real_cgroups.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.cgroups import CgroupLayout
from agent.executor import CgroupExecutor, CgroupWrite
from agent.metrics import AgentMetrics
from agent.validator import NodeBounds, read_online_cpus

BE = "kubepods/besteffort"


def v1_tree(tmp_path: Path) -> CgroupLayout:
    """A fake v1 tree: kubepods/besteffort with quota -1, cpuset 0-1, memory limit 512 MiB."""
    for controller, files in {
        "cpu": {"cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000", "cpu.shares": "2"},
        "cpuset": {"cpuset.cpus": "0-1"},
        "memory": {"memory.limit_in_bytes": str(512 << 20), "memory.min": "0"},
    }.items():
        d = tmp_path / controller / BE
        d.mkdir(parents=True)
        for name, value in files.items():
            (d / name).write_text(value)
    return CgroupLayout.detect(tmp_path, "kubepods")


def written(metrics: AgentMetrics, resource: str, result: str) -> float:
    return (
        metrics.registry.get_sample_value("koordlet_cgroup_writes_total", {"resource": resource, "result": result})
        or 0.0
    )


# -- write layer ------------------------------------------------------------------------------------


def test_quota_above_node_cpus_times_period_is_not_written_and_counted(tmp_path: Path) -> None:
    """2 cpus x 100000 us: 200000 is the largest quota; 1999997100 (what a 1000000 % threshold planned) and
    200001 are refused with the file untouched and counted as out_of_bounds; -1 and 200000 pass."""
    layout = v1_tree(tmp_path)
    metrics = AgentMetrics()
    ex = CgroupExecutor(layout, recorder=metrics, bounds=NodeBounds(2000, frozenset({0, 1})))
    quota = tmp_path / "cpu" / BE / "cpu.cfs_quota_us"
    for value in ("1999997100", "200001"):
        assert not ex.update(CgroupWrite("cpu.cfs_quota_us", BE, value, "AdjustBEByNodeCPUUsage"))
        assert quota.read_text() == "-1"
    assert written(metrics, "cpu.cfs_quota_us", "out_of_bounds") == 2
    assert ex.update(CgroupWrite("cpu.cfs_quota_us", BE, "200000"))
    assert quota.read_text() == "200000"
    assert ex.update(CgroupWrite("cpu.cfs_quota_us", BE, "-1"))


def test_cpusets_outside_the_online_cpus_are_refused(tmp_path: Path) -> None:
    """Online cpus come from <sys>/cpu/online (None when unreadable); a cpuset naming another cpu, or none, is
    refused before any cgroup is widened."""
    sys_cpu = tmp_path / "sys"
    sys_cpu.mkdir()
    (sys_cpu / "online").write_text("0-1\n")
    online = read_online_cpus(sys_cpu)
    assert online == frozenset({0, 1})
    (sys_cpu / "online").write_text("garbage")
    assert read_online_cpus(sys_cpu) is None and read_online_cpus(tmp_path / "missing") is None
    layout = v1_tree(tmp_path)
    metrics = AgentMetrics()
    ex = CgroupExecutor(layout, recorder=metrics, bounds=NodeBounds(2000, online))
    cpus = tmp_path / "cpuset" / BE / "cpuset.cpus"
    assert not ex.update(CgroupWrite("cpuset.cpus", BE, "0-2"))
    assert not ex.update(CgroupWrite("cpuset.cpus", BE, ""))
    assert cpus.read_text() == "0-1"
    assert written(metrics, "cpuset.cpus", "out_of_bounds") == 2
    assert ex.update(CgroupWrite("cpuset.cpus", BE, "1"))
    assert cpus.read_text() == "1"


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("memory.limit_in_bytes", str(10**30)),  # was taken for "unlimited"
        ("memory.min", str(1 << 63)),  # beyond int64: the kernel would refuse it
        ("memory.min", "-5"),
        ("cpu.shares", "262145"),
    ],
)
def test_integers_beyond_their_range_or_int64_are_refused(tmp_path: Path, resource: str, value: str) -> None:
    layout = v1_tree(tmp_path)
    metrics = AgentMetrics()
    ex = CgroupExecutor(layout, recorder=metrics, bounds=NodeBounds(2000, frozenset({0, 1})))
    path = layout.file_path(resource, BE)
    assert path is not None
    before = path.read_text()
    assert not ex.update(CgroupWrite(resource, BE, value))
    assert path.read_text() == before
    assert written(metrics, resource, "out_of_bounds") == 1


def test_a_refused_value_is_logged_once_naming_file_value_and_range(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    layout = v1_tree(tmp_path)
    metrics = AgentMetrics()
    ex = CgroupExecutor(layout, recorder=metrics, bounds=NodeBounds(2000, frozenset({0, 1})))
    with caplog.at_level(logging.WARNING, logger="agent.executor"):
        for _ in range(3):
            ex.update(CgroupWrite("cpu.cfs_quota_us", BE, "1999997100", "AdjustBEByNodeCPUUsage"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert str(tmp_path / "cpu" / BE / "cpu.cfs_quota_us") in lines[0]
    assert "1999997100" in lines[0] and "-1 or [1000, 200000]" in lines[0] and "AdjustBEByNodeCPUUsage" in lines[0]
    assert written(metrics, "cpu.cfs_quota_us", "out_of_bounds") == 3, "every refusal is counted"


def test_new_bounds_apply_to_values_refused_before(tmp_path: Path) -> None:
    """The Node grew to 4 cpus: a quota of 300000 refused under 2 cpus is written now."""
    layout = v1_tree(tmp_path)
    ex = CgroupExecutor(layout, bounds=NodeBounds(2000, frozenset({0, 1})))
    write = CgroupWrite("cpu.cfs_quota_us", BE, "300000")
    assert not ex.update(write)
    ex.set_bounds(NodeBounds(4000, frozenset({0, 1})))
    assert ex.update(write)
    assert (tmp_path / "cpu" / BE / "cpu.cfs_quota_us").read_text() == "300000"
