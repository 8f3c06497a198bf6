"""ElasticQuota through the real service over HTTP: PreFilter via /filter, REST views, /preempt,
and the over-use revoke loop (evictions recorded by the file source)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.framework.config import default_config, parse_config
from app.plugins.registry import default_registry
from app.sources.files import FileSource
from tests.conftest import LiveServer, filter_body
from tests.plugins.elasticquota.fixtures import node, pod, quota

MAX = {"cpu": "10", "memory": "64Gi"}
PREFIX = "/apis/v1/plugins/ElasticQuota"


def _cluster(tmp: Path) -> Path:
    objs: list[dict[str, Any]] = [
        node("n1", "10"),
        quota("team-a", {"cpu": "4"}, MAX),
        quota("team-b", {"cpu": "6"}, MAX),
        pod("a-run-1", "3", namespace="team-a", quota_name="team-a", node="n1", start="2026-01-01T00:00:00Z"),
        pod("a-run-2", "3", namespace="team-a", quota_name="team-a", node="n1", start="2026-01-02T00:00:00Z"),
        pod("b-pending", "6", namespace="team-b", quota_name="team-b"),
    ]
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


@pytest.fixture
def quota_server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(FileSource(_cluster(tmp_path), poll_interval=0)) as srv:
        yield srv


def test_prefilter_rejects_pod_over_runtime_with_upstream_message(quota_server: LiveServer) -> None:
    body = filter_body(pod("a-new", "1", namespace="team-a", quota_name="team-a"), ["n1"])
    r = quota_server.client.post("/filter", json=body)
    assert r.status_code == 200
    assert r.json()["NodeNames"] == []
    assert r.json()["FailedNodes"] == {
        "n1": "Insufficient quotas, quotaName: team-a, runtime: cpu:4,memory:0, used: cpu:6, "
        "pod's request: cpu:1, exceedDimensions: [cpu]"
    }
    ok = filter_body(pod("b-new", "1", namespace="team-b", quota_name="team-b"), ["n1"])
    assert quota_server.client.post("/filter", json=ok).json()["NodeNames"] == ["n1"]


def test_non_preemptible_pod_only_uses_min(quota_server: LiveServer) -> None:
    p = pod("b-np", "7", namespace="team-b", quota_name="team-b", non_preemptible=True)
    r = quota_server.client.post("/filter", json=filter_body(p, ["n1"]))
    reason = r.json()["FailedNodes"]["n1"]
    assert reason.startswith("Insufficient quotas, quotaName: team-b")  # 7 > runtime 6 first
    p = pod("b-np", "5", namespace="team-b", quota_name="team-b", non_preemptible=True)
    assert quota_server.client.post("/filter", json=filter_body(p, ["n1"])).json()["NodeNames"] == ["n1"]


def test_rest_views_use_upstream_field_names(quota_server: LiveServer) -> None:
    c = quota_server.client
    a = c.get(f"{PREFIX}/quota/team-a").json()
    assert a["name"] == "team-a" and a["parentName"] == "koordinator-root-quota"
    assert a["min"] == {"cpu": "4"} and a["max"] == {"cpu": "10", "memory": "64Gi"}
    assert a["runtime"] == {"cpu": "4", "memory": "0"}
    assert a["used"] == {"cpu": "6"} and a["request"] == {"cpu": "6"}
    assert a["sharedWeight"] == {"cpu": "10", "memory": "64Gi"}
    assert a["allowLentResource"] is True and a["isParent"] is False
    assert a["podCache"] == {
        "team-a/a-run-1": {"isAssigned": True, "resource": {"cpu": "3"}},
        "team-a/a-run-2": {"isAssigned": True, "resource": {"cpu": "3"}},
    }
    assert c.get(f"{PREFIX}/quotas/team-b").json()["request"] == {"cpu": "6"}
    r = c.get(f"{PREFIX}/quota/ghost")
    assert r.status_code == 404 and r.json() == {"message": "cannot find quota ghost"}
    all_quotas = c.get(f"{PREFIX}/quotas").json()
    assert set(all_quotas) == {"team-a", "team-b", "koordinator-default-quota", "koordinator-system-quota"}
    tree = c.get(f"{PREFIX}/tree").json()
    assert tree["root"]["name"] == "koordinator-root-quota"
    assert [ch["name"] for ch in tree["root"]["children"]] == [
        "koordinator-default-quota",
        "koordinator-system-quota",
        "team-a",
        "team-b",
    ]
    assert tree["clusterTotal"]["cpu"] == "10"


def _preempt(pod_obj: dict[str, Any], victims: list[str]) -> dict[str, Any]:
    return {
        "Pod": pod_obj,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": u} for u in victims], "NumPDBViolations": 0}},
    }


def test_preempt_keeps_only_same_quota_lower_priority_victims(quota_server: LiveServer) -> None:
    c = quota_server.client
    preemptor = pod("a-hi", "3", namespace="team-a", quota_name="team-a", priority=100)
    r = c.post("/preempt", json=_preempt(preemptor, ["uid-a-run-1", "uid-a-run-2"]))
    assert r.status_code == 200
    assert r.json()["NodeNameToMetaVictims"] == {
        "n1": {"Pods": [{"UID": "uid-a-run-1"}, {"UID": "uid-a-run-2"}], "NumPDBViolations": 0}
    }
    other = pod("b-hi", "3", namespace="team-b", quota_name="team-b", priority=100)
    r = c.post("/preempt", json=_preempt(other, ["uid-a-run-1", "uid-a-run-2"]))
    assert r.json()["NodeNameToMetaVictims"] == {}  # victims of another quota are not eligible
    low = pod("a-low", "3", namespace="team-a", quota_name="team-a", priority=0)
    assert c.post("/preempt", json=_preempt(low, ["uid-a-run-1"])).json()["NodeNameToMetaVictims"] == {}


def test_preempt_reprieves_victims_not_needed(tmp_path: Path) -> None:
    # n1 is full enough that the pod fails in-tree (1 cpu free, 2 wanted), as when kube-scheduler calls /preempt
    objs: list[dict[str, Any]] = [
        node("n1", "7"),
        quota("team-a", {"cpu": "4"}, MAX),
        pod("a-run-1", "3", namespace="team-a", quota_name="team-a", node="n1", start="2026-01-01T00:00:00Z"),
        pod("a-run-2", "3", namespace="team-a", quota_name="team-a", node="n1", start="2026-01-02T00:00:00Z"),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    preemptor = pod("a-small", "2", namespace="team-a", quota_name="team-a", priority=100)
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        r = srv.client.post("/preempt", json=_preempt(preemptor, ["uid-a-run-1", "uid-a-run-2"]))
    # runtime 6: used 6 - 3 + 2 = 5 fits and the node has 4 free: the older (more important) pod is reprieved.
    assert r.json()["NodeNameToMetaVictims"] == {"n1": {"Pods": [{"UID": "uid-a-run-2"}], "NumPDBViolations": 0}}


def test_revoke_loop_evicts_borrowed_capacity(tmp_path: Path) -> None:
    registry = default_registry()
    cfg = parse_config(
        {
            "pluginConfig": [
                {
                    "name": "ElasticQuota",
                    "args": {"monitorAllQuotas": True, "delayEvictTime": "0s", "revokePodInterval": "50ms"},
                }
            ]
        },
        registry.names(),
    )
    source = FileSource(_cluster(tmp_path), poll_interval=0)
    with LiveServer(source, cfg) as srv:
        deadline = time.monotonic() + 10
        evictions: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not evictions:
            evictions = srv.client.get(f"{PREFIX}/evictions").json()
            time.sleep(0.05)
        assert [(e["namespace"], e["name"], e["quota"]) for e in evictions] == [("team-a", "a-run-2", "team-a")]
        assert [e["name"] for e in source.evictions] == ["a-run-2"]
        time.sleep(0.3)
        assert len(source.evictions) == 1  # not evicted again while it is still there


def test_no_quotas_changes_nothing(example_server: LiveServer) -> None:
    c = example_server.client
    assert c.get(f"{PREFIX}/quotas").status_code == 200
    p = pod("x", "100m", quota_name="whatever")
    nodes = ["node-idle"]
    assert c.post("/filter", json=filter_body(p, nodes)).json()["FailedNodes"] == {}


def test_invalid_args_fail_at_start() -> None:
    from app.framework.config import ConfigError
    from app.server.app import create_app

    cfg = parse_config(
        {"pluginConfig": [{"name": "ElasticQuota", "args": {"delayEvictTime": "-1s"}}]}, default_registry().names()
    )
    with pytest.raises(ConfigError, match="DelayEvictTime should be a positive value"):
        create_app(FileSource(Path("/nonexistent")), cfg)
    assert default_config(default_registry().names()).plugins
