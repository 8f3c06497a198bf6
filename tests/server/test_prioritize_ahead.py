"""``/prioritize`` answers worked out once the ``/filter`` answer is written (issue 47).

kube-scheduler asks ``/prioritize`` for the pod and the nodes it kept a few milliseconds after ``/filter``; the
service scores those nodes in between (``ExtenderService.score_ahead``) and answers the call with that answer only
while nothing the scores read changed (``ChangeStamps``). Every answer must be the bytes scoring at the call gives:
checked against the plain path across node, NodeMetric, pod and quota changes in between, over real HTTP and in a
property test."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from app.cache.changestamps import ChangeStamps
from app.cache.snapshot import ClusterCache
from app.server import extender as extender_module
from app.sources.events import Event, EventType
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.server.test_shared_names import CANDIDATES, NODES, add, answer, make_service, metric, node, pod, reference


def bound_pod(uid: str, node_name: str, cpu: str = "2") -> dict[str, Any]:
    return {
        "metadata": {"name": uid, "namespace": "default", "uid": uid, "resourceVersion": "1"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running"},
    }


def pending_pod(uid: str) -> dict[str, Any]:
    doc = bound_pod(uid, "")
    del doc["spec"]["nodeName"]
    doc["status"] = {"phase": "Pending"}
    return doc


QUOTA = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota"}


def quota(name: str, cpu: str) -> dict[str, Any]:
    return {**QUOTA, "metadata": {"name": name, "namespace": "default"}, "spec": {"max": {"cpu": cpu}}}


# ---------------------------------------------------------------------------------------------- ChangeStamps


def test_each_change_moves_the_counter_of_the_nodes_it_touches() -> None:
    cache = ClusterCache()
    stamps = ChangeStamps(cache.table)
    cache.add_listener(stamps)
    for name in ("a", "b"):
        cache.apply(Event("Node", EventType.ADDED, node(name, "8")))
    a, b = (np.array([cache.table.row(n)], dtype=np.int64) for n in ("a", "b"))

    def moved(change: Event) -> tuple[bool, bool]:
        before = stamps.stamp(a), stamps.stamp(b)
        cache.apply(change)
        return not stamps.unchanged(before[0]), not stamps.unchanged(before[1])

    assert moved(Event("Pod", EventType.ADDED, pending_pod("p"))) == (False, False)  # on no node
    assert moved(Event("NodeMetric", EventType.ADDED, metric("a", "1"))) == (True, False)
    assert moved(Event("Pod", EventType.MODIFIED, bound_pod("p", "b"))) == (False, True)  # bound to b
    assert moved(Event("Pod", EventType.DELETED, bound_pod("p", "b"))) == (False, True)
    assert moved(Event("Node", EventType.MODIFIED, node("a", "16"))) == (True, False)
    assert moved(Event("ElasticQuota", EventType.ADDED, quota("q", "4"))) == (True, True)  # tied to no node
    assert moved(Event("NodeMetric", EventType.ADDED, metric("ghost", "1"))) == (True, True)  # a node with no row
    assert moved(Event("Node", EventType.ADDED, node("c", "8"))) == (True, True)  # a row given out
    assert cache.find_pod("", "default", "p") is None
    cache.apply(Event("Pod", EventType.ADDED, pending_pod("q")))
    before = stamps.stamp(a), stamps.stamp(b)
    cache.assume(cache.pods["q"], "a")  # an assumed pod counts on its node
    assert (not stamps.unchanged(before[0]), not stamps.unchanged(before[1])) == (True, False)
    before = stamps.stamp(a), stamps.stamp(b)
    cache.forget("q")
    assert (not stamps.unchanged(before[0]), not stamps.unchanged(before[1])) == (True, False)


# ---------------------------------------------------------------------------------------------- the verbs

CHANGES = st.one_of(
    st.tuples(st.just("metric"), st.sampled_from(NODES), st.sampled_from(["1", "6", "15"])),
    st.tuples(st.just("bind"), st.sampled_from(NODES), st.sampled_from(["1", "3"])),
    st.tuples(st.just("pending"), st.just(""), st.just("")),
    st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from(["4", "32"])),
    st.tuples(st.just("quota"), st.just(""), st.sampled_from(["1", "100"])),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rounds=st.lists(
        st.tuples(
            st.sampled_from(["1", "2", "6"]),
            st.lists(st.sampled_from(CANDIDATES), min_size=1, max_size=12),
            st.lists(CHANGES, max_size=3),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_prioritize_after_filter_answers_the_plain_paths_bytes(
    tmp_path: Path, rounds: list[tuple[str, list[str], list[tuple[str, str, str]], bool]]
) -> None:
    """Per round: /filter, the answer worked out ahead, some changes, then /prioritize of the survivors (or of
    another pod's): the answer is always the plain path's, and the one worked out ahead is used exactly when no
    change touched the survivors (or anything tied to no node) and the call is the same pod's."""
    service = make_service(tmp_path)
    ext = service.extender
    loop = asyncio.new_event_loop()
    uid = iter(range(10**6))
    try:
        for cpu, names, changes, same_pod in rounds:
            doc = {"Pod": pod(cpu), "Nodes": None, "NodeNames": names}
            survivors = orjson.loads(answer(loop, service, "/filter", doc))["NodeNames"] or []
            ext.score_ahead()
            touched = False
            for what, target, value in changes:
                if what == "metric":
                    service.cache.apply(Event("NodeMetric", EventType.MODIFIED, metric(target, value)))
                elif what == "bind":
                    service.cache.apply(Event("Pod", EventType.ADDED, bound_pod(f"b{next(uid)}", target, value)))
                elif what == "pending":
                    service.cache.apply(Event("Pod", EventType.ADDED, pending_pod(f"w{next(uid)}")))
                elif what == "node":
                    service.cache.apply(Event("Node", EventType.MODIFIED, node(target, value)))
                else:
                    service.cache.apply(Event("ElasticQuota", EventType.MODIFIED, quota("q", value)))
                touched = touched or target in survivors or what == "quota"
            prio = {"Pod": pod(cpu if same_pod else "3"), "Nodes": None, "NodeNames": survivors}
            before = dict(ext.ahead_outcomes)
            got = answer(loop, service, "/prioritize", prio)
            assert got == reference(ext, "/prioritize", prio)
            used = ext.ahead_outcomes["used"] - before.get("used", 0)
            if len(survivors) > 1:
                assert used == (0 if touched or not same_pod else 1)
            else:  # none, or one node: kube-scheduler binds without asking /prioritize, so nothing is scored ahead
                assert used == 0
    finally:
        loop.close()


def families(srv: LiveServer) -> dict[str, float]:
    text = srv.client.get("/metrics").text
    return {
        s.labels["outcome"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "koord_extender_prioritize_ahead"
        for s in f.samples
    }


def test_over_http_the_answer_worked_out_ahead_is_used_until_a_survivor_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the service's own HTTP protocol: /filter's answer is written, then /prioritize is answered with what was
    worked out ahead (``used``); a NodeMetric of a survivor changing in between, or the call coming later than
    AHEAD_MAX_AGE_S, makes it ``unusable`` and the call scores again (the plain path's bytes either way)."""
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        svc = srv.app.state.service
        for i, name in enumerate(NODES):
            add(svc, i, name)
        c = srv.client
        body = {"Pod": pod("2"), "Nodes": None, "NodeNames": CANDIDATES}

        def cycle(change: Any = None) -> bytes:
            survivors = c.post("/filter", content=orjson.dumps(body)).json()["NodeNames"]
            assert survivors
            if change is not None:
                change(survivors)
            prio = {"Pod": pod("2"), "Nodes": None, "NodeNames": survivors}
            got = c.post("/prioritize", content=orjson.dumps(prio)).content
            assert got == reference(svc.extender, "/prioritize", prio)
            return got

        assert families(srv) == {"used": 0, "unusable": 0}
        first = cycle()
        assert families(srv) == {"used": 1, "unusable": 0}
        hot = cycle(lambda s: svc.cache.apply(Event("NodeMetric", EventType.MODIFIED, metric(s[0], "7.9"))))
        assert families(srv) == {"used": 1, "unusable": 1}
        assert hot != first  # the survivor's score moved: the answer worked out before the change was not used
        cycle(lambda s: svc.cache.apply(Event("Pod", EventType.ADDED, pending_pod("pending-1"))))
        assert families(srv) == {"used": 2, "unusable": 1}  # a pending pod is on no node
        monkeypatch.setattr(extender_module, "AHEAD_MAX_AGE_S", 0.0)
        cycle(lambda s: time.sleep(0.01))
        assert families(srv) == {"used": 2, "unusable": 2}


def test_an_answer_never_asked_for_pauses_scoring_ahead(tmp_path: Path) -> None:
    """A scheduler without ``prioritizeVerb`` sends /filter only: after an answer worked out ahead went unasked, the
    next /filter scores nothing ahead, so such a scheduler pays it at most every other pod; the answers stay the plain
    path's, and a /prioritize after a scored /filter uses it."""
    service = make_service(tmp_path)
    ext = service.extender
    loop = asyncio.new_event_loop()
    doc = {"Pod": pod("1"), "Nodes": None, "NodeNames": NODES}
    ran = []
    try:
        for _ in range(5):
            got = answer(loop, service, "/filter", doc)
            ext.score_ahead()
            ran.append(ext._ahead is not None)
            survivors = orjson.loads(got)["NodeNames"]
            assert len(survivors) > 1
            kept = ext._ahead
            assert got == reference(ext, "/filter", doc)  # (the plain path's own /filter keeps nothing to score)
            ext._ahead = kept
        assert ran == [True, False, True, False, True]
        prio = {"Pod": pod("1"), "Nodes": None, "NodeNames": survivors}
        assert answer(loop, service, "/prioritize", prio) == reference(ext, "/prioritize", prio)
        assert ext.ahead_outcomes == {"used": 1}
    finally:
        loop.close()


def test_a_bind_between_filter_and_prioritize_makes_the_answer_worked_out_ahead_unusable(tmp_path: Path) -> None:
    """kube-scheduler's own order over real HTTP: pod ``b``'s ``/bind`` (its binding cycle, concurrent with the next
    pod's scheduling cycle) lands on a survivor between pod ``a``'s ``/filter`` and ``/prioritize``. The binding
    assumes ``b`` on that node, which moves LoadAware's score there, so the answer worked out ahead is ``unusable``
    and the call is answered with the plain path's bytes as they are after the bind."""
    names = ["node-0", "node-1", "node-2"]
    objects: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        objects.append({"apiVersion": "v1", "kind": "Node", **node(name, "16")})
        slo = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric"}
        objects.append({**slo, **metric(name, ("2", "3", "4")[i])})
    big = pending_pod("b")
    big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "8"  # half a node: LoadAware's score moves
    objects += [{"apiVersion": "v1", "kind": "Pod", **pending_pod("a")}, {"apiVersion": "v1", "kind": "Pod", **big}]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(objects))
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        svc, c = srv.app.state.service, srv.client
        pod_a = pending_pod("a")
        body = {"Pod": pod_a, "Nodes": None, "NodeNames": names}
        survivors = c.post("/filter", content=orjson.dumps(body)).json()["NodeNames"]
        assert survivors == names
        prio = {"Pod": pod_a, "Nodes": None, "NodeNames": survivors}
        before = reference(svc.extender, "/prioritize", prio)
        bind = {"PodName": "b", "PodNamespace": "default", "PodUID": "b", "Node": survivors[0]}
        assert c.post("/bind", content=orjson.dumps(bind)).json() == {"Error": ""}
        got = c.post("/prioritize", content=orjson.dumps(prio)).content
        assert families(srv) == {"used": 0, "unusable": 1}
        assert got == reference(svc.extender, "/prioritize", prio)
        assert got != before  # b now counts on survivors[0]: the answer worked out before the bind is not the answer
        assert orjson.loads(got)[0]["Score"] < orjson.loads(before)[0]["Score"]
