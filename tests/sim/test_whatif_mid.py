"""``koord sim whatif --mid-tier``: the same Mid pods without and with the nodes' Mid resources.

Two 16-core nodes fully requested by prod; their agents report prodReclaimableMetric: node-a 6.5 cores / 16 GiB,
node-b 2.5 cores / 4 GiB. Five Mid pods of 2 cores / 2 GiB: without the Mid tier no node has mid-cpu, none fits;
with it node-a takes 3 (6500 // 2000) and node-b 1 (2500 // 2000), the fifth stays pending.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from app.cli.main import cli
from app.cli.midtier import write_mid_resources
from app.framework.config import default_config
from app.plugins.registry import default_registry
from app.sim.whatif import Configuration, RunOptions, run_whatif
from app.sim.whatifworkload import load_workload

STAMP = {"koordinator-py.io/stamp-update-time": "true"}


def _node(name: str) -> dict[str, Any]:
    res = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": res, "allocatable": res},
    }


def _prod(name: str, node: str) -> dict[str, Any]:
    res = {"cpu": "16", "memory": "32Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",  # long running: its usage is in the NodeMetric
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
        "status": {
            "phase": "Running",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ],
        },
    }


def _metric(node: str, pod: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": node, "annotations": STAMP},
        "status": {
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "2", "memory": "24Gi"}}},
            "podsMetric": [
                {
                    "namespace": "default",
                    "name": pod,
                    "priority": "koord-prod",
                    "podUsage": {"resources": {"cpu": "2", "memory": "24Gi"}},
                }
            ],
            "prodReclaimableMetric": {"resource": {"resources": {"cpu": cpu, "memory": memory}}},
        },
    }


WORKLOAD = """
pods:
  - name: mid
    count: 5
    template:
      metadata: {labels: {koordinator.sh/qosClass: LS, koordinator.sh/priority-class: koord-mid}}
      spec:
        containers:
          - name: app
            resources:
              requests: {kubernetes.io/mid-cpu: "2000", kubernetes.io/mid-memory: 2Gi}
              limits: {kubernetes.io/mid-cpu: "2000", kubernetes.io/mid-memory: 2Gi}
"""


def test_mid_tier_shows_how_many_more_pods_fit(tmp_path: Path) -> None:
    """The engine as ``--mid-tier`` drives it: the same configuration without and with the prepare step."""
    cluster = tmp_path / "snap"
    cluster.mkdir()
    objs = [
        _node("node-a"),
        _node("node-b"),
        _prod("web-a", "node-a"),
        _prod("web-b", "node-b"),
        _metric("node-a", "web-a", "6500m", "16Gi"),
        _metric("node-b", "web-b", "2500m", "4Gi"),
    ]
    (cluster / "objects.yaml").write_text(yaml.safe_dump_all(objs))
    (tmp_path / "workload.yaml").write_text(WORKLOAD)
    created = load_workload(tmp_path / "workload.yaml")
    plain = [Configuration("plain", default_config(default_registry().names()))]
    off = run_whatif(cluster, plain, created, RunOptions()).configurations[0].to_json()
    mid = [Configuration("plain+mid", plain[0].config)]
    on = run_whatif(cluster, mid, created, RunOptions(prepare=write_mid_resources)).configurations[0].to_json()
    assert off["placed"] == 0 and off["unschedulableByReason"] == {
        "NodeResourcesFit: Insufficient kubernetes.io/mid-cpu, Insufficient kubernetes.io/mid-memory": 5
    }
    assert on["placed"] == 4, on["unschedulableByReason"]
    placed = [n for n in on["placements"].values() if n]
    assert placed.count("node-a") == 3 and placed.count("node-b") == 1
    assert on["unschedulableByReason"] == {"NodeResourcesFit: Insufficient kubernetes.io/mid-cpu": 1}


def test_the_cli_offers_the_mid_tier() -> None:
    result = CliRunner().invoke(cli, ["sim", "whatif", "--help"], terminal_width=200)
    assert result.exit_code == 0 and "--mid-tier" in result.output
