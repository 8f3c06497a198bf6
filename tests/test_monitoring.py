"""manifests/monitoring: every Grafana query names a metric the code exports (taken from the real
registries of the service, the manager and the agent), and the kustomization renders."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent.metrics import AgentMetrics
from app.cache.snapshot import ClusterCache
from app.manager.controllers import SLOControllers
from app.server.app import build_state
from app.sources.files import FileSource

MONITORING = Path(__file__).resolve().parents[1] / "manifests" / "monitoring"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
#: Names in a query that are ours or prometheus_client's (PromQL functions and labels are not).
OURS = re.compile(r"\b((?:koord|koordlet|process|python)_[a-zA-Z0-9_]+)\b")


def exported(registry: CollectorRegistry) -> set[str]:
    """Every series name ``registry`` can expose (a labelled metric without samples yet included)."""
    names: set[str] = set()
    for family in registry.collect():
        names |= {family.name + s for s in SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def all_exported(tmp_path: Path) -> set[str]:
    cache = ClusterCache()
    names = exported(build_state(FileSource(tmp_path)).metrics.registry)  # every default plugin's series too
    names |= exported(AgentMetrics().registry)
    manager = CollectorRegistry()
    SLOControllers(cache, FileSource(tmp_path), registry=manager)
    return names | exported(manager)


def queries() -> list[tuple[str, str]]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [(panel["title"], t["expr"]) for panel in dashboard["panels"] for t in panel["targets"]]


def test_every_query_names_an_exported_metric(tmp_path: Path) -> None:
    names = all_exported(tmp_path)
    assert "koord_extender_requests_total" in names and "koordlet_pod_eviction_total" in names  # the check checks
    assert "koord_extender_requests_created" not in names
    found = queries()
    assert len(found) >= 10
    for title, expr in found:
        used = OURS.findall(expr)
        assert used, f"{title}: names none of our metrics: {expr}"
        for name in used:
            assert name in names, f"{title}: {name} is not exported by the code"


def test_dashboard_has_the_panels_operators_asked_for() -> None:
    titles = " ".join(title.lower() for title, _ in queries())
    for topic in (
        "latency",
        "errors",
        "filter rejections",
        "node cpu usage",
        "elasticquota",
        "be suppression",
        "evictions",
    ):
        assert topic in titles, topic


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize) is not on PATH")
def test_kustomization_renders() -> None:
    out = subprocess.run(
        ["kubectl", "kustomize", str(MONITORING)], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert kinds == {
        ("ServiceMonitor", "koord-webhooks"),
        ("PodMonitor", "koord-agent"),
        ("ConfigMap", "koordinator-py-dashboard"),
    }
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["grafana-dashboard.json"])["uid"] == "koordinator-py"
