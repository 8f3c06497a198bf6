"""ElasticQuota's preemption inside the service, over real HTTP with the file source (evictions recorded).

kube-scheduler cannot carry it: a pod that fits in-tree but fails our quota check gets no victims from its
dry run, so ``/preempt`` is never called. ``/filter`` then runs upstream ElasticQuota's PostFilter itself:
victims of the pod's own quota with a lower priority, evicted through the API client, the pod nominated.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.framework.config import parse_config
from app.plugins.registry import default_registry
from app.sources.files import FileSource
from tests.conftest import LiveServer, filter_body
from tests.plugins.elasticquota.fixtures import node, pod, quota

PREFIX = "/apis/v1/plugins/ElasticQuota"
QUOTA_MESSAGE = (
    "Insufficient quotas, quotaName: team-a, runtime: cpu:4, used: cpu:4, pod's request: cpu:2, exceedDimensions: [cpu]"
)


def _preemptor(**changes: Any) -> dict[str, Any]:
    p = pod("a-hi", "2", namespace="team-a", quota_name="team-a", priority=100)
    p["spec"]["preemptionPolicy"] = "PreemptLowerPriority"
    for key, value in changes.items():
        p["spec"][key] = value
    return p


def _cluster(tmp: Path, *, victims_preemptible: bool = True, preemptor: dict[str, Any] | None = None) -> Path:
    """n1 holds team-a's a-old and a-new (2 cpu each, priority 0: team-a's whole max of 4) and team-b's
    b-run; n2 is empty. The pending preemptor a-hi (team-a, 2 cpu, priority 100) is in the cluster."""
    np = not victims_preemptible
    objs: list[dict[str, Any]] = [
        node("n1", "10"),
        node("n2", "10"),
        quota("team-a", {"cpu": "4"}, {"cpu": "4"}),
        quota("team-b", {"cpu": "4"}, {"cpu": "20"}),
        pod("a-old", "2", namespace="team-a", quota_name="team-a", node="n1", priority=0, non_preemptible=np,
            start="2026-01-01T00:00:00Z"),
        pod("a-new", "2", namespace="team-a", quota_name="team-a", node="n1", priority=0, non_preemptible=np,
            start="2026-01-02T00:00:00Z"),
        pod("b-run", "2", namespace="team-b", quota_name="team-b", node="n1", priority=0),
        preemptor if preemptor is not None else _preemptor(),
    ]  # fmt: skip
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


def _server(cluster: Path, args: dict[str, Any] | None = None) -> LiveServer:
    registry = default_registry()
    cfg = parse_config({"pluginConfig": [{"name": "ElasticQuota", "args": args or {}}]}, registry.names())
    return LiveServer(FileSource(cluster, poll_interval=0), cfg)


@pytest.fixture
def preempt_server(tmp_path: Path) -> Iterator[LiveServer]:
    with _server(_cluster(tmp_path)) as srv:
        yield srv


def _wait(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def _evictions(srv: LiveServer) -> list[dict[str, str]]:
    source: FileSource = srv.app.state.service.source
    return source.evictions


def _nominated(srv: LiveServer) -> str | None:
    obj = srv.service.cache.pod_objects.get("uid-a-hi") or {}
    value: str | None = (obj.get("status") or {}).get("nominatedNodeName")
    return value


def test_quota_rejected_pod_preempts_the_least_important_pod_of_its_quota(preempt_server: LiveServer) -> None:
    c = preempt_server.client
    r = c.post("/filter", json=filter_body(_preemptor(), ["n1", "n2"]))
    assert r.status_code == 200
    body = r.json()
    # the answer is unchanged: the pod fails now and fits once the victim is gone
    assert body["NodeNames"] == []
    assert body["FailedNodes"] == {"n1": QUOTA_MESSAGE, "n2": QUOTA_MESSAGE}
    assert body["FailedAndUnresolvableNodes"] == {}
    _wait(lambda: _nominated(preempt_server) == "n1")
    evicted = _evictions(preempt_server)
    # removing a-new alone brings used to 2 + 2 <= 4: the older a-old is reprieved, b-run is another quota's
    assert [(e["namespace"], e["name"], e["uid"]) for e in evicted] == [("team-a", "a-new", "uid-a-new")]
    assert "preempted by team-a/a-hi on node n1" in evicted[0]["reason"]
    view = c.get(f"{PREFIX}/evictions").json()
    assert [(e["name"], e["error"]) for e in view] == [("a-new", "")]

    # retried while its victim is still there: no second preemption
    r = c.post("/filter", json=filter_body(_preemptor(), ["n1", "n2"]))
    assert r.json()["FailedNodes"]["n1"] == QUOTA_MESSAGE
    time.sleep(0.3)
    assert len(_evictions(preempt_server)) == 1


@pytest.mark.parametrize(
    ("preemptor", "victims_preemptible", "args"),
    [
        (_preemptor(priority=0), True, {}),  # victims must have a strictly lower priority
        (_preemptor(preemptionPolicy="Never"), True, {}),
        (_preemptor(), False, {}),  # victims labelled preemptible: "false"
        (_preemptor(), True, {"enablePreemption": False}),
    ],
    ids=["same-priority", "preemption-policy-never", "non-preemptible-victims", "disabled"],
)
def test_no_preemption_when_upstream_rules_forbid_it(
    tmp_path: Path, preemptor: dict[str, Any], victims_preemptible: bool, args: dict[str, Any]
) -> None:
    cluster = _cluster(tmp_path, victims_preemptible=victims_preemptible, preemptor=preemptor)
    with _server(cluster, args) as srv:
        r = srv.client.post("/filter", json=filter_body(preemptor, ["n1", "n2"]))
        assert r.json()["FailedNodes"]["n1"].startswith("Insufficient quotas, quotaName: team-a")
        time.sleep(0.3)
        assert _evictions(srv) == []
        assert _nominated(srv) is None


def _default_quota_cluster(tmp: Path) -> Path:
    """Pods outside any quota (namespace ``apps`` has none) join koordinator-default-quota, whose max is 4 cpu."""
    objs: list[dict[str, Any]] = [
        node("n1", "10"),
        quota("team-a", {"cpu": "4"}, {"cpu": "4"}),
        pod("d-low-1", "2", namespace="apps", node="n1", priority=0, start="2026-01-01T00:00:00Z"),
        pod("d-low-2", "2", namespace="apps", node="n1", priority=0, start="2026-01-02T00:00:00Z"),
    ]
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


@pytest.mark.parametrize(("disable", "evicted"), [(None, []), (True, []), (False, ["d-low-2"])])
def test_disable_default_quota_preemption_protects_pods_outside_any_quota(
    tmp_path: Path, disable: bool | None, evicted: list[str]
) -> None:
    args: dict[str, Any] = {"defaultQuotaGroupMax": {"cpu": "4", "memory": "64Gi"}}
    if disable is not None:
        args["disableDefaultQuotaPreemption"] = disable
    with _server(_default_quota_cluster(tmp_path), args) as srv:
        hi = pod("d-hi", "2", namespace="apps", priority=100)
        r = srv.client.post("/filter", json=filter_body(hi, ["n1"]))
        assert r.json()["FailedNodes"]["n1"].startswith("Insufficient quotas, quotaName: koordinator-default-quota")
        if evicted:
            _wait(lambda: len(_evictions(srv)) == len(evicted))
        time.sleep(0.3)
        assert [e["name"] for e in _evictions(srv)] == evicted


# ---------------------------------------------------------------- through a real API client


def _kubeconfig(tmp: Path, url: str) -> Path:
    path = tmp / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.parametrize("pdb_blocked", [False, True], ids=["evicted", "pdb-refuses"])
def test_preemption_goes_through_the_eviction_api(tmp_path: Path, pdb_blocked: bool) -> None:
    """With the Kubernetes source on the fake API server: the victim gets a policy/v1 Eviction and the
    preemptor a status patch with nominatedNodeName; a PodDisruptionBudget's 429 is not turned into a
    delete, and the pod is then not nominated."""
    from app.sources.kubernetes import KubernetesSource
    from tests.client.fake_apiserver import FakeAPIServer

    cluster = yaml.safe_load_all(_cluster(tmp_path).joinpath("cluster.yaml").read_text())
    fake = FakeAPIServer()
    try:
        for obj in cluster:
            kind, meta = obj["kind"], obj["metadata"]
            if kind == "Node":
                fake.seed("/api/v1/nodes", obj)
            elif kind == "ElasticQuota":
                fake.seed("/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas", obj)
            else:
                if pdb_blocked and meta["name"] == "a-new":
                    meta["labels"]["pdb"] = "blocked"
                fake.seed("/api/v1/pods", obj)
                fake.seed(f"/api/v1/namespaces/{meta['namespace']}/pods", obj)
        source = KubernetesSource(
            ("Node", "Pod", "ElasticQuota"), kubeconfig=str(_kubeconfig(tmp_path, fake.url)), backoff_initial=0.1
        )
        registry = default_registry()
        cfg = parse_config({}, registry.names())
        with LiveServer(source, cfg) as srv:  # any Source serves, not only FileSource
            r = srv.client.post("/filter", json=filter_body(_preemptor(), ["n1", "n2"]))
            assert r.json()["FailedNodes"]["n1"] == QUOTA_MESSAGE
            _wait(lambda: any(c.path.endswith("/eviction") for c in fake.calls("POST")))
            time.sleep(0.3)
            evictions = [c for c in fake.calls("POST") if c.path.endswith("/eviction")]
            assert [c.path for c in evictions] == ["/api/v1/namespaces/team-a/pods/a-new/eviction"]
            assert evictions[0].body["kind"] == "Eviction"
            assert evictions[0].body["deleteOptions"]["preconditions"]["uid"] == "uid-a-new"
            assert fake.calls("DELETE") == []
            patches = [c for c in fake.calls("PATCH") if "/pods/" in c.path]
            view = srv.client.get(f"{PREFIX}/evictions").json()
            if pdb_blocked:
                assert patches == []
                assert "a-new" in fake.store["/api/v1/namespaces/team-a/pods"]
                assert "disruption budget" in view[0]["error"]
            else:
                assert [(c.path, c.body) for c in patches] == [
                    ("/api/v1/namespaces/team-a/pods/a-hi/status", {"status": {"nominatedNodeName": "n1"}})
                ]
                assert "a-new" not in fake.store["/api/v1/namespaces/team-a/pods"]
                assert view[0]["error"] == ""
    finally:
        fake.close()


def test_kube_scheduler_preemption_is_refused_while_ours_is_under_way(preempt_server: LiveServer) -> None:
    """In one scheduling cycle kube-scheduler calls /filter (our preemption starts) and then, if some node
    failed in-tree, /preempt: it must not evict a second set of victims for the same pod."""
    c = preempt_server.client
    body = {
        "Pod": _preemptor(),
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-a-old"}], "NumPDBViolations": 0}},
    }
    confirmed = {"n1": {"Pods": [{"UID": "uid-a-old"}], "NumPDBViolations": 0}}
    assert c.post("/preempt", json=body).json()["NodeNameToMetaVictims"] == confirmed
    c.post("/filter", json=filter_body(_preemptor(), ["n1", "n2"]))
    _wait(lambda: len(_evictions(preempt_server)) == 1)
    assert c.post("/preempt", json=body).json()["NodeNameToMetaVictims"] == {}


def test_preemption_from_a_filter_with_whole_nodes(preempt_server: LiveServer) -> None:
    """nodeCacheCapable: false (``Nodes`` is a NodeList): the same preemption, the nodes answered back failed."""
    objects = preempt_server.service.cache.nodes
    body = {"Pod": _preemptor(), "Nodes": {"items": [objects[n].obj for n in ("n1", "n2")]}, "NodeNames": None}
    r = preempt_server.client.post("/filter", json=body)
    assert r.json()["Nodes"]["items"] == []
    assert r.json()["FailedNodes"] == {"n1": QUOTA_MESSAGE, "n2": QUOTA_MESSAGE}
    _wait(lambda: _nominated(preempt_server) == "n1")
    assert [e["name"] for e in _evictions(preempt_server)] == ["a-new"]
