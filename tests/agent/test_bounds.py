"""Bad input never poisons state (agent): cgroup values are bounded at the executor, NodeSLOs are validated
on intake and a refused one keeps the last good spec. Fake cgroup trees; the real-cgroup cases are in
test_real_cgroups.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups import CgroupLayout
from agent.executor import CgroupExecutor, CgroupWrite
from agent.metrics import AgentMetrics
from agent.states.nodeslo import InvalidNodeSLO, NodeSLOIntake, merged_spec, spec_problems, validated_spec
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


# -- NodeSLO intake ---------------------------------------------------------------------------------


def slo(name: str = "node-1", **thresholds: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"resourceUsedThresholdWithBE": {"enable": True, **thresholds}}}


@pytest.mark.parametrize(
    ("thresholds", "field"),
    [
        ({"cpuSuppressThresholdPercent": 1000000}, "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent"),
        ({"cpuSuppressThresholdPercent": -1}, "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent"),
        ({"cpuSuppressMinPercent": 101}, "resourceUsedThresholdWithBE.cpuSuppressMinPercent"),
        ({"memoryEvictThresholdPercent": 250}, "resourceUsedThresholdWithBE.memoryEvictThresholdPercent"),
        ({"memoryEvictLowerPercent": 80}, "resourceUsedThresholdWithBE.memoryEvictLowerPercent"),  # >= default 70
        (
            {"cpuEvictBESatisfactionLowerPercent": 60, "cpuEvictBESatisfactionUpperPercent": 50},
            "resourceUsedThresholdWithBE.cpuEvictBESatisfactionLowerPercent",
        ),
        ({"cpuEvictBESatisfactionUpperPercent": 101}, "resourceUsedThresholdWithBE.cpuEvictBESatisfactionUpperPercent"),
        ({"cpuEvictTimeWindowSeconds": 0}, "resourceUsedThresholdWithBE.cpuEvictTimeWindowSeconds"),
        (
            {"memoryAllocatableEvictThresholdPercent": 10**20},
            "resourceUsedThresholdWithBE.memoryAllocatableEvictThresholdPercent",
        ),
    ],
)
def test_thresholds_outside_upstreams_ranges_are_named(thresholds: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidNodeSLO) as info:
        validated_spec(slo(**thresholds))
    assert field in [f for f, _ in info.value.problems]
    assert f"spec.{field}" in str(info.value)


def test_qos_burst_and_system_ranges_follow_the_validate_markers() -> None:
    """Ranges beyond resourceUsedThresholdWithBE; upstream's defaults and the edge values stay valid."""
    assert spec_problems(merged_spec(None)) == []
    edge = slo(
        cpuSuppressThresholdPercent=100,
        cpuSuppressMinPercent=0,
        memoryEvictThresholdPercent=100,
        memoryEvictLowerPercent=99,
        cpuEvictBESatisfactionLowerPercent=0,
        cpuEvictBESatisfactionUpperPercent=100,
        memoryAllocatableEvictThresholdPercent=110,
    )
    th = validated_spec(edge).resource_used_threshold_with_be
    assert th is not None and th.cpu_suppress_threshold_percent == 100
    spec = {
        "resourceQOSStrategy": {
            "beClass": {
                "memoryQOS": {"wmarkMinAdj": 51, "throttlingPercent": 120},
                "resctrlQOS": {"catRangeStartPercent": 40},  # above the default end 30
            },
            "lsClass": {"cpuQOS": {"groupIdentity": 3}},
        },
        "cpuBurstStrategy": {"cfsQuotaBurstPercent": 99, "cpuBurstPercent": 0},
        "systemStrategy": {"watermarkScaleFactor": 401},
    }
    with pytest.raises(InvalidNodeSLO) as info:
        validated_spec({"spec": spec})
    assert sorted(f for f, _ in info.value.problems) == sorted(
        [
            "resourceQOSStrategy.beClass.memoryQOS.wmarkMinAdj",
            "resourceQOSStrategy.beClass.memoryQOS.throttlingPercent",
            "resourceQOSStrategy.beClass.resctrlQOS.catRangeStartPercent",
            "resourceQOSStrategy.lsClass.cpuQOS.groupIdentity",
            "cpuBurstStrategy.cfsQuotaBurstPercent",
            "cpuBurstStrategy.cpuBurstPercent",
            "systemStrategy.watermarkScaleFactor",
        ]
    )


def test_a_refused_nodeslo_keeps_the_last_good_one_logs_and_counts_once(caplog: pytest.LogCaptureFixture) -> None:
    refused: list[str] = []
    intake = NodeSLOIntake(refused.append)
    good = intake.update(slo(cpuSuppressThresholdPercent=50, cpuSuppressPolicy="cfsQuota"))
    assert not intake.refused
    with caplog.at_level(logging.WARNING, logger="agent.states"):
        for _ in range(3):  # intake runs again whenever pods change: one log line, one count
            spec = intake.update(slo(cpuSuppressThresholdPercent=1000000))
    assert intake.refused and spec is good
    th = spec.resource_used_threshold_with_be
    assert th is not None and (th.cpu_suppress_threshold_percent, th.cpu_suppress_policy) == (50, "cfsQuota")
    assert refused == ["resourceUsedThresholdWithBE.cpuSuppressThresholdPercent"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "cpuSuppressThresholdPercent = 1000000 is outside [0, 100]" in lines[0], lines
    assert "node-1" in lines[0] and "last good" in lines[0]
    # malformed content is refused the same way
    assert intake.update(slo(cpuSuppressThresholdPercent="lots")) is good
    assert refused[-1] == "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent"
    # a good one replaces it; an absent NodeSLO means the defaults
    th = intake.update(slo(cpuSuppressThresholdPercent=40)).resource_used_threshold_with_be
    assert th is not None and th.cpu_suppress_threshold_percent == 40 and not intake.refused
    th = intake.update(None).resource_used_threshold_with_be
    assert th is not None and th.cpu_suppress_threshold_percent == 65


def test_a_first_nodeslo_that_is_refused_leaves_the_defaults() -> None:
    intake = NodeSLOIntake()
    th = intake.update(slo(cpuSuppressThresholdPercent=1000000)).resource_used_threshold_with_be
    assert th is not None and (th.enable, th.cpu_suppress_threshold_percent) == (False, 65)
    assert intake.refused
