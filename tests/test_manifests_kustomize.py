"""The overlays as kubectl renders them: ``kubectl kustomize manifests/overlays/<name>``, parsed and checked.

What differs between the overlays is pinned here (replicas, TLS and client certificates, PDBs, NetworkPolicies,
anti-affinity); what they share is checked on every rendering (images are the kustomize parameter and never
``:latest``, the two-container koord-scheduler pod, leader election and its RBAC, the webhooks Deployment and
Service, the plugin ConfigMap). Skipped, saying so, where kubectl is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.plugins.registry import default_registry
from tests.test_manifests import check_extenders

ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = ROOT / "manifests" / "overlays"
BASE = ROOT / "manifests" / "base"
NS = "koordinator-system"
PORT = 9876
DEPLOYMENTS = ("koord-scheduler", "koord-webhooks", "koord-manager")
CLIENT_CA_SECRET = "koord-client-ca"
SCHEDULER_CLIENT_SECRET = "koord-scheduler-client-tls"

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl (with kustomize) is not on PATH")

Docs = list[dict[str, Any]]


@cache
def _render(overlay: str) -> tuple[dict[str, Any], ...]:
    assert KUBECTL is not None
    out = subprocess.run(
        [KUBECTL, "kustomize", str(OVERLAYS / overlay)], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    return tuple(d for d in yaml.safe_load_all(out) if d)


@pytest.fixture(params=["dev", "production"])
def overlay(request: pytest.FixtureRequest) -> tuple[str, Docs]:
    return request.param, list(_render(request.param))


def _find(docs: Docs, kind: str) -> Docs:
    return [d for d in docs if d["kind"] == kind]


def _one(docs: Docs, kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _find(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def _pod(docs: Docs, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = _one(docs, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def _container(docs: Docs, deployment: str, name: str) -> dict[str, Any]:
    (found,) = [c for c in _pod(docs, deployment)["containers"] if c["name"] == name]
    return found


def _flags(container: dict[str, Any]) -> dict[str, str]:
    args = container["args"]
    assert args[0] == "scheduler"
    return dict(zip(args[1::2], args[2::2], strict=True))


def _secret_of(docs: Docs, deployment: str, container: dict[str, Any], file: str) -> str:
    """The Secret whose key is mounted at ``file`` in ``container``, checking the key exists by name."""
    volumes = {v["name"]: v for v in _pod(docs, deployment)["volumes"]}
    for mount in container["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if file.startswith(prefix):
            secret = volumes[mount["name"]]["secret"]
            key = file[len(prefix) :]
            items = secret.get("items")
            assert items is None or key in [i["path"] for i in items], (file, items)
            name: str = secret["secretName"]
            return name
    raise AssertionError(f"{file} is not mounted in {container['name']}")


def _config_map_text(docs: Docs, deployment: str, container: dict[str, Any], file: str) -> str:
    volumes = {v["name"]: v for v in _pod(docs, deployment)["volumes"]}
    for mount in container["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if file.startswith(prefix):
            cm = _one(docs, "ConfigMap", volumes[mount["name"]]["configMap"]["name"])
            text: str = cm["data"][file[len(prefix) :]]
            return text
    raise AssertionError(f"{file} is not mounted in {container['name']}")


def _kube_scheduler_config(docs: Docs) -> dict[str, Any]:
    kube = _container(docs, "koord-scheduler", "kube-scheduler")
    (path,) = [a.split("=", 1)[1] for a in kube["command"] if a.startswith("--config=")]
    loaded: dict[str, Any] = yaml.safe_load(_config_map_text(docs, "koord-scheduler", kube, path))
    return loaded


def _expected_images(overlay: str) -> set[str]:
    """The ``images:`` parameters of the base, with the overlay's own entries taking precedence."""
    params: dict[str, dict[str, str]] = {}
    for folder in (BASE, OVERLAYS / overlay):
        kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
        for image in kustomization.get("images") or []:
            params[image["name"]] = {**params.get(image["name"], {}), **image}
    return {f"{i.get('newName', i['name'])}:{i['newTag']}" for i in params.values()}


# ------------------------------------------------------------ every overlay


def test_images_are_the_pinned_parameters(overlay: tuple[str, Docs]) -> None:
    name, docs = overlay
    expected = _expected_images(name)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"koordinator-py:{version}" in expected
    assert any(i.startswith("registry.k8s.io/kube-scheduler:v1.26.") for i in expected)
    seen = set()
    for workload in _find(docs, "Deployment") + _find(docs, "DaemonSet"):
        for c in workload["spec"]["template"]["spec"]["containers"]:
            image = c["image"]
            assert not image.endswith(":latest") and ":" in image.rsplit("/", 1)[-1], image
            assert image in expected, image
            seen.add(image)
    assert seen == expected  # every parameter is used


def test_everything_is_rendered(overlay: tuple[str, Docs]) -> None:
    _, docs = overlay
    assert len(_find(docs, "CustomResourceDefinition")) == 10
    assert _find(docs, "Secret") == []  # never in git
    assert {d["metadata"]["name"] for d in _find(docs, "Deployment")} == set(DEPLOYMENTS)
    assert [d["metadata"]["name"] for d in _find(docs, "DaemonSet")] == ["koord-agent"]
    # The API server examples are files for the control plane, not objects.
    assert not {d["kind"] for d in docs} & {"AdmissionConfiguration", "Config"}


def test_scheduler_pod_is_kube_scheduler_plus_extender_on_loopback(overlay: tuple[str, Docs]) -> None:
    _, docs = overlay
    pod = _pod(docs, "koord-scheduler")
    assert [c["name"] for c in pod["containers"]] == ["kube-scheduler", "extender"]
    assert pod["containers"][0]["image"].startswith("registry.k8s.io/kube-scheduler:")
    flags = _flags(_container(docs, "koord-scheduler", "extender"))
    assert flags["--role"] == "extender"
    assert (flags["--host"], flags["--port"]) == ("127.0.0.1", str(PORT))
    cfg = _kube_scheduler_config(docs)
    for ext in cfg["extenders"]:
        assert ext["urlPrefix"].split("://", 1)[1] == f"{flags['--host']}:{flags['--port']}"


def test_leader_election_and_its_rbac(overlay: tuple[str, Docs]) -> None:
    _, docs = overlay
    election = _kube_scheduler_config(docs)["leaderElection"]
    assert election["leaderElect"] is True
    assert (election["resourceName"], election["resourceNamespace"]) == ("koord-scheduler", NS)
    account = _pod(docs, "koord-scheduler")["serviceAccountName"]
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NS}
    granted: dict[str, set[str]] = {}
    for binding in _find(docs, "RoleBinding"):
        if binding["metadata"]["namespace"] != NS or subject not in binding["subjects"]:
            continue
        role = _one(docs, "Role", binding["roleRef"]["name"])
        for rule in role["rules"]:
            if "coordination.k8s.io" in rule["apiGroups"] and "leases" in rule["resources"]:
                for name in rule.get("resourceNames", ["*"]):
                    granted.setdefault(name, set()).update(rule["verbs"])
    assert {"get", "update"} <= granted.get(election["resourceName"], set()), granted
    assert "create" in granted.get("*", set()), granted
    # the extender follows that same Lease, so only the leader's extender writes in the background
    extender = _flags(_container(docs, "koord-scheduler", "extender"))
    assert extender["--follow-leader-lease"] == f"{election['resourceNamespace']}/{election['resourceName']}"
    cluster_roles = {
        b["roleRef"]["name"] for b in _find(docs, "ClusterRoleBinding") if subject in b.get("subjects", [])
    }
    assert {"system:kube-scheduler", "system:volume-scheduler", "koord-scheduler-extender"} <= cluster_roles
    reader = [
        b
        for b in _find(docs, "RoleBinding")
        if b["metadata"]["namespace"] == "kube-system" and subject in b["subjects"]
    ]
    assert [b["roleRef"]["name"] for b in reader] == ["extension-apiserver-authentication-reader"]


def test_webhooks_deployment_and_configurations(overlay: tuple[str, Docs]) -> None:
    _, docs = overlay
    webhooks = _container(docs, "koord-webhooks", "webhooks")
    flags = _flags(webhooks)
    assert flags["--role"] == "webhooks"
    assert _secret_of(docs, "koord-webhooks", webhooks, flags["--tls-cert-file"]) == "koord-webhooks-tls"
    svc = _one(docs, "Service", "koord-webhooks")
    labels = _one(docs, "Deployment", "koord-webhooks")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (port,) = svc["spec"]["ports"]
    hooks = [
        h
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for cfg in _find(docs, kind)
        for h in cfg["webhooks"]
    ]
    assert len(hooks) == 5  # pod x2, ElasticQuota x2, Reservation
    for hook in hooks:
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["port"]) == ("koord-webhooks", NS, port["port"])
        assert hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 10


def test_plugin_config_map_enables_every_registered_plugin(overlay: tuple[str, Docs]) -> None:
    _, docs = overlay
    extender = _container(docs, "koord-scheduler", "extender")
    config = yaml.safe_load(_config_map_text(docs, "koord-scheduler", extender, _flags(extender)["--config"]))
    assert [p["name"] for p in config["plugins"]] == default_registry().names()


# ------------------------------------------------------------ what differs


def test_replicas(overlay: tuple[str, Docs]) -> None:
    name, docs = overlay
    want = {"dev": 1, "production": 2}[name]
    assert {d["metadata"]["name"]: d["spec"]["replicas"] for d in _find(docs, "Deployment")} == dict.fromkeys(
        DEPLOYMENTS, want
    )


def test_pdbs_network_policies_and_anti_affinity_only_in_production(overlay: tuple[str, Docs]) -> None:
    name, docs = overlay
    if name == "dev":
        assert _find(docs, "PodDisruptionBudget") == []
        assert _find(docs, "NetworkPolicy") == []
        assert all("affinity" not in _pod(docs, d) for d in DEPLOYMENTS)
        return
    for dep_name in DEPLOYMENTS:
        labels = _one(docs, "Deployment", dep_name)["spec"]["template"]["metadata"]["labels"]
        pdb = _one(docs, "PodDisruptionBudget", dep_name)
        assert pdb["spec"]["minAvailable"] == 1 and "maxUnavailable" not in pdb["spec"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
        policy = _one(docs, "NetworkPolicy", dep_name)
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        (term,) = _pod(docs, dep_name)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()

    def open_ports(dep_name: str) -> list[int]:
        return [
            p["port"]
            for rule in _one(docs, "NetworkPolicy", dep_name)["spec"].get("ingress", [])
            for p in rule["ports"]
        ]

    # The extender is on loopback; the pod only opens kube-scheduler's secure port.
    assert open_ports("koord-scheduler") == [10259]
    assert open_ports("koord-webhooks") == [PORT]
    assert open_ports("koord-manager") == [8080]  # /metrics and /healthz only


def test_extender_transport(overlay: tuple[str, Docs]) -> None:
    name, docs = overlay
    cfg = _kube_scheduler_config(docs)
    extender = _container(docs, "koord-scheduler", "extender")
    flags = _flags(extender)
    if name == "dev":
        check_extenders(cfg, "http")
        assert not {"--tls-cert-file", "--client-ca-file", "--allowed-client-names"} & set(flags)
        return
    check_extenders(cfg, "https")
    assert _secret_of(docs, "koord-scheduler", extender, flags["--tls-cert-file"]) == "koord-scheduler-extender-tls"
    assert _secret_of(docs, "koord-scheduler", extender, flags["--client-ca-file"]) == CLIENT_CA_SECRET
    assert flags["--allowed-client-names"] == "koord-scheduler"
    kube = _container(docs, "koord-scheduler", "kube-scheduler")
    for ext in cfg["extenders"]:
        tls = ext["tlsConfig"]
        assert set(tls) == {"certFile", "keyFile", "caFile"}
        for file in tls.values():
            assert _secret_of(docs, "koord-scheduler", kube, file) == SCHEDULER_CLIENT_SECRET
    for probe in ("readinessProbe", "livenessProbe"):
        assert f"https://127.0.0.1:{PORT}/" in " ".join(extender[probe]["exec"]["command"])


def test_production_scheduler_config_differs_only_in_transport() -> None:
    dev, prod = (_kube_scheduler_config(list(_render(o))) for o in ("dev", "production"))
    for cfg in (dev, prod):
        for ext in cfg["extenders"]:
            ext.pop("tlsConfig", None)
            ext.pop("enableHTTPS")
            ext["urlPrefix"] = ext["urlPrefix"].split("://", 1)[1]
    assert dev == prod


def test_webhooks_client_certificates(overlay: tuple[str, Docs]) -> None:
    name, docs = overlay
    webhooks = _container(docs, "koord-webhooks", "webhooks")
    flags = _flags(webhooks)
    if name == "dev":
        assert "--client-ca-file" not in flags and "--allowed-webhook-client-names" not in flags
        return
    assert _secret_of(docs, "koord-webhooks", webhooks, flags["--client-ca-file"]) == CLIENT_CA_SECRET
    assert flags["--allowed-webhook-client-names"] == "kube-apiserver"


def test_apiserver_example_presents_the_client_certificate_to_our_service() -> None:
    folder = OVERLAYS / "production" / "apiserver"
    kustomization = yaml.safe_load((OVERLAYS / "production" / "kustomization.yaml").read_text())
    assert not any("apiserver" in r for r in kustomization["resources"] + [p["path"] for p in kustomization["patches"]])
    admission = yaml.safe_load((folder / "admission-configuration.yaml").read_text())
    assert (admission["apiVersion"], admission["kind"]) == ("apiserver.config.k8s.io/v1", "AdmissionConfiguration")
    plugins = {p["name"]: p["configuration"] for p in admission["plugins"]}
    assert set(plugins) == {"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}
    kubeconfig_paths = {c["kubeConfigFile"] for c in plugins.values()}
    assert all(c["kind"] == "WebhookAdmissionConfiguration" for c in plugins.values())
    (path,) = kubeconfig_paths
    assert Path(path).name == "webhook-client-kubeconfig.yaml"
    kubeconfig = yaml.safe_load((folder / "webhook-client-kubeconfig.yaml").read_text())
    (user,) = kubeconfig["users"]
    # The API server matches users by the webhook's host: <service>.<namespace>.svc, plus the port unless 443.
    svc = _one(list(_render("production")), "Service", "koord-webhooks")
    assert user["name"] == f"koord-webhooks.{svc['metadata']['namespace']}.svc:{svc['spec']['ports'][0]['port']}"
    assert {"client-certificate", "client-key"} <= set(user["user"])
