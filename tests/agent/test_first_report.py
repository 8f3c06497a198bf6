"""The first NodeMetric is written on the first tick with node usage, not a report interval (60 s) later."""

from __future__ import annotations

from pathlib import Path

from agent.cgroups import CgroupLayout
from agent.daemon import Agent, AgentConfig
from agent.evictor import RecordingEvictor
from agent.reporter import FileMetricWriter
from agent.states.providers import FileStates


def test_first_nodemetric_within_two_ticks_of_start(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    (cluster / "objects.yaml").write_text("")
    root = tmp_path / "cg"
    (root / "cpu" / "kubepods").mkdir(parents=True)
    config = AgentConfig(node_name="n1", interval=1.0, states_interval=0, report_interval=60.0, features=set())
    writer = FileMetricWriter(tmp_path / "metrics")
    agent = Agent(
        config,
        CgroupLayout.detect(root, "kubepods"),
        FileStates("n1", cluster),
        writer,
        RecordingEvictor("n1", tmp_path / "events.jsonl", True),
    )
    t0 = 1_000_000.0
    for i in range(3):  # node cpu needs two /proc/stat samples: the report comes on the second tick at the latest
        agent.tick(t0 + i)
        if agent.reports:
            break
    assert agent.reports == 1 and i <= 1
    assert writer.path("n1").is_file()
    agent.tick(t0 + 5)  # then every report interval, not every tick
    assert agent.reports == 1
