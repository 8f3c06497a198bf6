"""``koord sim whatif`` on the example cluster (examples/cluster), end to end through the CLI.

The cluster: node-idle (NodeMetric: 1.6 of 16 cpu used), node-busy (8 of 16), node-hot (12.8 of 16: 80 %),
node-nokoordlet (no NodeMetric). Two LoadAwareScheduling settings differ only in the cpu usage threshold:
A 65 %, B 90 %. A new LS pod of cpu request = limit 1 is estimated at 85 % of it (upstream's default
scaling factor): 0.85 cpu, 5.3125 % of node-hot. So on node-hot:

- under A, 80 % already exceeds 65 %: the two pods pinned to node-hot (nodeSelector) are refused by
  LoadAwareScheduling, as koord explain words it (``node(s) cpu usage exceed threshold``);
- under B, the first pinned pod fits (80 + 5.3125 = 85.3125 <= 90), the second does not (90.625 > 90).

Unpinned pods (cpu 2) go to node-idle under both (the least loaded node scores best under either), so
exactly one pod is placed differently: pin-hot-0, nowhere under A, node-hot under B.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.sim.kubefit import num_feasible_nodes_to_find
from tests.conftest import EXAMPLE_CLUSTER

WORKLOAD = """
pods:
  - name: pin-hot
    count: 2
    template:
      metadata: {labels: {koordinator.sh/qosClass: LS}}
      spec:
        nodeSelector: {kubernetes.io/hostname: node-hot}
        containers:
          - name: app
            resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}
  - name: web
    count: 3
    template:
      metadata: {labels: {koordinator.sh/qosClass: LS}}
      spec:
        containers:
          - name: app
            resources: {requests: {cpu: "2", memory: 2Gi}, limits: {cpu: "2", memory: 2Gi}}
"""
REFUSED = "LoadAwareScheduling: node(s) cpu usage exceed threshold"


def _config(path: Path, cpu: int) -> Path:
    path.write_text(
        f"pluginConfig:\n  - name: LoadAwareScheduling\n    args: {{usageThresholds: {{cpu: {cpu}, memory: 95}}}}\n"
    )
    return path


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    workload = tmp_path / "workload.yaml"
    workload.write_text(WORKLOAD)
    return _config(tmp_path / "strict.yaml", 65), _config(tmp_path / "loose.yaml", 90), workload


def test_two_loadaware_thresholds_place_the_predicted_pods_differently(
    inputs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    strict, loose, workload = inputs
    png = tmp_path / "whatif.png"
    args = ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER), "--config", str(strict), "--config", str(loose)]
    args += ["--workload", str(workload), "-o", "json", "--quiet", "--plot", str(png), "--jobs", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    a, b = body["configurations"]
    assert (a["name"], b["name"]) == ("strict", "loose")
    assert a["placements"] == {
        "default/pin-hot-0": None,
        "default/pin-hot-1": None,
        "default/web-0": "node-idle",
        "default/web-1": "node-idle",
        "default/web-2": "node-idle",
    }
    assert b["placements"] == {**a["placements"], "default/pin-hot-0": "node-hot"}
    assert (a["placed"], a["unschedulable"], b["placed"], b["unschedulable"]) == (3, 2, 4, 1)
    assert a["unschedulableByReason"] == {REFUSED: 2}
    assert b["unschedulableByReason"] == {REFUSED: 1}
    assert body["changed"] == [{"pod": "default/pin-hot-0", "nodes": {"strict": None, "loose": "node-hot"}}]
    # node-hot reports 80 % cpu: over A's threshold, under B's even with the pod B placed there (85.3125 %)
    assert a["estimated"]["nodesOverThreshold"] == 1 and b["estimated"]["nodesOverThreshold"] == 0
    assert a["estimated"]["cpu"]["max"] == 80.0 and b["estimated"]["cpu"]["max"] == 85.31
    assert a["estimated"]["thresholds"]["cpu"] == 65 and b["estimated"]["thresholds"]["cpu"] == 90
    assert a["estimated"]["nodesWithMetric"] == 3
    # requested: node-hot holds 8 of 16 cpu, plus 1 under B
    assert a["requested"]["cpu"]["max"] == 50.0 and b["requested"]["cpu"]["max"] == 56.25
    assert a["gpu"] == {"gpus": 0, "allocatedPercent": None, "fragmentedFreePercent": None}
    assert a["gangs"] == {"planned": 0, "completed": 0, "failed": 0}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_table_names_the_pods_placed_differently(inputs: tuple[Path, Path, Path]) -> None:
    strict, loose, workload = inputs
    args = ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER), "--config", str(strict), "--config", str(loose)]
    result = CliRunner().invoke(cli, [*args, "--workload", str(workload), "--quiet", "--jobs", "1"])
    assert result.exit_code == 0, result.output
    assert "Pods placed differently" in result.output
    row = next(line for line in result.output.splitlines() if "default/pin-hot-0" in line)
    assert "node-hot" in row and "-" in row
    assert "nodes over LoadAware threshold" in result.output


def test_pending_pods_of_the_snapshot(inputs: tuple[Path, Path, Path]) -> None:
    """The example's one pending pod (batch-job-1, a BE pod asking batch-cpu 2000) goes to the node with
    the most batch-cpu free under both settings (LoadAware filters by cpu usage only for prod pods' cpu)."""
    strict, loose, _ = inputs
    args = ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER), "--config", str(strict), "--config", str(loose)]
    result = CliRunner().invoke(cli, [*args, "--pending", "-o", "json", "--quiet", "--jobs", "1"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    a, b = body["configurations"]
    assert list(a["placements"]) == ["batch/batch-job-1"]
    assert a["placements"] == b["placements"] and a["placed"] == 1
    assert body["changed"] == []


def test_a_gang_and_a_quota_from_the_workload(tmp_path: Path) -> None:
    """A gang of 3 that fits completes; a gang of 3 pinned to node-hot cannot (LoadAware refuses node-hot
    at 65 %): its first member fails and the others are not tried; a gang whose second member fits nowhere
    loses its first one too (the Coscheduling plugin's all or nothing)."""
    workload = tmp_path / "w.yaml"
    workload.write_text(
        """
pods:
  - name: train
    count: 3
    gang: 3
    template:
      spec:
        containers: [{name: t, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  - name: stuck
    count: 3
    gang: 3
    template:
      spec:
        nodeSelector: {kubernetes.io/hostname: node-hot}
        containers: [{name: t, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  - name: big
    count: 2
    gang: 2
    template:
      metadata: {annotations: {gang.scheduling.koordinator.sh/waiting-time: 2s}}
      spec:
        containers: [{name: t, resources: {requests: {cpu: "1", memory: 50Gi}}}]
"""
    )
    cfg = _config(tmp_path / "a.yaml", 65)
    args = ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER), "--config", str(cfg), "--config", str(cfg)]
    result = CliRunner().invoke(cli, [*args, "--workload", str(workload), "-o", "json", "--quiet", "--jobs", "1"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    first, second = body["configurations"]
    assert (first["name"], second["name"]) == ("a", "a#2")
    assert first["gangs"] == {"planned": 3, "completed": 1, "failed": 2}
    assert first["placed"] == 3 and all(first["placements"][f"default/train-{i}"] for i in range(3))
    # all or nothing: big-0 fits node-idle (57Gi of memory free) and waits at Permit; big-1 fits no node
    # (kube-scheduler refuses it, the extender is not asked), so big-0 is rejected when its 2s wait ends
    # (its /bind answers an error) and neither is placed
    assert first["placements"]["default/big-0"] is None and first["placements"]["default/big-1"] is None
    reasons = first["unschedulableByReason"]
    assert reasons[REFUSED] == 1
    assert reasons["Coscheduling: not tried, an earlier member of its gang failed"] == 2  # stuck-1, stuck-2
    assert reasons["NodeResourcesFit: Insufficient memory"] == 1
    assert [r for r in reasons if r.startswith("bind: ")], reasons
    assert body["changed"] == []  # identical configurations, identical seed: identical placements


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-o", "xml"], "-o/--output: expected one of table, json, got 'xml'"),
        (["--pending", "--workload", "w.yaml"], "--pending and --workload exclude each other"),
        (["--workload", "missing.yaml"], "cannot read"),
        (["--config", "bad.yaml", "--config", "bad.yaml"], "invalid config"),
    ],
)
def test_bad_inputs_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    (tmp_path / "bad.yaml").write_text("plugins: [{name: NoSuchPlugin}]\n")
    result = CliRunner().invoke(cli, ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER), *extra])
    assert result.exit_code == 2
    assert message in result.output.replace("\n", "")


def test_bad_workload_names_the_entry(tmp_path: Path) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text("pods:\n  - {name: x, count: 0, template: {spec: {containers: [{name: c}]}}}\n")
    cfg = _config(tmp_path / "a.yaml", 65)
    args = ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER), "--config", str(cfg), "--config", str(cfg)]
    result = CliRunner().invoke(cli, [*args, "--workload", str(workload)])
    assert result.exit_code == 2
    assert "--workload: pods[0]: count: expected a positive integer, got 0" in result.output.replace("\n", "")


def test_without_config_the_snapshot_must_hold_one() -> None:
    result = CliRunner().invoke(cli, ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER)])
    assert result.exit_code == 2
    assert "holds no plugin configuration" in result.output.replace("\n", "")


def test_koord_sim_keeps_its_replay_and_points_to_whatif() -> None:
    runner = CliRunner()
    sim_help = runner.invoke(cli, ["sim", "--help"], env={"COLUMNS": "120"})
    assert sim_help.exit_code == 0 and "--nodes" in sim_help.output and "koord sim whatif --help" in sim_help.output
    whatif_help = runner.invoke(cli, ["sim", "whatif", "--help"], env={"COLUMNS": "120"})
    assert (
        whatif_help.exit_code == 0
        and "sim whatif [OPTIONS]" in whatif_help.output
        and "--workload" in whatif_help.output
    )
    for python_name in ("<str>", "<bool>", "<int>", "<Path>", "<path>"):
        assert python_name not in whatif_help.output
    # the replay's own options, parsed as before: an option without its value is a usage error naming it
    missing = runner.invoke(cli, ["sim", "--nodes"])
    assert missing.exit_code == 2 and "--nodes" in missing.output


def test_scheduler_name_selects_the_pending_pods(inputs: tuple[Path, Path, Path]) -> None:
    """batch-job-1 names no scheduler (default-scheduler): not placed when only koord-scheduler's pods are."""
    strict, loose, _ = inputs
    args = ["sim", "whatif", "--cluster", str(EXAMPLE_CLUSTER), "--config", str(strict), "--config", str(loose)]
    args += ["--pending", "-o", "json", "--quiet", "--jobs", "1"]
    only_koord = CliRunner().invoke(cli, [*args, "--scheduler-name", "koord-scheduler"])
    assert only_koord.exit_code == 0, only_koord.output
    assert [c["pods"] for c in json.loads(only_koord.stdout)["configurations"]] == [0, 0]
    default = CliRunner().invoke(cli, [*args, "--scheduler-name", "default-scheduler"])
    assert [c["pods"] for c in json.loads(default.stdout)["configurations"]] == [1, 1]


@pytest.mark.parametrize(
    ("nodes", "percentage", "expected"),
    [(50, 0, 50), (150, 0, 100), (1000, 0, 420), (5000, 0, 500), (10000, 0, 500), (5000, 100, 5000), (5000, 1, 100)],
)
def test_kube_scheduler_looks_for_so_many_feasible_nodes(nodes: int, percentage: int, expected: int) -> None:
    """``numFeasibleNodesToFind``: all below 100 nodes, else 50 - nodes/125 percent (at least 5), at least 100."""
    assert num_feasible_nodes_to_find(nodes, percentage) == expected


def test_malformed_cluster_files_exit_2_naming_the_file(tmp_path: Path, inputs: tuple[Path, Path, Path]) -> None:
    strict, loose, _ = inputs
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    for source in EXAMPLE_CLUSTER.glob("*.yaml"):
        (cluster / source.name).write_text(source.read_text())
    (cluster / "broken.yaml").write_text("kind: [\n")
    args = ["sim", "whatif", "--cluster", str(cluster), "--config", str(strict), "--config", str(loose), "--quiet"]
    result = CliRunner().invoke(cli, [*args, "--jobs", "1"])
    assert result.exit_code == 2
    assert f"--cluster: {cluster / 'broken.yaml'}:2: not valid YAML" in result.output.replace("\n", "")
    assert "Traceback" not in result.output
