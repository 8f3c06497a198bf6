"""/preempt over real HTTP, with bodies shaped as kube-scheduler v1.26 sends them (preempt.json): the
MetaVictims form (nodeCacheCapable: true) and the full-pod NodeNameToVictims form (nodeCacheCapable: false).

What we answer is what we evaluated: a node is never answered with an empty victim list (kube-scheduler
then fails the whole preemption with ``expected at least one victim pod on node``), victims unknown to our
cache are never confirmed, and a victim list our plugins narrowed is confirmed only when the node's in-tree
failure is one we can evaluate (resources, pod count) and the narrowed list cures it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.framework.config import parse_config
from app.plugins.registry import default_registry
from app.sources.files import FileSource
from tests.conftest import LiveServer, wire
from tests.plugins.elasticquota.fixtures import node, pod, quota

SAMPLE_NODES = ["fake-node-1", "fake-node-2", "fake-node-3"]


def _sample_victims() -> dict[str, str]:
    """Node -> the victim uid kube-scheduler proposed there in preempt.json."""
    meta = wire("preempt.json")["NodeNameToMetaVictims"]
    return {name: v["Pods"][0]["UID"] for name, v in meta.items()}


def _victim_pod(name: str, uid: str, node_name: str) -> dict[str, Any]:
    """A running low-priority pod shaped like the sample's pod, filling its 2-cpu node."""
    obj = copy.deepcopy(wire("preempt.json")["Pod"])
    obj.update({"apiVersion": "v1", "kind": "Pod"})
    obj["metadata"].update({"name": name, "uid": uid, "labels": {"app": "low"}})
    obj["metadata"].pop("managedFields", None)
    obj["metadata"].pop("annotations", None)
    obj["spec"].update({"nodeName": node_name, "priority": 0, "priorityClassName": ""})
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    obj["status"] = {"phase": "Running", "startTime": "2026-11-22T09:40:00Z"}
    return obj


@pytest.fixture
def sample_server(tmp_path: Path) -> Iterator[LiveServer]:
    """fake-node-1..3 (2 cpu each), each full with the low-priority victim preempt.json names."""
    nodes = [{"apiVersion": "v1", "kind": "Node", **n} for n in wire("filter.nodecache-false.json")["Nodes"]["items"]]
    pods = [_victim_pod(f"low-{i}", uid, n) for i, (n, uid) in enumerate(sorted(_sample_victims().items()))]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([*nodes, *pods]))
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        yield srv


def _as_full_pods(srv: LiveServer, body: dict[str, Any]) -> dict[str, Any]:
    """The same request in the nodeCacheCapable: false form (NodeNameToVictims with whole pods)."""
    objects = srv.service.cache.pod_objects
    victims: dict[str, Any] = {}
    for name, mv in body["NodeNameToMetaVictims"].items():
        full = [
            copy.deepcopy(objects.get(p["UID"]) or {"metadata": {"name": "ghost", "uid": p["UID"]}}) for p in mv["Pods"]
        ]
        victims[name] = {"Pods": full, "NumPDBViolations": mv["NumPDBViolations"]}
    return {"Pod": body["Pod"], "NodeNameToVictims": victims, "NodeNameToMetaVictims": None}


def _answer(srv: LiveServer, body: dict[str, Any]) -> dict[str, Any]:
    r = srv.client.post("/preempt", json=body)
    assert r.status_code == 200, r.text
    victims: dict[str, Any] = r.json()["NodeNameToMetaVictims"]
    assert all(v["Pods"] for v in victims.values()), "a node answered with no victims fails kube-scheduler"
    return victims


FORMS = ["meta-victims", "full-pods"]


def _body(srv: LiveServer, form: str, body: dict[str, Any]) -> dict[str, Any]:
    return body if form == "meta-victims" else _as_full_pods(srv, body)


@pytest.mark.parametrize("form", FORMS)
def test_sample_is_confirmed_when_we_know_every_victim(sample_server: LiveServer, form: str) -> None:
    body = _body(sample_server, form, wire("preempt.json"))
    assert _answer(sample_server, body) == wire("preempt.response.json")["NodeNameToMetaVictims"]


@pytest.mark.parametrize("form", FORMS)
def test_node_with_a_victim_unknown_to_the_cache_is_left_out(sample_server: LiveServer, form: str) -> None:
    body = wire("preempt.json")
    body["NodeNameToMetaVictims"]["fake-node-2"]["Pods"].append({"UID": "not-in-our-cache"})
    answer = _answer(sample_server, _body(sample_server, form, body))
    assert set(answer) == {"fake-node-1", "fake-node-3"}


@pytest.mark.parametrize("form", FORMS)
def test_node_without_victims_is_left_out_not_answered_empty(sample_server: LiveServer, form: str) -> None:
    body = wire("preempt.json")
    body["NodeNameToMetaVictims"]["fake-node-1"]["Pods"] = []
    answer = _answer(sample_server, _body(sample_server, form, body))
    assert set(answer) == {"fake-node-2", "fake-node-3"}


def test_node_unknown_to_the_cache_is_left_out(sample_server: LiveServer) -> None:
    body = wire("preempt.json")
    body["NodeNameToMetaVictims"]["ghost"] = {
        "Pods": [{"UID": _sample_victims()["fake-node-1"]}],
        "NumPDBViolations": 0,
    }
    assert set(_answer(sample_server, body)) == set(SAMPLE_NODES)


def test_unknown_victims_are_not_confirmed_on_a_cluster_without_them(fake_node_server: LiveServer) -> None:
    """The wire sample as-is against a cache holding none of its victims: nothing can be confirmed."""
    assert _answer(fake_node_server, wire("preempt.json")) == {}


# ---------------------------------------------------------------- narrowed by ElasticQuota


def _quota_cluster(tmp: Path, *, node_cpu: str, max_pods: str) -> Path:
    """Node n1 holding a-low (team-a) and b-low (team-b), 2 cpu each; team-a's max is 3 cpu."""
    n1 = node("n1", node_cpu)
    n1["status"]["allocatable"]["pods"] = max_pods
    objs = [
        n1,
        quota("team-a", {"cpu": "3"}, {"cpu": "3"}),
        quota("team-b", {"cpu": "4"}, {"cpu": "40"}),
        pod("a-low", "2", namespace="team-a", quota_name="team-a", node="n1", priority=0),
        pod("b-low", "2", namespace="team-b", quota_name="team-b", node="n1", priority=0),
    ]
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


def _preempt_body(form: str, srv: LiveServer, victims: list[str]) -> dict[str, Any]:
    preemptor = pod("a-hi", "2", namespace="team-a", quota_name="team-a", priority=100)
    body = {
        "Pod": preemptor,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": u} for u in victims], "NumPDBViolations": 1}},
    }
    return _body(srv, form, body)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("node_cpu", "max_pods", "confirmed"),
    [
        # full node (Insufficient cpu, a reason we evaluate) and the narrowed list cures it
        ("4", "2", True),
        # the narrowed list cures cpu but leaves Too many pods (3 pods on a 1-pod node)
        ("4", "1", False),
        # the pod fits the node's resources as it is: kube-scheduler's reason (host port, anti-affinity,
        # ...) is one we cannot evaluate, so the narrowed list is not ours to confirm
        ("8", "110", False),
    ],
    ids=["cpu-cured", "too-many-pods", "reason-outside-our-plugins"],
)
def test_narrowed_victims_are_confirmed_only_for_reasons_we_evaluate(
    tmp_path: Path, form: str, node_cpu: str, max_pods: str, confirmed: bool
) -> None:
    cluster = _quota_cluster(tmp_path, node_cpu=node_cpu, max_pods=max_pods)
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        answer = _answer(srv, _preempt_body(form, srv, ["uid-b-low", "uid-a-low"]))
        # b-low is in another quota: ElasticQuota narrows the list to a-low
        expected = {"n1": {"Pods": [{"UID": "uid-a-low"}], "NumPDBViolations": 1}} if confirmed else {}
        assert answer == expected
        # the list as kube-scheduler sent it, when every victim is allowed, needs no narrowing check
        if node_cpu == "8":
            assert _answer(srv, _preempt_body(form, srv, ["uid-a-low"])) == {
                "n1": {"Pods": [{"UID": "uid-a-low"}], "NumPDBViolations": 1}
            }


@pytest.mark.parametrize(("disable", "confirmed"), [(None, False), (False, True)], ids=["default-true", "false"])
def test_pods_outside_any_quota_preempt_only_without_disable_default_quota_preemption(
    tmp_path: Path, disable: bool | None, confirmed: bool
) -> None:
    objs = [
        node("n1", "4"),
        quota("team-a", {"cpu": "4"}, {"cpu": "4"}),  # any ElasticQuota makes the plugin active
        pod("d-low-1", "2", namespace="apps", node="n1", priority=0, start="2026-01-01T00:00:00Z"),
        pod("d-low-2", "2", namespace="apps", node="n1", priority=0, start="2026-01-02T00:00:00Z"),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    args = {} if disable is None else {"disableDefaultQuotaPreemption": disable}
    registry = default_registry()
    cfg = parse_config({"pluginConfig": [{"name": "ElasticQuota", "args": args}]}, registry.names())
    with LiveServer(FileSource(tmp_path, poll_interval=0), cfg) as srv:
        body = {
            "Pod": pod("d-hi", "2", namespace="apps", priority=100),
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-d-low-2"}], "NumPDBViolations": 0}},
        }
        expected = {"n1": {"Pods": [{"UID": "uid-d-low-2"}], "NumPDBViolations": 0}} if confirmed else {}
        assert _answer(srv, body) == expected
