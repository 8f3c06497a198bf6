"""How a hook server's answer is merged into CRI requests (upstream resexecutor/cri/utils.go), and how
registrations are read (config_manager.go)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from app.api.runtime.config import FailurePolicy, HookConfigError, RuntimeHookType, hook_config_json, parse_hook_config
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from runtimeproxy.config import HookConfigManager
from runtimeproxy.cri.v1 import api_pb2 as cri
from runtimeproxy.resexecutor import replace_envs, update_resource, update_resource_by_update_request


def test_update_resource_follows_upstream() -> None:
    a = hookapi.LinuxContainerResources(cpu_period=100000, cpu_quota=50000, cpu_shares=512, oom_score_adj=999)
    a.unified["memory.high"] = "1"
    b = hookapi.LinuxContainerResources(cpu_quota=-1, cpuset_cpus="0-1", oom_score_adj=999)
    b.unified["memory.min"] = "2"
    update_resource(a, b)
    assert (a.cpu_period, a.cpu_quota, a.cpu_shares, a.cpuset_cpus) == (100000, -1, 512, "0-1")
    assert dict(a.unified) == {"memory.high": "1", "memory.min": "2"}
    # an update request keeps the remembered cpuset when it names none, and never touches oom_score_adj
    c = hookapi.LinuxContainerResources(cpuset_cpus="0-1", oom_score_adj=999)
    update_resource_by_update_request(c, hookapi.LinuxContainerResources(cpu_shares=2, oom_score_adj=-5))
    assert (c.cpuset_cpus, c.cpu_shares, c.oom_score_adj) == ("0-1", 2, 999)


def test_replace_envs_keeps_order_and_untouched_bytes() -> None:
    config = cri.ContainerConfig(
        envs=[cri.KeyValue(key="B", value=b"\xff\xfe"), cri.KeyValue(key="A", value=b"1"), cri.KeyValue(key="C")]
    )
    answer = {"B": b"\xff\xfe".decode("utf-8", "replace"), "A": "2", "Z": "z", "Y": "y"}  # C dropped
    replace_envs(config, answer)
    assert [(e.key, e.value) for e in config.envs] == [("B", b"\xff\xfe"), ("A", b"2"), ("Y", b"y"), ("Z", b"z")]


def test_registration_parsing_and_errors() -> None:
    text = hook_config_json("/run/k.sock", FailurePolicy.IGNORE, [RuntimeHookType.PRE_CREATE_CONTAINER])
    cfg = parse_hook_config(text, "k.json")
    assert cfg.remote_endpoint == "/run/k.sock" and cfg.failure_policy == FailurePolicy.IGNORE
    for bad, why in [
        ("[]", "expected a JSON object"),
        ('{"failure-policy": "Ignore"}', "remote-endpoint"),
        ('{"remote-endpoint": "/x", "failure-policy": "Maybe"}', "failure-policy"),
        ('{"remote-endpoint": "/x", "runtime-hooks": ["PreFly"]}', "unknown hook 'PreFly'"),
    ]:
        with pytest.raises(HookConfigError, match=why):
            parse_hook_config(bad, "bad.json")


def test_manager_skips_bad_files_and_sees_changes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    mgr = HookConfigManager(tmp_path, recheck=0.0)
    assert mgr.all_hooks() == []
    (tmp_path / "a.json").write_text("{not json")
    good = tmp_path / "b.json"
    good.write_text(hook_config_json("/run/b.sock", FailurePolicy.FAIL, [RuntimeHookType.PRE_RUN_POD_SANDBOX]))
    with caplog.at_level(logging.WARNING, logger="runtimeproxy"):
        assert [c.remote_endpoint for c in mgr.all_hooks()] == ["/run/b.sock"]
        assert [c.remote_endpoint for c in mgr.all_hooks()] == ["/run/b.sock"]
    assert len([r for r in caplog.records if "a.json" in r.getMessage()]) == 1  # logged once
    good.write_text(hook_config_json("/run/c.sock", FailurePolicy.IGNORE, []))
    os.utime(good, ns=(1, 10**18))  # a new mtime even on a coarse clock
    assert [c.remote_endpoint for c in mgr.all_hooks()] == ["/run/c.sock"]
