"""Static checks of the colocation control plane manifests: webhook configurations, the manager
Deployment and RBAC, and the slo-controller ConfigMap with upstream's defaults (manifests/base, file by file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.manager.colocation import DEFAULT_COLOCATION_STRATEGY, parse_colocation_config
from app.manager.controllers import CONFIG_NAME, CONFIG_NAMESPACE
from app.manager.sloconfig import DEFAULT_CPU_BURST, DEFAULT_SYSTEM, DEFAULT_THRESHOLD, SLOConfig, parse_slo_config
from webhooks.registry import all_webhooks

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests" / "base"
NS = "koordinator-system"
#: The Service in front of the webhooks Deployment.
SERVICE = "koord-webhooks"


def _docs() -> list[dict[str, Any]]:
    files = [p for p in sorted(MANIFESTS.glob("*.yaml")) if p.name != "kustomization.yaml"]
    return [d for p in files for d in yaml.safe_load_all(p.read_text()) if d]


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def _allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


WEBHOOK_PATHS = {
    ("MutatingWebhookConfiguration", "/mutate-pod"): ("", "pods", ["CREATE"]),
    ("ValidatingWebhookConfiguration", "/validate-pod"): ("", "pods", ["CREATE", "UPDATE"]),
    ("MutatingWebhookConfiguration", "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"): (
        "scheduling.sigs.k8s.io",
        "elasticquotas",
        ["CREATE"],
    ),
    ("ValidatingWebhookConfiguration", "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"): (
        "scheduling.sigs.k8s.io",
        "elasticquotas",
        ["CREATE", "UPDATE", "DELETE"],
    ),
    ("ValidatingWebhookConfiguration", "/validate-scheduling-koordinator-sh-v1alpha1-reservation"): (
        "scheduling.koordinator.sh",
        "reservations",
        ["CREATE", "UPDATE"],
    ),
}


def test_webhook_configurations() -> None:
    seen = {}
    for kind, name in (
        ("MutatingWebhookConfiguration", "koord-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "koord-validating-webhook-configuration"),
    ):
        cfg = _one(kind, name)
        assert cfg["apiVersion"] == "admissionregistration.k8s.io/v1"
        for hook in cfg["webhooks"]:
            svc = hook["clientConfig"]["service"]
            assert (svc["name"], svc["namespace"], svc["port"]) == (SERVICE, NS, 9876)
            assert "url" not in hook["clientConfig"]
            # As upstream's kubebuilder markers: failurePolicy=fail, no timeout (= the v1 default, 10 s).
            assert hook["failurePolicy"] == "Fail"
            assert hook["timeoutSeconds"] == 10
            assert hook["sideEffects"] == "None"
            assert hook["admissionReviewVersions"] == ["v1"]
            (rule,) = hook["rules"]
            seen[(kind, svc["path"])] = (rule["apiGroups"][0], rule["resources"][0], rule["operations"])
            if rule["resources"] == ["pods"]:
                # The service and the control plane can always start, whatever the webhook's state.
                (expr,) = hook["namespaceSelector"]["matchExpressions"]
                assert expr["operator"] == "NotIn" and {"kube-system", NS} <= set(expr["values"])
            if kind == "MutatingWebhookConfiguration":
                assert hook.get("reinvocationPolicy", "Never") == "Never"
    assert seen == WEBHOOK_PATHS


def test_served_paths_match_the_configurations() -> None:
    served = {h.path for h in all_webhooks()}
    assert {"/mutate-pod", "/validate-pod"} <= served
    assert served <= {p for _, p in WEBHOOK_PATHS}


def test_priority_classes_are_the_koordinator_bands() -> None:
    for name, value in (("koord-prod", 9000), ("koord-mid", 7000), ("koord-batch", 5000), ("koord-free", 3000)):
        assert _one("PriorityClass", name)["value"] == value


def test_slo_controller_config_holds_upstream_defaults() -> None:
    cm = _one("ConfigMap", CONFIG_NAME)
    assert cm["metadata"]["namespace"] == CONFIG_NAMESPACE
    data = cm["data"]
    assert set(data) == {
        "colocation-config",
        "resource-threshold-config",
        "resource-qos-config",
        "cpu-burst-config",
        "system-config",
    }
    assert parse_colocation_config(data["colocation-config"]).strategy == DEFAULT_COLOCATION_STRATEGY
    assert json.loads(data["colocation-config"]) == DEFAULT_COLOCATION_STRATEGY
    cfg, errors = parse_slo_config(data, SLOConfig())
    assert errors == []
    assert cfg.parts["resource-threshold-config"].cluster == DEFAULT_THRESHOLD
    assert cfg.parts["cpu-burst-config"].cluster == DEFAULT_CPU_BURST
    assert cfg.parts["system-config"].cluster == DEFAULT_SYSTEM
    assert cfg.parts["resource-qos-config"].cluster == {}


def test_manager_deployment() -> None:
    dep = _one("Deployment", "koord-manager")
    assert dep["metadata"]["namespace"] == NS
    assert dep["spec"]["replicas"] == 1  # the base; production runs 2 (leader election: a warm standby)
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "koord-manager"
    (c,) = pod["containers"]
    assert c["args"][0] == "manager"
    assert "--leader-elect" in c["args"]
    lease = c["args"][c["args"].index("--lease-name") + 1]
    assert c["args"][c["args"].index("--lease-namespace") + 1] == NS
    assert lease == "koordinator-manager"
    assert {e["name"] for e in c["env"]} >= {"POD_NAME"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    port = int(c["args"][c["args"].index("--port") + 1])
    assert c["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


@pytest.fixture(scope="module")
def manager_rules() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return _one("ClusterRole", "koord-manager")["rules"], _one("Role", "koord-manager")["rules"]


def test_manager_rbac(manager_rules: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    cluster, ns = manager_rules
    for verb in ("get", "list", "watch"):
        assert _allows(cluster, "", "nodes", verb)
        assert _allows(cluster, "", "pods", verb)
        assert _allows(cluster, "slo.koordinator.sh", "nodemetrics", verb)
        assert _allows(cluster, "config.koordinator.sh", "clustercolocationprofiles", verb)
        assert _allows(cluster, "scheduling.k8s.io", "priorityclasses", verb)
        assert _allows(cluster, "", "namespaces", verb)
        assert _allows(ns, "", "configmaps", verb)
    assert _allows(cluster, "", "nodes/status", "patch")
    assert _allows(cluster, "", "nodes", "patch")  # the GPU labels of the node's Device (gpudeviceresource)
    assert not _allows(cluster, "", "nodes", "update")
    for verb in ("get", "list", "watch"):
        assert _allows(cluster, "scheduling.koordinator.sh", "devices", verb)
    assert not _allows(cluster, "scheduling.koordinator.sh", "devices", "update")
    for verb in ("get", "list", "watch", "create", "update", "patch"):
        assert _allows(cluster, "slo.koordinator.sh", "nodeslos", verb)
    for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for verb in ("get", "patch"):
            assert _allows(cluster, "admissionregistration.k8s.io", resource, verb)
    for verb in ("get", "create", "update"):
        assert _allows(ns, "coordination.k8s.io", "leases", verb)
    for r in cluster:
        assert "*" not in r["verbs"] + r["resources"] + r["apiGroups"]
        assert "configmaps" not in r["resources"] and "leases" not in r["resources"] and "secrets" not in r["resources"]
        assert "delete" not in r["verbs"]
    binding = _one("ClusterRoleBinding", "koord-manager")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "koord-manager", "namespace": NS}]
    rb = _one("RoleBinding", "koord-manager")
    assert rb["roleRef"]["kind"] == "Role" and rb["subjects"] == binding["subjects"]


def test_extender_rbac_writes_pods_and_reads_profiles() -> None:
    rules = _one("ClusterRole", "koord-scheduler-extender")["rules"]
    assert _allows(rules, "", "pods", "patch")  # DeviceShare writes scheduling.koordinator.sh/device-allocated
    assert _allows(rules, "", "pods/eviction", "create")  # ElasticQuota reclaim
    for verb in ("get", "list", "watch"):
        assert _allows(rules, "", "namespaces", verb)
        assert _allows(rules, "scheduling.k8s.io", "priorityclasses", verb)
        assert _allows(rules, "config.koordinator.sh", "clustercolocationprofiles", verb)
