"""manifests/runtime-proxy: the systemd unit's flags exist on ``koord runtime-proxy`` and agree with the agent's
DaemonSet (the registration folder), and the NVIDIA patch names the agent's DaemonSet."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from runtimeproxy.cli import runtime_proxy
from runtimeproxy.options import DEFAULT_RUNTIME_PROXY_ENDPOINT

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "manifests" / "runtime-proxy" / "koord-runtime-proxy.service"


def _exec_args() -> list[str]:
    text = UNIT.read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_unit_flags_exist_on_koord_runtime_proxy() -> None:
    args = _exec_args()
    assert args[1:2] == ["runtime-proxy"]
    flags = dict(a.split("=", 1) for a in args[2:])
    known = {"--" + n.replace("_", "-") for n in runtime_proxy.__annotations__ if n != "return"}
    assert set(flags) <= known, set(flags) - known
    assert flags["--koord-runtimeproxy-endpoint"] == DEFAULT_RUNTIME_PROXY_ENDPOINT


def test_unit_reads_the_registrations_the_agent_writes() -> None:
    flags = dict(a.split("=", 1) for a in _exec_args()[2:])
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests/base/koord-agent.yaml").read_text()) if d]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    hosts = {v["name"]: v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert flags["--runtime-hooks-config-path"] == hosts["runtime-hooks-config"]
    assert "Before=kubelet.service" in UNIT.read_text()


def test_nvidia_patch_targets_the_agent() -> None:
    patch = yaml.safe_load((ROOT / "manifests/runtime-proxy/agent-nvidia-patch.yaml").read_text())
    assert (patch["kind"], patch["metadata"]["name"]) == ("DaemonSet", "koord-agent")
    assert patch["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
