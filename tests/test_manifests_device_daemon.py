"""manifests/device-daemon as kubectl renders it: the DaemonSet runs `koord device-daemon` with flags the CLI
knows, on every node, with the sysfs mount its --sys-root names, and the RBAC grants exactly what the daemon
calls (get and patch its Node)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.devicedaemon.cli import device_daemon

ROOT = Path(__file__).resolve().parents[1]
KUBECTL = shutil.which("kubectl")


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    if KUBECTL is None:
        pytest.skip("kubectl (with kustomize) is not on PATH")
    out = subprocess.run(
        [KUBECTL, "kustomize", str(ROOT / "manifests" / "device-daemon")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def test_daemonset_flags_are_the_cli_options(docs: list[dict[str, Any]]) -> None:
    ds = _one(docs, "DaemonSet", "koord-device-daemon")
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "device-daemon"
    known = {f"--{name.replace('_', '-')}" for name in device_daemon.__annotations__ if name != "return"}
    flags = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    assert flags <= known
    assert "--oneshot" not in flags  # a DaemonSet pod that exits would be restarted forever
    sys_root = next(a.split("=", 1)[1] for a in args if a.startswith("--sys-root="))
    assert {"mountPath": sys_root, "name": "host-sys", "readOnly": True} in container["volumeMounts"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in container["env"]
    assert pod["serviceAccountName"] == "koord-device-daemon"
    assert {"operator": "Exists"} in pod["tolerations"]
    assert not container["image"].endswith(":latest") and ":" in container["image"]


def test_rbac_grants_get_and_patch_on_nodes_only(docs: list[dict[str, Any]]) -> None:
    role = _one(docs, "ClusterRole", "koord-device-daemon")
    granted = {
        (g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert granted == {("", "nodes"): {"get", "patch"}}
    binding = _one(docs, "ClusterRoleBinding", "koord-device-daemon")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "koord-device-daemon", "namespace": "koordinator-system"}
    ]
