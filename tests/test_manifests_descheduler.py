"""manifests/descheduler as kubectl renders it: the Deployment runs `koord descheduler` with flags the CLI
knows, the mounted DeschedulerConfiguration parses, and the RBAC grants what the descheduler calls."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from app.descheduler.cli import DEFAULT_PORT, descheduler
from app.descheduler.config import parse_config

ROOT = Path(__file__).resolve().parents[1]
KUBECTL = shutil.which("kubectl")


@pytest.fixture(scope="module")
def docs():
    if KUBECTL is None:
        pytest.skip("kubectl (with kustomize) is not on PATH")
    out = subprocess.run(
        [KUBECTL, "kustomize", str(ROOT / "manifests" / "descheduler")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _one(docs, kind, name):
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def test_config_map_holds_a_valid_configuration(docs):
    cm = _one(docs, "ConfigMap", "koord-descheduler-config")
    cfg = parse_config(yaml.safe_load(cm["data"]["koord-descheduler-config.yaml"]))
    assert cfg.low_node_load is not None and cfg.migration_enabled
    assert cfg.descheduling_interval == 120


def test_deployment_flags_are_the_cli_options(docs):
    pod = _one(docs, "Deployment", "koord-descheduler")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "descheduler"
    known = {f"--{name.replace('_', '-')}" for name in descheduler.__annotations__ if name not in ("ctx", "return")}
    assert {a for a in args if a.startswith("--")} <= known
    config_path = args[args.index("--config") + 1]
    mount = container["volumeMounts"][0]["mountPath"]
    assert config_path.startswith(mount)
    assert container["ports"][0]["containerPort"] == DEFAULT_PORT == int(args[args.index("--port") + 1])
    assert not container["image"].endswith(":latest") and ":" in container["image"]


def test_rbac_grants_eviction_migration_and_the_lease(docs):
    role = _one(docs, "ClusterRole", "koord-descheduler")
    granted = {
        (g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert "create" in granted[("", "pods/eviction")]
    assert "delete" not in granted[("", "pods")]  # never deletes pods
    assert {"list", "watch"} <= granted[("slo.koordinator.sh", "nodemetrics")]
    assert {"list", "watch"} <= granted[("policy", "poddisruptionbudgets")]
    assert {"create", "delete"} <= granted[("scheduling.koordinator.sh", "reservations")]
    assert "patch" in granted[("scheduling.koordinator.sh", "podmigrationjobs/status")]
    lease = _one(docs, "Role", "koord-descheduler-leader-election")
    assert any(r.get("resourceNames") == ["koord-descheduler"] for r in lease["rules"])


def test_the_dry_run_example_runs_on_the_example_cluster():
    from typer.testing import CliRunner

    from app.cli.main import cli

    example = ROOT / "manifests" / "descheduler" / "dry-run-example.yaml"
    args = ["descheduler", "--cluster", str(ROOT / "examples" / "cluster"), "--config", str(example)]
    result = CliRunner().invoke(cli, [*args, "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.output
    report = yaml.safe_load(result.stdout)
    assert {n["name"]: n["class"] for n in report["nodes"]}["node-hot"] == "high"
