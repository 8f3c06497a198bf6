"""Static checks of the deployment files: manifests/, docker-compose.yml and the Dockerfile.

Nothing here needs a cluster or a container engine. The checks pin the facts that the Python code and
the YAML must agree on (API coordinates from ``app.api.kinds.KINDS``, the port, the extender verbs, the
CLI flags, the RBAC the service needs) and the structural-schema rules the API server enforces on CRDs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from app.api.kinds import KINDS

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
NAMESPACE = "koordinator-system"
PORT = 9876
SERVICE = "koord-scheduler-extender"
TLS_SECRET = "koord-scheduler-extender-tls"

# Every flag of `koord scheduler`.
SCHEDULER_FLAGS = {
    "--cluster",
    "--kubeconfig",
    "--config",
    "--host",
    "--port",
    "--tls-cert-file",
    "--tls-private-key-file",
}

CORE_KINDS = {"Node", "Pod", "ConfigMap", "Namespace", "PriorityClass"}
CRD_KINDS = sorted(k for k in KINDS if k not in CORE_KINDS)
# Kinds whose upstream CRD has a status subresource (kubebuilder:subresource:status).
WITH_STATUS_SUBRESOURCE = {
    "NodeMetric",
    "NodeSLO",
    "Reservation",
    "PodMigrationJob",
    "ClusterColocationProfile",
}

# LoadAwareScheduling defaults (pkg/scheduler/apis/config/v1/defaults.go), written out in 21-config.yaml.
LOAD_AWARE_DEFAULTS = {
    "filterExpiredNodeMetrics": True,
    "nodeMetricExpirationSeconds": 180,
    "enableScheduleWhenNodeMetricsExpired": False,
    "resourceWeights": {"cpu": 1, "memory": 1},
    "usageThresholds": {"cpu": 65, "memory": 95},
    "estimatedScalingFactors": {"cpu": 85, "memory": 70},
}

NAMESPACED_BUILTINS = {
    "ServiceAccount",
    "Deployment",
    "Service",
    "ConfigMap",
    "Role",
    "RoleBinding",
    "Secret",
}
PRINTER_COLUMN_TYPES = {"integer", "number", "string", "boolean", "date"}

Docs = list[tuple[Path, dict[str, Any]]]


# ------------------------------------------------------------ loading


def _load_docs(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def _manifest_files() -> list[Path]:
    return sorted(MANIFESTS.rglob("*.yaml")) + sorted(MANIFESTS.rglob("*.yml"))


@pytest.fixture(scope="module")
def docs() -> Docs:
    out = [(p, d) for p in _manifest_files() for d in _load_docs(p)]
    assert out, "no manifests found"
    return out


def _find(docs: Docs, kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for _, d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def _one(docs: Docs, kind: str, name: str) -> dict[str, Any]:
    found = _find(docs, kind, name)
    assert len(found) == 1, f"expected exactly one {kind}/{name}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def crds(docs: Docs) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for d in _find(docs, "CustomResourceDefinition"):
        kind = d["spec"]["names"]["kind"]
        assert kind not in out, f"duplicate CRD for {kind}"
        out[kind] = d
    return out


@pytest.fixture(scope="module")
def deployment(docs: Docs) -> dict[str, Any]:
    return _one(docs, "Deployment", SERVICE)


@pytest.fixture(scope="module")
def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


@pytest.fixture(scope="module")
def kube_scheduler_config(docs: Docs) -> dict[str, Any]:
    cm = _one(docs, "ConfigMap", "koord-scheduler-config")
    assert cm["metadata"]["namespace"] == NAMESPACE
    return yaml.safe_load(cm["data"]["config.yaml"])


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = _load_docs(ROOT / "docker-compose.yml")
    assert len(loaded) == 1
    return loaded[0]


# ------------------------------------------------------------ generic


def test_expected_files_exist() -> None:
    names = {p.relative_to(MANIFESTS).as_posix() for p in _manifest_files()}
    for expected in (
        "00-namespace.yaml",
        "10-rbac.yaml",
        "20-deployment.yaml",
        "21-config.yaml",
        "30-kube-scheduler-config.yaml",
    ):
        assert expected in names
    assert len([n for n in names if n.startswith("crds/")]) == len(CRD_KINDS) == 8


def test_top_level_files_are_numbered() -> None:
    for p in MANIFESTS.glob("*.yaml"):
        assert re.match(r"^\d\d-[a-z0-9-]+\.yaml$", p.name), p.name


def test_every_doc_has_identity(docs: Docs) -> None:
    for path, d in docs:
        assert isinstance(d.get("apiVersion"), str) and d["apiVersion"], path
        assert isinstance(d.get("kind"), str) and d["kind"], path
        assert isinstance(d.get("metadata", {}).get("name"), str) and d["metadata"]["name"], path
        if d["kind"] in NAMESPACED_BUILTINS:
            assert d["metadata"].get("namespace") == NAMESPACE, f"{path}: {d['kind']}/{d['metadata']['name']}"


def test_namespace(docs: Docs) -> None:
    ns = _one(docs, "Namespace", NAMESPACE)
    assert ns["apiVersion"] == "v1"


def test_no_secret_is_committed(docs: Docs) -> None:
    assert _find(docs, "Secret") == []


# ------------------------------------------------------------ CRDs


def test_one_crd_per_koordinator_kind(crds: dict[str, dict[str, Any]]) -> None:
    assert sorted(crds) == CRD_KINDS
    assert set(CRD_KINDS) == {
        "NodeMetric",
        "NodeSLO",
        "Reservation",
        "Device",
        "PodMigrationJob",
        "ClusterColocationProfile",
        "ElasticQuota",
        "PodGroup",
    }


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_crd_matches_kinds_table(crds: dict[str, dict[str, Any]], kind: str) -> None:
    info = KINDS[kind]
    crd = crds[kind]
    spec = crd["spec"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{info.plural}.{info.group}"
    assert spec["group"] == info.group
    assert spec["names"]["kind"] == kind
    assert spec["names"]["plural"] == info.plural
    assert spec["names"]["singular"] == kind.lower()
    assert spec["names"]["listKind"] == f"{kind}List"
    assert spec["scope"] == ("Namespaced" if info.namespaced else "Cluster")
    versions = spec["versions"]
    assert [v["name"] for v in versions] == [info.version]
    assert versions[0]["served"] is True
    assert versions[0]["storage"] is True
    subresources = versions[0].get("subresources") or {}
    if kind in WITH_STATUS_SUBRESOURCE:
        assert subresources.get("status") == {}, kind  # `status: null` would mean no subresource
    else:
        assert "status" not in subresources, kind


def test_short_names(crds: dict[str, dict[str, Any]]) -> None:
    assert crds["PodMigrationJob"]["spec"]["names"]["shortNames"] == ["pmj"]
    for kind, crd in crds.items():
        if kind != "PodMigrationJob":
            assert "shortNames" not in crd["spec"]["names"], kind


def test_protected_groups_are_approved(crds: dict[str, dict[str, Any]]) -> None:
    # The API server rejects CRDs in *.k8s.io / *.kubernetes.io groups without this annotation.
    for kind, crd in crds.items():
        group = crd["spec"]["group"]
        annotations = crd["metadata"].get("annotations") or {}
        if group.endswith((".k8s.io", ".kubernetes.io")):
            assert annotations.get("api-approved.kubernetes.io", "").startswith("https://"), kind
    assert {k for k, c in crds.items() if c["spec"]["group"].endswith(".k8s.io")} == {
        "ElasticQuota",
        "PodGroup",
    }


def _walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}[*]")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_crd_schema_is_structural_and_never_prunes(crds: dict[str, dict[str, Any]], kind: str) -> None:
    schema = crds[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["type"] == "object"
    props = schema["properties"]
    assert props["apiVersion"] == {"type": "string"}
    assert props["kind"] == {"type": "string"}
    # Only name/generateName restrictions are allowed below metadata; we add none.
    assert props["metadata"] == {"type": "object"}
    assert {"spec", "status"} <= set(props)
    for path, node in _walk(schema, "$"):
        preserve = node.get("x-kubernetes-preserve-unknown-fields")
        int_or_string = node.get("x-kubernetes-int-or-string")
        assert preserve in (None, True), path
        assert int_or_string in (None, True), path
        # Structural: every node has a type unless it is int-or-string or preserves unknown fields.
        assert "type" in node or int_or_string or preserve, f"{kind}: {path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), f"{kind}: {path} array without items"
        # Never pruned: every object either maps arbitrary keys or keeps unknown fields.
        if node.get("type") == "object" and path not in ("$", "$.metadata"):
            assert preserve or "additionalProperties" in node, f"{kind}: {path} would prune unknown fields"
        for forbidden in ("$ref", "default", "nullable"):
            assert forbidden not in node, f"{kind}: {path} uses {forbidden}"


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_printer_columns_are_valid(crds: dict[str, dict[str, Any]], kind: str) -> None:
    for col in crds[kind]["spec"]["versions"][0].get("additionalPrinterColumns") or []:
        assert col["type"] in PRINTER_COLUMN_TYPES, col
        assert col["jsonPath"].startswith("."), col
        assert col["name"]


def _prop(crds: dict[str, dict[str, Any]], kind: str, dotted: str) -> dict[str, Any]:
    node = crds[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in dotted.split("."):
        node = node["properties"][part]
    return node


def test_key_fields_are_typed(crds: dict[str, dict[str, Any]]) -> None:
    update_time = _prop(crds, "NodeMetric", "status.updateTime")
    assert (update_time["type"], update_time["format"]) == ("string", "date-time")
    usage = _prop(crds, "NodeMetric", "status.nodeMetric.nodeUsage.resources")
    assert usage["additionalProperties"] == {"x-kubernetes-int-or-string": True}
    for field in ("spec.min", "spec.max", "status.used"):
        assert _prop(crds, "ElasticQuota", field)["additionalProperties"] == {"x-kubernetes-int-or-string": True}
    assert _prop(crds, "PodGroup", "spec.minMember")["type"] == "integer"
    assert _prop(crds, "PodGroup", "status.phase")["type"] == "string"
    assert _prop(crds, "Reservation", "status.phase")["type"] == "string"
    assert _prop(crds, "Reservation", "spec.allocateOnce")["type"] == "boolean"
    assert _prop(crds, "Reservation", "spec.owners")["type"] == "array"
    assert _prop(crds, "PodMigrationJob", "spec.podRef.name")["type"] == "string"
    probability = _prop(crds, "ClusterColocationProfile", "spec.probability")
    assert probability["x-kubernetes-int-or-string"] is True
    assert "type" not in probability
    assert _prop(crds, "Device", "spec.devices")["items"]["properties"]["id"]["type"] == "string"
    assert _prop(crds, "NodeSLO", "spec.resourceUsedThresholdWithBE.enable")["type"] == "boolean"


# ------------------------------------------------------------ RBAC


def _allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r.get("verbs", [])
        for r in rules
    )


@pytest.fixture(scope="module")
def cluster_rules(docs: Docs) -> list[dict[str, Any]]:
    return _one(docs, "ClusterRole", SERVICE)["rules"]


@pytest.fixture(scope="module")
def ns_rules(docs: Docs) -> list[dict[str, Any]]:
    role = _one(docs, "Role", SERVICE)
    assert role["metadata"]["namespace"] == NAMESPACE
    return role["rules"]


def test_cluster_role_core_permissions(cluster_rules: list[dict[str, Any]]) -> None:
    assert _allows(cluster_rules, "", "pods/binding", "create")
    assert _allows(cluster_rules, "", "pods/eviction", "create")
    assert _allows(cluster_rules, "", "pods", "patch")
    for resource in ("nodes", "pods"):
        for verb in ("get", "list", "watch"):
            assert _allows(cluster_rules, "", resource, verb), (resource, verb)
    for group in ("", "events.k8s.io"):
        for verb in ("create", "patch"):
            assert _allows(cluster_rules, group, "events", verb), (group, verb)
    assert _allows(cluster_rules, "slo.koordinator.sh", "nodemetrics/status", "update")
    assert _allows(cluster_rules, "scheduling.sigs.k8s.io", "elasticquotas", "update")
    assert _allows(cluster_rules, "scheduling.sigs.k8s.io", "elasticquotas", "patch")


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_cluster_role_reads_every_crd(cluster_rules: list[dict[str, Any]], kind: str) -> None:
    info = KINDS[kind]
    for verb in ("get", "list", "watch"):
        assert _allows(cluster_rules, info.group, info.plural, verb), (kind, verb)


def test_cluster_role_is_least_privilege(cluster_rules: list[dict[str, Any]]) -> None:
    for r in cluster_rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in r.get(key, []), r
        assert "delete" not in r["verbs"] and "deletecollection" not in r["verbs"], r
        assert "secrets" not in r["resources"], r
        # ConfigMaps and Leases are only needed in koordinator-system (Role below).
        assert "configmaps" not in r["resources"], r
        assert "leases" not in r["resources"], r
    assert not _allows(cluster_rules, "", "pods", "update")
    assert not _allows(cluster_rules, "", "nodes", "patch")


def test_namespaced_role(ns_rules: list[dict[str, Any]]) -> None:
    for verb in ("get", "list", "watch"):
        assert _allows(ns_rules, "", "configmaps", verb)
    for verb in ("get", "create", "update"):
        assert _allows(ns_rules, "coordination.k8s.io", "leases", verb)
    assert not _allows(ns_rules, "", "configmaps", "update")


def test_bindings_target_the_service_account(docs: Docs) -> None:
    _one(docs, "ServiceAccount", SERVICE)
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = _one(docs, kind, SERVICE)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": SERVICE,
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE, "namespace": NAMESPACE}]


# ------------------------------------------------------------ workload


def _flags(args: list[str]) -> dict[str, str]:
    assert args[0] == "scheduler", args
    rest = args[1:]
    assert len(rest) % 2 == 0, f"every flag takes one value: {rest}"
    flags = dict(zip(rest[::2], rest[1::2], strict=True))
    assert len(flags) == len(rest) // 2, "duplicate flag"
    return flags


def _mount_for(container: dict[str, Any], file: str) -> dict[str, Any]:
    for m in container["volumeMounts"]:
        if file.startswith(m["mountPath"].rstrip("/") + "/"):
            return m
    raise AssertionError(f"{file} is not under any volumeMount")


def test_deployment_args(deployment: dict[str, Any], container: dict[str, Any]) -> None:
    assert deployment["spec"]["replicas"] == 1
    assert container["image"] == "koordinator-py:latest"
    flags = _flags(container["args"])
    assert set(flags) <= SCHEDULER_FLAGS, set(flags) - SCHEDULER_FLAGS
    assert flags["--port"] == str(PORT)
    assert flags["--host"] == "0.0.0.0"
    assert "--cluster" not in flags and "--kubeconfig" not in flags  # in-cluster config
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    for flag, key in (("--tls-cert-file", "tls.crt"), ("--tls-private-key-file", "tls.key")):
        mount = _mount_for(container, flags[flag])
        assert volumes[mount["name"]]["secret"]["secretName"] == TLS_SECRET
        assert flags[flag].rsplit("/", 1)[1] == key


def test_deployment_config_comes_from_the_plugin_config_map(
    docs: Docs, deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    path = _flags(container["args"])["--config"]
    mount = _mount_for(container, path)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    cm_name = volumes[mount["name"]]["configMap"]["name"]
    cm = _one(docs, "ConfigMap", cm_name)
    key = path[len(mount["mountPath"].rstrip("/")) + 1 :]
    config = yaml.safe_load(cm["data"][key])
    assert [p["name"] for p in config["plugins"]] == ["LoadAwareScheduling", "NodeResourcesFit"]
    assert all(p["weight"] == 1 for p in config["plugins"])
    (load_aware,) = [c for c in config["pluginConfig"] if c["name"] == "LoadAwareScheduling"]
    assert load_aware["args"] == LOAD_AWARE_DEFAULTS


def test_deployment_probes_and_port(container: dict[str, Any]) -> None:
    (port,) = container["ports"]
    assert port["containerPort"] == PORT
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get["scheme"] == "HTTPS"
        assert get["path"] == path
        assert get["port"] in (PORT, port["name"])


def test_deployment_hardening(deployment: dict[str, Any], container: dict[str, Any]) -> None:
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    for section in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][section])


def test_service(docs: Docs, deployment: dict[str, Any]) -> None:
    svc = _one(docs, "Service", SERVICE)
    (port,) = svc["spec"]["ports"]
    assert port["port"] == PORT
    assert port["targetPort"] in (PORT, "https")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


# ------------------------------------------------------------ kube-scheduler


def _duration_seconds(text: str) -> float:
    from app.framework.duration import parse_duration

    return parse_duration(text)


def test_kube_scheduler_extender(kube_scheduler_config: dict[str, Any], docs: Docs) -> None:
    cfg = kube_scheduler_config
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    # httpTimeout is per entry: filter/prioritize/preempt (serial scheduling cycle, short timeout) and
    # bind alone (binding goroutine, held open by Permit waits) are two entries on the same service
    verbs, bind = cfg["extenders"]
    svc = _one(docs, "Service", SERVICE)
    for ext in (verbs, bind):
        url = urlsplit(ext["urlPrefix"])
        assert url.scheme == "https"
        assert url.hostname == f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc"
        assert url.port == PORT == svc["spec"]["ports"][0]["port"]
        assert url.path in ("", "/")  # verbs are served at the root
        assert ext["weight"] == 1
        assert ext["nodeCacheCapable"] is True
        assert ext["enableHTTPS"] is True
        assert ext["tlsConfig"]["caFile"].startswith("/")
        assert ext["tlsConfig"].get("insecure") is not True
        assert ext["ignorable"] is False
        assert re.fullmatch(r"\d+(ms|s|m)", ext["httpTimeout"]), ext["httpTimeout"]
    assert (verbs["filterVerb"], verbs["prioritizeVerb"], verbs["preemptVerb"]) == ("filter", "prioritize", "preempt")
    assert "bindVerb" not in verbs
    assert bind["bindVerb"] == "bind"
    assert not {"filterVerb", "prioritizeVerb", "preemptVerb"} & set(bind)
    assert _duration_seconds(verbs["httpTimeout"]) <= 5
    # the bind entry outlasts the longest Permit wait the extender allows
    from app.framework.waiting import MAX_TIMEOUT

    assert _duration_seconds(bind["httpTimeout"]) > MAX_TIMEOUT


def test_kube_scheduler_managed_resources_are_not_native(kube_scheduler_config: dict[str, Any]) -> None:
    # kube-scheduler refuses managedResources in the kubernetes.io/ namespace (they are not extended resource
    # names), and any entry restricts the extender to pods requesting it; so batch-cpu/memory are not listed.
    names = [r["name"] for ext in kube_scheduler_config["extenders"] for r in ext.get("managedResources") or []]
    assert "kubernetes.io/batch-cpu" not in names
    assert "kubernetes.io/batch-memory" not in names
    assert all("/" in n and "kubernetes.io/" not in n for n in names), names


def test_kube_scheduler_profile_spares_the_extender(
    kube_scheduler_config: dict[str, Any], deployment: dict[str, Any]
) -> None:
    names = [p["schedulerName"] for p in kube_scheduler_config["profiles"]]
    assert names == ["koord-scheduler"]
    assert deployment["spec"]["template"]["spec"].get("schedulerName", "default-scheduler") not in names


# ------------------------------------------------------------ compose + image


def test_compose_scheduler_service(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"scheduler", "agent"}
    svc = compose["services"]["scheduler"]
    assert svc["build"]["context"] == "."
    assert (ROOT / svc["build"].get("dockerfile", "Dockerfile")).is_file()
    assert f"{PORT}:{PORT}" in [str(p) for p in svc["ports"]]
    command = svc.get("command") or []
    # The embedded default: neither a cluster directory nor a kubeconfig.
    assert "--cluster" not in command and "--kubeconfig" not in command
    if command:
        flags = _flags(command)
        assert set(flags) <= SCHEDULER_FLAGS
        assert flags.get("--port", str(PORT)) == str(PORT)
        assert flags["--host"] == "0.0.0.0"
    test = " ".join(svc["healthcheck"]["test"])
    assert svc["healthcheck"]["test"][0] == "CMD"
    assert "urllib" in test
    assert f"http://127.0.0.1:{PORT}/readyz" in test


def test_compose_has_the_agent() -> None:
    lines = (ROOT / "docker-compose.yml").read_text(encoding="utf-8").splitlines()
    comments = " ".join(ln.strip().lstrip("#").strip() for ln in lines if ln.strip().startswith("#"))
    assert re.search(r"node agent", comments, re.IGNORECASE), comments


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert f"EXPOSE {PORT}" in lines
    assert 'ENTRYPOINT ["koord"]' in lines
    assert 'CMD ["scheduler", "--host", "0.0.0.0"]' in lines
    assert "pip install --no-cache-dir ." in text
    (user,) = [ln for ln in lines if ln.startswith("USER ")]
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, user  # numeric, so runAsNonRoot can verify it
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    for entry in (".venv", ".git"):
        assert entry in ignored
