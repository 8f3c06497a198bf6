"""Static checks of manifests/base/koord-agent.yaml: the DaemonSet, its RBAC and the agent's CLI flags agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from agent.cli import agent

ROOT = Path(__file__).resolve().parents[1]
DOCS = [d for d in yaml.safe_load_all((ROOT / "manifests" / "base" / "koord-agent.yaml").read_text()) if d]


def _one(kind: str) -> dict[str, Any]:
    (found,) = [d for d in DOCS if d["kind"] == kind]
    return found


def test_daemonset_is_privileged_with_host_pid_and_cgroup_and_proc_mounts() -> None:
    ds = _one("DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["hostPID"] is True and spec["serviceAccountName"] == "koord-agent"
    (c,) = spec["containers"]
    assert c["securityContext"]["privileged"] is True
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert "/sys/fs/cgroup" in mounts and mounts["/host/proc"]["readOnly"] is True
    paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert paths == {
        "cgroup": "/sys/fs/cgroup",
        "proc": "/proc",
        "kubelet-root": "/var/lib/kubelet",
        "runtime-hooks-socket": "/var/run/koordlet",
        "runtime-hooks-config": "/etc/runtime/hookserver.d",
        "prediction-checkpoints": "/var/run/koordlet/prediction-checkpoints",
    }
    assert mounts["/prediction-checkpoints"]["name"] == "prediction-checkpoints"  # the agent's default directory
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 9316}


def test_daemonset_flags_exist_on_koord_agent() -> None:
    (c,) = _one("DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert c["args"][0] == "agent"
    flags = {a.split("=", 1)[0] for a in c["args"][1:]}
    known = {"--" + name.replace("_", "-") for name in agent.__annotations__ if name != "return"}
    assert flags <= known, flags - known


def test_rbac_grants_exactly_what_the_agent_uses() -> None:
    rules = {
        (g, r): set(rule["verbs"])
        for rule in _one("ClusterRole")["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert rules[("", "nodes")] == {"get"}
    assert rules[("", "pods")] == {"list", "watch"}
    assert rules[("", "pods/eviction")] == {"create"}
    assert rules[("", "events")] == {"create"}
    assert rules[("slo.koordinator.sh", "nodemetrics")] == {"get", "create", "update"}
    assert rules[("slo.koordinator.sh", "nodemetrics/status")] == {"update"}
    assert rules[("slo.koordinator.sh", "nodeslos")] == {"get", "list", "watch"}
    assert rules[("scheduling.koordinator.sh", "devices")] == {"get", "create", "update"}  # the node's Device
    assert rules[("topology.node.k8s.io", "noderesourcetopologies")] == {"get", "create", "update"}
    binding = _one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "koord-agent"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "koord-agent", "namespace": "koordinator-system"}]


def test_daemonset_serves_runtime_hooks_and_reads_the_kubelet() -> None:
    """The hook server's socket sits where koord runtime-proxy finds it (the host endpoint in the registration
    is the host side of the mount), the pod is the hook server (skip label), the kubelet's state is readable."""
    tmpl = _one("DaemonSet")["spec"]["template"]
    (c,) = tmpl["spec"]["containers"]
    args = dict(a.split("=", 1) for a in c["args"][1:])
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    hosts = {v["name"]: v["hostPath"]["path"] for v in tmpl["spec"]["volumes"]}
    addr = Path(args["--runtime-hooks-addr"])
    assert str(addr.parent) == mounts["runtime-hooks-socket"]["mountPath"]
    assert args["--runtime-hooks-host-endpoint"] == f"{hosts['runtime-hooks-socket']}/{addr.name}"
    assert args["--runtime-hooks-config-path"] == mounts["runtime-hooks-config"]["mountPath"]
    assert hosts["runtime-hooks-config"] == "/etc/runtime/hookserver.d"  # where the proxy reads registrations
    assert tmpl["metadata"]["labels"]["runtimeproxy.koordinator.sh/skip-hookserver"] == "true"
    assert mounts["kubelet-root"]["readOnly"] is True
    assert args["--kubelet-root-dir"] == mounts["kubelet-root"]["mountPath"]
    assert args["--kubelet-config"].startswith(args["--kubelet-root-dir"] + "/")
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]
