"""``koord descheduler`` end to end on cluster files: one round, dry-run writes nothing, bad config exits 2."""

import asyncio
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
