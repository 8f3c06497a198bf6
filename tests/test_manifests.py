"""Static checks of the deployment files: manifests/base (the kustomize base, read file by file),
docker-compose.yml and the Dockerfile. The rendered overlays are checked in test_manifests_kustomize.py.

Nothing here needs a cluster, a container engine or kubectl. The checks pin the facts that the Python code and
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
from app.cli.main import scheduler
from app.plugins.registry import default_registry

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests" / "base"
NAMESPACE = "koordinator-system"
PORT = 9876
#: The Deployment running kube-scheduler and our extender in one pod, and its ServiceAccount.
SCHEDULER = "koord-scheduler"
#: The extender's ClusterRole (bound to the koord-scheduler ServiceAccount).
EXTENDER_ROLE = "koord-scheduler-extender"
WEBHOOKS = "koord-webhooks"
WEBHOOKS_TLS_SECRET = "koord-webhooks-tls"

#: Every flag of `koord scheduler`.
SCHEDULER_FLAGS = {"--" + name.replace("_", "-") for name in scheduler.__annotations__ if name != "return"}

CORE_KINDS = {"Node", "Pod", "ConfigMap", "Namespace", "PriorityClass", "PodDisruptionBudget"}
CRD_KINDS = sorted(k for k in KINDS if k not in CORE_KINDS)
#: Kinds whose CRD is not ours but a third party's, shipped as Koordinator ships it (upstream schema, several
#: versions, pruning): k8stopologyawareschedwg's NodeResourceTopology.
EXTERNAL_CRD_KINDS = {"NodeResourceTopology"}
OWN_CRD_KINDS = sorted(k for k in CRD_KINDS if k not in EXTERNAL_CRD_KINDS)
# Kinds whose upstream CRD has a status subresource (kubebuilder:subresource:status).
WITH_STATUS_SUBRESOURCE = {
    "NodeMetric",
    "NodeSLO",
    "Reservation",
    "PodMigrationJob",
    "ClusterColocationProfile",
    "DrainNode",
}

# LoadAwareScheduling defaults (pkg/scheduler/apis/config/v1/defaults.go), written out in
# scheduler-plugins-config.yaml.
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
    files = sorted(MANIFESTS.rglob("*.yaml")) + sorted(MANIFESTS.rglob("*.yml"))
    return [p for p in files if p.name != "kustomization.yaml"]


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
    return _one(docs, "Deployment", SCHEDULER)


def _container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return found


@pytest.fixture(scope="module")
def container(deployment: dict[str, Any]) -> dict[str, Any]:
    """The extender container of the koord-scheduler pod."""
    assert [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]] == ["kube-scheduler", "extender"]
    return _container(deployment, "extender")


@pytest.fixture(scope="module")
def webhooks_deployment(docs: Docs) -> dict[str, Any]:
    return _one(docs, "Deployment", WEBHOOKS)


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
        "namespace.yaml",
        "rbac.yaml",
        "koord-scheduler.yaml",
        "koord-webhooks.yaml",
        "scheduler-plugins-config.yaml",
        "kube-scheduler-config.yaml",
    ):
        assert expected in names
    assert len([n for n in names if n.startswith("crds/")]) == len(CRD_KINDS) == 10
    # The flat layout is gone: everything is applied through an overlay.
    assert not list((ROOT / "manifests").glob("*.yaml"))


def test_base_kustomization_lists_every_file() -> None:
    # A file left out of resources would silently never be applied.
    kustomization = _load_docs(MANIFESTS / "kustomization.yaml")[0]
    assert kustomization["kind"] == "Kustomization"
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(p.relative_to(MANIFESTS).as_posix() for p in _manifest_files())


def test_every_doc_has_identity(docs: Docs) -> None:
    for path, d in docs:
        assert isinstance(d.get("apiVersion"), str) and d["apiVersion"], path
        assert isinstance(d.get("kind"), str) and d["kind"], path
        assert isinstance(d.get("metadata", {}).get("name"), str) and d["metadata"]["name"], path
        if d["kind"] in NAMESPACED_BUILTINS:
            # The one exception: reading kube-system/extension-apiserver-authentication is granted there.
            role = d.get("roleRef", {}).get("name")
            reads_auth = d["kind"] == "RoleBinding" and role == "extension-apiserver-authentication-reader"
            expected = "kube-system" if reads_auth else NAMESPACE
            assert d["metadata"].get("namespace") == expected, f"{path}: {d['kind']}/{d['metadata']['name']}"


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
        "DrainNode",
        "ClusterColocationProfile",
        "ElasticQuota",
        "PodGroup",
        "NodeResourceTopology",
    }


@pytest.mark.parametrize("kind", OWN_CRD_KINDS)
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
    assert crds["NodeResourceTopology"]["spec"]["names"]["shortNames"] == ["node-res-topo"]
    assert crds["DrainNode"]["spec"]["names"]["shortNames"] == ["dn"]
    for kind, crd in crds.items():
        if kind not in ("PodMigrationJob", "NodeResourceTopology", "DrainNode"):
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
        "NodeResourceTopology",
    }


def _walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}[*]")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")


@pytest.mark.parametrize("kind", OWN_CRD_KINDS)
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


def test_node_resource_topology_crd_is_the_one_koordinator_ships(crds: dict[str, dict[str, Any]]) -> None:
    info = KINDS["NodeResourceTopology"]
    crd = crds["NodeResourceTopology"]
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{info.plural}.{info.group}" == "noderesourcetopologies.topology.node.k8s.io"
    assert (spec["group"], spec["scope"], spec["names"]["plural"]) == (info.group, "Cluster", info.plural)
    names = spec["names"]
    assert (names["singular"], names["listKind"]) == ("noderesourcetopology", "NodeResourceTopologyList")
    # v1alpha1 (what the agent writes and the scheduler reads) is served; v1alpha2 stores, as upstream
    versions = {v["name"]: v for v in spec["versions"]}
    assert list(versions) == [info.version, "v1alpha2"]
    assert [(v["served"], v["storage"]) for v in versions.values()] == [(True, False), (True, True)]
    v1 = versions[info.version]["schema"]["openAPIV3Schema"]
    assert v1["required"] == ["topologyPolicies", "zones"]
    zone = v1["properties"]["zones"]["items"]
    assert zone["required"] == ["name", "type"]
    resource = zone["properties"]["resources"]["items"]
    assert resource["required"] == ["allocatable", "available", "capacity", "name"]
    assert resource["properties"]["capacity"]["x-kubernetes-int-or-string"] is True
    for version in versions.values():  # structural: every node typed (or int-or-string), arrays with items
        for path, node in _walk(version["schema"]["openAPIV3Schema"], "$"):
            assert "type" in node or node.get("x-kubernetes-int-or-string"), path
            if node.get("type") == "array":
                assert isinstance(node.get("items"), dict), path
        # every field the agent writes is declared in both versions, so conversion to storage prunes none
        props = version["schema"]["openAPIV3Schema"]["properties"]
        assert {"metadata", "topologyPolicies", "zones"} <= set(props)
        assert {"name", "type", "resources"} <= set(props["zones"]["items"]["properties"])


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
    return _one(docs, "ClusterRole", EXTENDER_ROLE)["rules"]


@pytest.fixture(scope="module")
def ns_rules(docs: Docs) -> list[dict[str, Any]]:
    role = _one(docs, "Role", SCHEDULER)
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
    assert _allows(cluster_rules, "scheduling.sigs.k8s.io", "podgroups", "patch")  # PodGroup status
    assert _allows(cluster_rules, "scheduling.koordinator.sh", "reservations/status", "patch")


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_cluster_role_reads_every_crd(cluster_rules: list[dict[str, Any]], kind: str) -> None:
    info = KINDS[kind]
    for verb in ("get", "list", "watch"):
        assert _allows(cluster_rules, info.group, info.plural, verb), (kind, verb)


def test_cluster_role_is_least_privilege(cluster_rules: list[dict[str, Any]]) -> None:
    for r in cluster_rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in r.get(key, []), r
        assert "deletecollection" not in r["verbs"], r
        # the one delete: the Reservation controller garbage-collects finished reservations (upstream's GC)
        assert "delete" not in r["verbs"] or (r["resources"], r["verbs"]) == (["reservations"], ["delete"]), r
        assert "secrets" not in r["resources"], r
        # ConfigMaps and Leases are only needed in koordinator-system (Role below).
        assert "configmaps" not in r["resources"], r
        assert "leases" not in r["resources"], r
    assert not _allows(cluster_rules, "", "pods", "update")
    assert not _allows(cluster_rules, "", "nodes", "patch")


def test_namespaced_role_holds_the_lease_of_leader_election(
    ns_rules: list[dict[str, Any]], kube_scheduler_config: dict[str, Any]
) -> None:
    for verb in ("get", "list", "watch"):
        assert _allows(ns_rules, "", "configmaps", verb)
    assert not _allows(ns_rules, "", "configmaps", "update")
    election = kube_scheduler_config["leaderElection"]
    assert election["resourceNamespace"] == NAMESPACE
    leases = [r for r in ns_rules if "leases" in r["resources"]]
    assert all(r["apiGroups"] == ["coordination.k8s.io"] for r in leases)
    # create cannot be limited by name; get and update are limited to kube-scheduler's Lease.
    (create,) = [r for r in leases if "create" in r["verbs"]]
    assert "resourceNames" not in create and create["verbs"] == ["create"]
    (named,) = [r for r in leases if "resourceNames" in r]
    assert named["resourceNames"] == [election["resourceName"]] == [SCHEDULER]
    assert sorted(named["verbs"]) == ["get", "update"]


def _binding(docs: Docs, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    binding = _one(docs, kind, name)
    assert binding["metadata"].get("namespace") == namespace
    return binding


def test_scheduler_account_has_kube_scheduler_and_extender_roles(docs: Docs, deployment: dict[str, Any]) -> None:
    _one(docs, "ServiceAccount", SCHEDULER)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == SCHEDULER
    subject = [{"kind": "ServiceAccount", "name": SCHEDULER, "namespace": NAMESPACE}]
    expected = [
        ("ClusterRoleBinding", "koord-scheduler:kube-scheduler", None, "ClusterRole", "system:kube-scheduler"),
        ("ClusterRoleBinding", "koord-scheduler:volume-scheduler", None, "ClusterRole", "system:volume-scheduler"),
        ("ClusterRoleBinding", EXTENDER_ROLE, None, "ClusterRole", EXTENDER_ROLE),
        ("RoleBinding", SCHEDULER, NAMESPACE, "Role", SCHEDULER),
        (
            "RoleBinding",
            "koord-scheduler:extension-apiserver-authentication-reader",
            "kube-system",
            "Role",
            "extension-apiserver-authentication-reader",
        ),
    ]
    for kind, name, namespace, role_kind, role in expected:
        binding = _binding(docs, kind, name, namespace)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}
        assert binding["subjects"] == subject, name


def test_webhooks_rbac_is_read_only(docs: Docs, webhooks_deployment: dict[str, Any]) -> None:
    _one(docs, "ServiceAccount", WEBHOOKS)
    assert webhooks_deployment["spec"]["template"]["spec"]["serviceAccountName"] == WEBHOOKS
    rules = _one(docs, "ClusterRole", WEBHOOKS)["rules"]
    ns_rules = _one(docs, "Role", WEBHOOKS)["rules"]
    for r in rules + ns_rules:
        assert set(r["verbs"]) <= {"get", "list", "watch"}, r
        assert "secrets" not in r["resources"] and "*" not in r["resources"], r
    for kind in (*CRD_KINDS, "Node", "Pod", "Namespace", "PriorityClass"):
        info = KINDS[kind]
        for verb in ("list", "watch"):
            assert _allows(rules, info.group, info.plural, verb), (kind, verb)
    assert _allows(ns_rules, "", "configmaps", "watch")
    subject = [{"kind": "ServiceAccount", "name": WEBHOOKS, "namespace": NAMESPACE}]
    assert _binding(docs, "ClusterRoleBinding", WEBHOOKS)["subjects"] == subject
    assert _binding(docs, "RoleBinding", WEBHOOKS, NAMESPACE)["subjects"] == subject


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


def _volumes(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}


def _config_map_file(docs: Docs, deployment: dict[str, Any], container: dict[str, Any], path: str) -> str:
    """The text of ``path`` as the container sees it: the mounted ConfigMap's key."""
    mount = _mount_for(container, path)
    cm = _one(docs, "ConfigMap", _volumes(deployment)[mount["name"]]["configMap"]["name"])
    data: str = cm["data"][path[len(mount["mountPath"].rstrip("/")) + 1 :]]
    return data


def test_extender_args(container: dict[str, Any]) -> None:
    # The tag is set by kustomize (images: in kustomization.yaml).
    assert container["image"] == "koordinator-py"
    flags = _flags(container["args"])
    assert set(flags) <= SCHEDULER_FLAGS, set(flags) - SCHEDULER_FLAGS
    assert flags["--role"] == "extender"
    assert flags["--port"] == str(PORT)
    assert flags["--host"] == "127.0.0.1"  # reachable only from the kube-scheduler container of the pod
    assert "--cluster" not in flags and "--kubeconfig" not in flags  # in-cluster config
    # Plain HTTP on loopback in the base; TLS comes with the production overlay.
    assert not {"--tls-cert-file", "--tls-private-key-file"} & set(flags)
    assert "ports" not in container


def test_kube_scheduler_container(docs: Docs, deployment: dict[str, Any]) -> None:
    kube = _container(deployment, "kube-scheduler")
    assert kube["image"] == "registry.k8s.io/kube-scheduler"
    assert kube["command"][0] == "kube-scheduler"
    (config,) = [a.split("=", 1)[1] for a in kube["command"] if a.startswith("--config=")]
    loaded = yaml.safe_load(_config_map_file(docs, deployment, kube, config))
    assert loaded["kind"] == "KubeSchedulerConfiguration"
    assert [p["containerPort"] for p in kube["ports"]] == [10259]
    assert kube["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_plugin_config_map_enables_every_registered_plugin(
    docs: Docs, deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    from app.framework.config import parse_config

    text = _config_map_file(docs, deployment, container, _flags(container["args"])["--config"])
    names = default_registry().names()
    config = parse_config(yaml.safe_load(text), names)  # as `koord scheduler --config` reads it
    assert [p.name for p in config.plugins] == names
    assert all(p.weight == 1 for p in config.plugins)
    (load_aware,) = [p for p in config.plugins if p.name == "LoadAwareScheduling"]
    assert load_aware.args == LOAD_AWARE_DEFAULTS


@pytest.mark.parametrize("overlay", ["base", "overlays/production"])
def test_coscheduling_bind_timeout_is_the_bind_entrys_http_timeout(
    docs: Docs, deployment: dict[str, Any], container: dict[str, Any], overlay: str
) -> None:
    # a gang member waits at Permit inside its /bind: the plugin refuses waits kube-scheduler would abandon,
    # so it must know the bind entry's httpTimeout of every shipped kube-scheduler config
    from app.framework.config import parse_config

    text = _config_map_file(docs, deployment, container, _flags(container["args"])["--config"])
    config = parse_config(yaml.safe_load(text), default_registry().names())
    (cosched,) = [p for p in config.plugins if p.name == "Coscheduling"]
    kube = yaml.safe_load((ROOT / "manifests" / overlay / "kube-scheduler-config.yaml").read_text())
    if kube.get("kind") == "ConfigMap":
        kube = yaml.safe_load(next(iter(kube["data"].values())))
    (bind,) = [e for e in kube["extenders"] if e.get("bindVerb")]
    assert _duration_seconds(cosched.args["bindHTTPTimeout"]) == _duration_seconds(bind["httpTimeout"])


def test_extender_probes_run_inside_the_pod(container: dict[str, Any]) -> None:
    # The kubelet probes the pod IP, where the loopback-only extender does not listen: exec probes.
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        command = " ".join(container[probe]["exec"]["command"])
        assert f"http://127.0.0.1:{PORT}{path}" in command, command


def test_webhooks_deployment(webhooks_deployment: dict[str, Any], docs: Docs) -> None:
    assert webhooks_deployment["spec"]["replicas"] == 1
    (c,) = webhooks_deployment["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "koordinator-py"
    flags = _flags(c["args"])
    assert set(flags) <= SCHEDULER_FLAGS, set(flags) - SCHEDULER_FLAGS
    assert flags["--role"] == "webhooks"
    assert (flags["--host"], flags["--port"]) == ("0.0.0.0", str(PORT))
    # The API server calls webhooks over HTTPS only, so TLS is on in the base already.
    for flag, key in (("--tls-cert-file", "tls.crt"), ("--tls-private-key-file", "tls.key")):
        mount = _mount_for(c, flags[flag])
        assert _volumes(webhooks_deployment)[mount["name"]]["secret"]["secretName"] == WEBHOOKS_TLS_SECRET
        assert flags[flag].rsplit("/", 1)[1] == key
    (port,) = c["ports"]
    assert port["containerPort"] == PORT
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c[probe]["httpGet"]
        assert (get["scheme"], get["path"]) == ("HTTPS", path)
        assert get["port"] in (PORT, port["name"])


def test_deployment_hardening(docs: Docs) -> None:
    deployments = _find(docs, "Deployment")
    assert {d["metadata"]["name"] for d in deployments} == {SCHEDULER, WEBHOOKS, "koord-manager"}
    for dep in deployments:
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod.get("schedulerName") == "default-scheduler"
        for c in pod["containers"]:
            where = f"{dep['metadata']['name']}/{c['name']}"
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert c.get("imagePullPolicy") == "IfNotPresent", where
            for section in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"][section]), where


def test_webhooks_service(docs: Docs, webhooks_deployment: dict[str, Any], deployment: dict[str, Any]) -> None:
    svc = _one(docs, "Service", WEBHOOKS)
    (port,) = svc["spec"]["ports"]
    assert port["port"] == PORT
    assert port["targetPort"] in (PORT, "https")
    labels = webhooks_deployment["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert webhooks_deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # No Service reaches the extender: it is only called over the pod's loopback.
    scheduler_labels = deployment["spec"]["template"]["metadata"]["labels"]
    for service in _find(docs, "Service"):
        assert not service["spec"]["selector"].items() <= scheduler_labels.items(), service["metadata"]["name"]


# ------------------------------------------------------------ kube-scheduler


def _duration_seconds(text: str) -> float:
    from app.framework.duration import parse_duration

    return parse_duration(text)


def check_extenders(cfg: dict[str, Any], scheme: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two extender entries of a KubeSchedulerConfiguration, checked; (verbs entry, bind entry)."""
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    # httpTimeout is per entry: filter/prioritize/preempt (serial scheduling cycle, short timeout) and
    # bind alone (binding goroutine, held open by Permit waits) are two entries on the same extender
    verbs, bind = cfg["extenders"]
    for ext in (verbs, bind):
        url = urlsplit(ext["urlPrefix"])
        assert url.scheme == scheme
        assert (url.hostname, url.port) == ("127.0.0.1", PORT)  # the extender container of the same pod
        assert url.path in ("", "/")  # verbs are served at the root
        assert ext["weight"] == 1
        assert ext["nodeCacheCapable"] is True
        assert ext["enableHTTPS"] is (scheme == "https")
        assert ext["ignorable"] is False
        assert re.fullmatch(r"\d+(ms|s|m)", ext["httpTimeout"]), ext["httpTimeout"]
        assert (ext.get("tlsConfig") or {}).get("insecure") is not True
    assert (verbs["filterVerb"], verbs["prioritizeVerb"], verbs["preemptVerb"]) == ("filter", "prioritize", "preempt")
    assert "bindVerb" not in verbs
    assert bind["bindVerb"] == "bind"
    assert not {"filterVerb", "prioritizeVerb", "preemptVerb"} & set(bind)
    assert _duration_seconds(verbs["httpTimeout"]) == 5
    # the bind entry outlasts the longest Permit wait the extender allows
    from app.framework.waiting import MAX_TIMEOUT

    assert _duration_seconds(bind["httpTimeout"]) == 16 * 60 > MAX_TIMEOUT
    election = cfg["leaderElection"]
    assert election["leaderElect"] is True
    assert (election["resourceName"], election["resourceNamespace"]) == (SCHEDULER, NAMESPACE)
    assert election.get("resourceLock", "leases") == "leases"
    return verbs, bind


def test_kube_scheduler_extender(kube_scheduler_config: dict[str, Any], container: dict[str, Any]) -> None:
    verbs, bind = check_extenders(kube_scheduler_config, "http")
    flags = _flags(container["args"])
    for ext in (verbs, bind):
        assert "tlsConfig" not in ext
        assert ext["urlPrefix"] == f"http://{flags['--host']}:{flags['--port']}"


def test_kube_scheduler_managed_resources_are_not_native(kube_scheduler_config: dict[str, Any]) -> None:
    # kube-scheduler refuses managedResources in the kubernetes.io/ namespace (they are not extended resource
    # names), and any entry restricts the extender to pods requesting it; so batch-cpu/memory are not listed.
    names = [r["name"] for ext in kube_scheduler_config["extenders"] for r in ext.get("managedResources") or []]
    assert "kubernetes.io/batch-cpu" not in names
    assert "kubernetes.io/batch-memory" not in names
    assert all("/" in n and "kubernetes.io/" not in n for n in names), names


def test_kube_scheduler_profile_spares_our_own_pods(kube_scheduler_config: dict[str, Any], docs: Docs) -> None:
    names = [p["schedulerName"] for p in kube_scheduler_config["profiles"]]
    assert names == [SCHEDULER]
    for dep in _find(docs, "Deployment"):
        assert dep["spec"]["template"]["spec"].get("schedulerName", "default-scheduler") not in names


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
