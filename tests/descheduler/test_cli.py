"""``koord descheduler`` end to end on cluster files: one round, dry-run writes nothing, bad config exits 2."""

import asyncio
import contextlib
import json

import yaml
from typer.testing import CliRunner

from app.cli.main import cli
from app.descheduler.cli import run
from app.descheduler.config import parse_config
from app.sources.files import FileSource

from .builders import OWNER

CONFIG = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "profiles": [
        {
            "name": "koord-descheduler",
            "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
            "pluginConfig": [
                {
                    "name": "LowNodeLoad",
                    "args": {
                        "highThresholds": {"cpu": 70},
                        "lowThresholds": {"cpu": 30},
                        "anomalyCondition": {"consecutiveAbnormalities": 1},
                    },
                }
            ],
        }
    ],
}
STAMP = {"koordinator-py.io/stamp-update-time": "true"}


def _cluster(tmp_path):
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n},
            "status": {"allocatable": {"cpu": "10", "memory": "64Gi", "pods": "110"}},
        }
        for n in ("hot", "cold")
    ]
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}", "ownerReferences": OWNER},
            "spec": {"nodeName": "hot", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }
        for i in range(4)
    ]
    metrics = [
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "hot", "annotations": STAMP},
            "status": {
                "nodeMetric": {"systemUsage": {"resources": {"cpu": "1"}}},
                "podsMetric": [
                    {"namespace": "default", "name": f"p{i}", "podUsage": {"resources": {"cpu": "2"}}} for i in range(4)
                ],
            },
        },
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "cold", "annotations": STAMP},
            "status": {"nodeMetric": {"systemUsage": {"resources": {"cpu": "1"}}}, "podsMetric": []},
        },
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([*nodes, *pods, *metrics]))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    return tmp_path / "cluster.yaml", cfg


def _round(tmp_path, dry_run):
    cluster, _ = _cluster(tmp_path)
    source = FileSource(cluster, poll_interval=0, kinds=("Node", "Pod", "NodeMetric"))
    report = asyncio.run(run(parse_config(CONFIG), source, dry_run=dry_run, interval=0))
    return report, source


def test_dry_run_writes_nothing(tmp_path):
    report, source = _round(tmp_path, dry_run=True)
    assert report["dryRun"] is True
    assert [(e["node"], e["target"]) for e in report["evictions"]] == [("hot", "cold")]
    assert source.evictions == []
    assert "evicted" not in report["evictions"][0]


def test_a_real_round_evicts_through_the_source(tmp_path):
    report, source = _round(tmp_path, dry_run=False)
    assert [e["name"] for e in source.evictions] == [report["evictions"][0]["pod"].split("/")[1]]
    assert report["evictions"][0]["evicted"] is True
    assert source.evictions[0]["reason"].startswith("node is overutilized, node cpu usage(90.00%)")


def test_cli_dry_run_json(tmp_path):
    cluster, cfg = _cluster(tmp_path)
    result = CliRunner().invoke(
        cli, ["descheduler", "--cluster", str(cluster), "--config", str(cfg), "--dry-run", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    classes = {n["name"]: n["class"] for n in report["nodes"]}
    assert classes == {"hot": "high", "cold": "bothLow"}
    assert report["evictions"][0]["target"] == "cold"


def test_cli_bad_config_exits_2_naming_the_field(tmp_path):
    cluster, cfg = _cluster(tmp_path)
    bad = json.loads(json.dumps(CONFIG))
    bad["profiles"][0]["pluginConfig"][0]["args"]["lowThresholds"] = {"cpu": 90}
    cfg.write_text(yaml.safe_dump(bad))
    result = CliRunner().invoke(cli, ["descheduler", "--cluster", str(cluster), "--config", str(cfg)])
    assert result.exit_code == 2
    assert "profiles[0].pluginConfig[0].args.lowThresholds[cpu]" in result.output
    result = CliRunner().invoke(cli, ["descheduler", "--cluster", str(cluster)])
    assert result.exit_code == 2 and "--config" in result.output


def test_explain_from_a_saved_round(tmp_path):
    report, _ = _round(tmp_path, dry_run=True)
    saved = tmp_path / "round.json"
    saved.write_text(json.dumps(report))
    result = CliRunner().invoke(cli, ["descheduler", "explain", "--from", str(saved)])
    assert result.exit_code == 0, result.output
    assert "hot" in result.output and "evict default/" in result.output
    result = CliRunner().invoke(cli, ["descheduler", "explain", "--from", str(saved), "-o", "json"])
    assert json.loads(result.stdout)["evictions"] == report["evictions"]


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_interval_mode_serves_metrics_healthz_and_explain(tmp_path):
    import httpx

    cluster, _ = _cluster(tmp_path)
    port = _free_port()
    seen = {}

    async def go():
        source = FileSource(cluster, poll_interval=0, kinds=("Node", "Pod", "NodeMetric"))
        task = asyncio.create_task(
            run(parse_config(CONFIG), source, dry_run=True, interval=0.3, host="127.0.0.1", port=port, rounds=20)
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            await asyncio.sleep(0.05)
            try:
                explain = await asyncio.to_thread(httpx.get, f"{base}/explain", timeout=2)
            except httpx.HTTPError:
                continue
            if explain.status_code == 200:
                seen["explain"] = explain.json()
                seen["healthz"] = (await asyncio.to_thread(httpx.get, f"{base}/healthz", timeout=2)).status_code
                seen["metrics"] = (await asyncio.to_thread(httpx.get, f"{base}/metrics", timeout=2)).text
                break
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert seen["healthz"] == 200
    assert seen["explain"]["evictions"][0]["node"] == "hot"
    assert 'koord_descheduler_nodes{class="high"} 1.0' in seen["metrics"]
    assert "koord_descheduler_round_duration_seconds_count" in seen["metrics"]


def test_migration_controller_turns_evictions_into_jobs(tmp_path):
    cluster, _ = _cluster(tmp_path)
    cfg = json.loads(json.dumps(CONFIG))
    cfg["profiles"][0]["plugins"]["evict"] = {"enabled": [{"name": "MigrationController"}]}
    config = parse_config(cfg)
    assert config.migration_enabled and config.migration.default_job_mode == "ReservationFirst"

    async def go():
        source = FileSource(cluster, poll_interval=0, kinds=("Node", "Pod", "NodeMetric", "PodMigrationJob"))
        report = await run(config, source, dry_run=False, interval=0)
        return report, source

    report, source = asyncio.run(go())
    assert source.evictions == []  # the job evicts, once its reservation is Available
    name = report["evictions"][0]["podMigrationJob"]
    job = source._objects["PodMigrationJob"][name]
    assert job["spec"]["mode"] == "ReservationFirst" and job["spec"]["podRef"]["name"].startswith("p")


def test_the_drain_controller_runs_between_rounds_when_enabled(tmp_path):
    cluster, _ = _cluster(tmp_path)
    docs = list(yaml.safe_load_all(cluster.read_text()))
    docs.append({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "DrainNode", "metadata": {"name": "d"},
                 "spec": {"nodeName": "cold", "confirmState": "Confirmed"}})  # fmt: skip
    cluster.write_text(yaml.safe_dump_all(docs))
    cfg = json.loads(json.dumps(CONFIG))
    cfg["profiles"][0]["plugins"]["evict"] = {
        "enabled": [{"name": "MigrationController"}, {"name": "DrainNodeController"}]
    }
    config = parse_config(cfg)
    kinds = ("Node", "Pod", "NodeMetric", "PodMigrationJob", "Reservation", "DrainNode")

    async def go():
        source = FileSource(cluster, poll_interval=0.05, kinds=kinds)
        await run(config, source, dry_run=True, interval=0.01, rounds=1)  # dry run: no controller runs
        untouched = json.loads(json.dumps(source._objects["DrainNode"]["d"]))
        source = FileSource(cluster, poll_interval=0.05, kinds=kinds)
        await run(config, source, dry_run=False, interval=0.6, rounds=2)  # two controller passes
        return untouched, source

    untouched, source = asyncio.run(go())
    assert "status" not in untouched
    assert source._objects["DrainNode"]["d"]["status"]["phase"] in ("Running", "Complete")
    assert source._objects["Node"]["cold"]["spec"]["unschedulable"] is True
