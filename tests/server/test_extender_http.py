"""The extender verbs over real HTTP (uvicorn), with bodies exactly as kube-scheduler v1.26 sends them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.sources.files import FileSource
from tests.conftest import LiveServer, filter_body, wire

EXAMPLE_NODES = ["node-idle", "node-busy", "node-hot", "node-nokoordlet"]


def test_hot_node_is_filtered_and_scored_low(example_server: LiveServer) -> None:
    pod = wire("filter.json")["Pod"]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
    r = example_server.client.post("/filter", json=filter_body(pod, EXAMPLE_NODES))
    assert r.status_code == 200
    body = r.json()
    assert body["Error"] == ""
    assert body["NodeNames"] == ["node-idle", "node-busy", "node-nokoordlet"]
    assert body["FailedNodes"] == {"node-hot": "node(s) cpu usage exceed threshold"}
    assert body["FailedAndUnresolvableNodes"] == {}

    r = example_server.client.post("/prioritize", json=filter_body(pod, EXAMPLE_NODES))
    assert r.status_code == 200
    scores = {h["Host"]: h["Score"] for h in r.json()}
    assert set(scores) == set(EXAMPLE_NODES)
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores["node-hot"] < scores["node-busy"] < scores["node-idle"]
    assert scores["node-nokoordlet"] == 0  # no NodeMetric: LoadAware scores 0, as upstream


def test_wire_samples_are_accepted_as_is(fake_node_server: LiveServer) -> None:
    c = fake_node_server.client
    r = c.post("/filter", json=wire("filter.json"))
    assert r.status_code == 200
    assert r.json()["NodeNames"] == ["fake-node-1", "fake-node-2", "fake-node-3"]
    assert r.json()["FailedNodes"] == {}

    sample = wire("filter.nodecache-false.json")
    r = c.post("/filter", json=sample)
    assert r.status_code == 200
    assert r.json()["NodeNames"] is None
    assert [n["metadata"]["name"] for n in r.json()["Nodes"]["items"]] == ["fake-node-1", "fake-node-2", "fake-node-3"]
    assert r.json()["Nodes"]["items"][0] == sample["Nodes"]["items"][0]

    r = c.post("/prioritize", json=wire("prioritize.json"))
    assert r.status_code == 200
    assert [h["Host"] for h in r.json()] == ["fake-node-1", "fake-node-2", "fake-node-3"]

    r = c.post("/preempt", json=wire("preempt.json"))
    assert r.status_code == 200
    # this cluster holds none of the sample's victims: none is confirmed (tests/server/test_preempt_http.py)
    assert r.json() == {"NodeNameToMetaVictims": {}}


def test_unknown_nodes_fail_with_reason(fake_node_server: LiveServer) -> None:
    body = wire("filter.json")
    body["NodeNames"] = ["fake-node-1", "ghost"]
    r = fake_node_server.client.post("/filter", json=body)
    assert r.json()["NodeNames"] == ["fake-node-1"]
    assert r.json()["FailedNodes"] == {"ghost": "node not found"}


BAD_BODIES: list[tuple[str, str, bytes, str]] = [
    ("not-json", "/filter", b"{not json", "not valid JSON"),
    ("empty", "/filter", b"", "empty request body"),
    ("array", "/filter", b"[1, 2]", "expected a JSON object"),
    ("no-pod", "/filter", b'{"NodeNames": ["a"]}', "Pod"),
    ("names-not-strings", "/filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1]}', "NodeNames.0"),
    ("pod-not-object", "/prioritize", b'{"Pod": 3, "NodeNames": []}', "Pod"),
    ("bind-missing-node", "/bind", b'{"PodName": "p", "PodNamespace": "d", "PodUID": "u"}', "Node"),
    (
        "preempt-bad-victims",
        "/preempt",
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNameToMetaVictims": {"n": 1}}',
        "NodeNameToMetaVictims.n",
    ),
]


@pytest.mark.parametrize(("path", "raw", "needle"), [b[1:] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES])
def test_malformed_bodies_get_400_and_change_nothing(
    fake_node_server: LiveServer, path: str, raw: bytes, needle: str
) -> None:
    before = fake_node_server.service.cache.counts()
    r = fake_node_server.client.post(path, content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert needle in r.json()["message"]
    assert fake_node_server.service.cache.counts() == before


def test_pod_with_invalid_quantity_gets_400(fake_node_server: LiveServer) -> None:
    body = wire("filter.json")
    body["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    r = fake_node_server.client.post("/filter", json=body)
    assert r.status_code == 400
    assert "spec.containers[0].resources.requests.cpu" in r.json()["message"]


def _pending_batch_pod(example_server: LiveServer) -> dict[str, Any]:
    svc = example_server.service
    pod = svc.cache.find_pod(namespace="batch", name="batch-job-1")
    return copy.deepcopy(svc.cache.pod_objects[pod.uid])


def test_bind_assumes_and_accounts_at_once(example_server: LiveServer) -> None:
    c = example_server.client
    pod = _pending_batch_pod(example_server)
    before = c.get("/apis/v1/nodes/node-idle").json()
    assert "kubernetes.io/batch-cpu" not in before["requested"]
    bind = {"PodName": "batch-job-1", "PodNamespace": "batch", "PodUID": pod["metadata"]["uid"], "Node": "node-idle"}
    r = c.post("/bind", json=bind)
    assert r.status_code == 200 and r.json() == {"Error": ""}
    after = c.get("/apis/v1/nodes/node-idle").json()
    assert after["requested"]["kubernetes.io/batch-cpu"] == "2000"
    assert after["requested"]["kubernetes.io/batch-memory"] == "4Gi"
    assert {"namespace": "batch", "name": "batch-job-1", "uid": pod["metadata"]["uid"]} in after["pods"]
    # binding the same pod elsewhere is refused and changes nothing
    r = c.post("/bind", json={**bind, "Node": "node-busy"})
    assert "already assigned" in r.json()["Error"]
    assert c.get("/apis/v1/nodes/node-busy").json()["requested"].get("kubernetes.io/batch-cpu") == "3000"


def test_bind_errors_are_answered_in_the_error_field(example_server: LiveServer) -> None:
    c = example_server.client
    r = c.post("/bind", json={"PodName": "nope", "PodNamespace": "x", "PodUID": "nope", "Node": "node-idle"})
    assert r.status_code == 200
    assert r.json()["Error"] == 'pods "nope" not found'
    pod = _pending_batch_pod(example_server)
    r = c.post(
        "/bind",
        json={"PodName": "batch-job-1", "PodNamespace": "batch", "PodUID": pod["metadata"]["uid"], "Node": "ghost"},
    )
    assert r.json()["Error"] == "node ghost not found"
    assert example_server.service.cache.find_pod(namespace="batch", name="batch-job-1").node_name == ""


def test_batch_pod_beyond_batch_allocatable_is_unresolvable(example_server: LiveServer) -> None:
    pod = _pending_batch_pod(example_server)
    r = example_server.client.post("/filter", json=filter_body(pod, EXAMPLE_NODES))
    body = r.json()
    # node-hot has batch-cpu 1000 < 2000 requested: it can never fit; node-nokoordlet has none.
    assert body["FailedAndUnresolvableNodes"]["node-hot"] == "Insufficient kubernetes.io/batch-cpu"
    assert body["FailedAndUnresolvableNodes"]["node-nokoordlet"] == (
        "Insufficient kubernetes.io/batch-cpu, Insufficient kubernetes.io/batch-memory"
    )
    assert body["NodeNames"] == ["node-idle", "node-busy"]


def test_explain_answers_per_plugin(example_server: LiveServer) -> None:
    pod = wire("filter.json")["Pod"]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
    r = example_server.client.post("/apis/v1/explain", json=filter_body(pod, ["node-hot", "node-idle", "ghost"]))
    assert r.status_code == 200
    nodes = r.json()["nodes"]
    assert list(nodes) == ["node-hot", "node-idle", "ghost"]
    hot = nodes["node-hot"]
    assert hot["feasible"] is False
    assert hot["filter"]["LoadAwareScheduling"] == {
        "status": "Unschedulable",
        "reason": "node(s) cpu usage exceed threshold",
    }
    assert hot["filter"]["NodeResourcesFit"] == {"status": "Success", "reason": ""}
    assert hot["kubeScheduler"] == {"NodeResourcesFit": {"status": "Success", "reason": ""}}
    # kube-scheduler scores feasible nodes only
    assert hot["scores"] == {} and hot["total"] is None and hot["extenderScore"] is None
    idle = nodes["node-idle"]
    assert idle["feasible"] is True
    assert 0 <= idle["scores"]["LoadAwareScheduling"] <= 100
    assert idle["extenderScore"] == idle["total"] * 10 // 100
    assert nodes["ghost"]["filter"]["Snapshot"]["reason"] == "node not found"
    assert example_server.client.post("/apis/v1/explain", content=b"nope").status_code == 400


def test_explain_shows_kube_schedulers_own_verdict(example_server: LiveServer) -> None:
    """cpu and memory are kube-scheduler's to check: a 200-cpu pod is not "feasible" on a 16-cpu node."""
    pod = wire("filter.json")["Pod"]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "200", "memory": "1Gi"}}
    r = example_server.client.post("/apis/v1/explain", json=filter_body(pod, ["node-idle", "node-nokoordlet"]))
    assert r.status_code == 200
    for node in r.json()["nodes"].values():
        assert node["kubeScheduler"]["NodeResourcesFit"] == {"status": "Unschedulable", "reason": "Insufficient cpu"}
        assert node["feasible"] is False and node["total"] is None and node["scores"] == {}
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "63Gi"}}
    idle = example_server.client.post("/apis/v1/explain", json=filter_body(pod, ["node-idle"])).json()["nodes"]
    assert idle["node-idle"]["kubeScheduler"]["NodeResourcesFit"]["reason"] == "Insufficient memory"


def test_inspection_health_and_metrics(example_server: LiveServer) -> None:
    c = example_server.client
    assert c.get("/healthz").text == "ok"
    assert c.get("/readyz").status_code == 200
    node = c.get("/apis/v1/nodes/node-hot").json()
    assert node["allocatable"]["cpu"] == "16"
    assert node["usage"] == {"cpu": "12800m", "memory": "30Gi"}
    assert 0 <= node["nodeMetricAgeSeconds"] < 60
    assert c.get("/apis/v1/nodes/node-nokoordlet").json()["nodeMetricAgeSeconds"] is None
    missing = c.get("/apis/v1/nodes/ghost")
    assert missing.status_code == 404 and missing.json() == {"message": "cannot find node ghost"}
    services = c.get("/apis/v1/__services__").json()
    assert "/apis/v1/nodes/:nodeName" in services["GET"]
    assert "/apis/v1/plugins/LoadAwareScheduling/node/:nodeName" in services["GET"]
    la = c.get("/apis/v1/plugins/LoadAwareScheduling/node/node-idle").json()
    assert la["pods"][0]["pod"]["metadata"]["name"] == "web-1"
    c.post("/filter", json=filter_body(wire("filter.json")["Pod"], ["node-idle"]))
    text = c.get("/metrics").text
    assert 'koord_extender_requests_total{code="200",verb="filter"}' in text
    assert "koord_extender_request_duration_seconds_bucket" in text
    assert 'koord_cache_objects{kind="Node"} 4.0' in text
    assert "koord_source_watch_restarts_total 0.0" in text


def _metric_cluster(tmp: Path, annotations: dict[str, str]) -> Path:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
    }
    metric = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": "n1", "annotations": annotations},
        "status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}}},
    }
    (tmp / "c.yaml").write_text(yaml.safe_dump_all([node, metric]))
    return tmp


@pytest.mark.parametrize(
    ("annotations", "failed"),
    [
        # upstream: a NodeMetric without status.updateTime is expired (filterExpiredNodeMetrics)
        ({}, {"n1": "node(s) nodeMetric expired"}),
        # the file source's explicit stand-in for a live agent: stamped now, so the node passes
        ({"koordinator-py.io/stamp-update-time": "true"}, {}),
    ],
)
def test_node_metric_without_update_time_is_expired_unless_stamped(
    tmp_path: Path, annotations: dict[str, str], failed: dict[str, str]
) -> None:
    with LiveServer(FileSource(_metric_cluster(tmp_path, annotations), poll_interval=0)) as srv:
        pod = wire("filter.json")["Pod"]
        body = srv.client.post("/filter", json=filter_body(pod, ["n1"])).json()
        assert body["FailedNodes"] == failed
        assert body["NodeNames"] == ([] if failed else ["n1"])
