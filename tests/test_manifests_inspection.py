"""Who can read what (issue 46): the ClusterRoles in manifests/base/inspection-rbac.yaml grant exactly what the
service's SubjectAccessReviews ask for every inspection path it serves, /metrics included, and the processes
that ask may create the reviews."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.server.app import create_app
from app.server.authz import request_attributes
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER
from tests.server.servekit import get_paths

ROOT = Path(__file__).resolve().parents[1]
RBAC = ROOT / "manifests" / "base" / "inspection-rbac.yaml"


def _docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def _rbac_allows(rules: list[dict[str, Any]], method: str, path: str) -> bool:
    """Whether ``rules`` allow what the service asks for ``method path``, with RBAC's matching (a trailing ``*``
    of a non-resource URL matches by prefix)."""
    attrs = request_attributes(method, path)
    for rule in rules:
        if attrs.verb not in rule["verbs"]:
            continue
        if attrs.is_resource_request:
            if attrs.group in rule.get("apiGroups", []) and attrs.resource in rule.get("resources", []):
                return True
        else:
            for url in rule.get("nonResourceURLs", []):
                if url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1])):
                    return True
    return False


@pytest.fixture(scope="module")
def served() -> list[str]:
    return get_paths(create_app(FileSource(EXAMPLE_CLUSTER, poll_interval=0)))


def test_the_inspector_role_grants_every_inspection_path(served: list[str]) -> None:
    rules = _one("ClusterRole", "koord-inspector")["rules"]
    inspection = [p for p in served if p != "/metrics"]
    assert len(inspection) > 15
    refused = [p for p in inspection if not _rbac_allows(rules, "GET", p)]
    assert refused == []
    assert _rbac_allows(rules, "POST", "/apis/v1/explain")
    assert not _rbac_allows(rules, "GET", "/metrics")  # metrics are koord-metrics-reader's
    for rule in rules:
        assert set(rule["verbs"]) <= {"get", "post"} and "*" not in rule.get("resources", []), rule


def test_the_metrics_reader_grants_metrics_only(served: list[str]) -> None:
    rules = _one("ClusterRole", "koord-metrics-reader")["rules"]
    assert rules == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert [p for p in served if _rbac_allows(rules, "GET", p)] == ["/metrics"]


def test_the_webhooks_may_ask_the_reviews() -> None:
    binding = _one("ClusterRoleBinding", "koord-webhooks:auth-delegator")
    assert binding["roleRef"]["name"] == "system:auth-delegator"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "koord-webhooks", "namespace": "koordinator-system"}
    ]


def test_port_forward_role_is_namespaced_and_narrow() -> None:
    role = _one("Role", "koord-inspector-port-forward")
    assert role["metadata"]["namespace"] == "koordinator-system"
    verbs = {(r["resources"][0], v) for r in role["rules"] for v in r["verbs"]}
    assert ("pods/portforward", "create") in verbs
    assert all(v in {"get", "list", "create"} for _, v in verbs)


def test_the_service_monitor_sends_prometheus_token() -> None:
    monitors = [d for d in yaml.safe_load_all((ROOT / "manifests/monitoring/servicemonitor.yaml").read_text()) if d]
    endpoint = next(d for d in monitors if d["kind"] == "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_the_docs_show_the_rbac_to_grant() -> None:
    text = (ROOT / "docs" / "deployment.md").read_text()
    section = text[text.index("## Who can read what") :]
    for name in ("koord-inspector", "koord-metrics-reader", "koord-inspector-port-forward", "system:auth-delegator"):
        assert name in section, name
    assert re.search(r"kubectl create clusterrolebinding .*--clusterrole[= ]koord-inspector", section)
