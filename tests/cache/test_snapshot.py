"""The snapshot cache: accounting, relists, assume / confirm / forget / expiry."""

from __future__ import annotations

from typing import Any

import pytest

from app.cache.podinfo import parse_pod
from app.cache.snapshot import AssumeError, ClusterCache
from app.sources.events import Event, EventType


def node(name: str, cpu: str = "8", batch_cpu: str | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "16Gi"}
    if batch_cpu:
        alloc["kubernetes.io/batch-cpu"] = batch_cpu
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}}


def pod(
    name: str, node_name: str = "", cpu: str = "1", uid: str | None = None, phase: str = "Running"
) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": phase},
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cache() -> ClusterCache:
    c = ClusterCache(assumed_pod_ttl=30, clock=Clock())
    c.replace("Node", [node("n1"), node("n2")])
    return c


def requested(cache: ClusterCache, name: str) -> int:
    return cache.nodes[name].requested.get("cpu", 0)


def test_pods_are_accounted_and_unaccounted(cache: ClusterCache) -> None:
    cache.apply(Event("Pod", EventType.ADDED, pod("a", "n1", "1500m")))
    cache.apply(Event("Pod", EventType.ADDED, pod("b", "n1", "500m")))
    assert requested(cache, "n1") == 2000
    row = cache.nodes["n1"].row
    assert cache.table.column("req:cpu")[row] == 2000
    cache.apply(Event("Pod", EventType.MODIFIED, pod("b", "n1", "500m", phase="Succeeded")))
    assert requested(cache, "n1") == 1500
    cache.apply(Event("Pod", EventType.DELETED, pod("a", "n1")))
    assert requested(cache, "n1") == 0


def test_pods_before_their_node_are_accounted_when_it_arrives() -> None:
    c = ClusterCache()
    c.apply(Event("Pod", EventType.ADDED, pod("a", "late", "2")))
    c.apply(Event("Node", EventType.ADDED, node("late")))
    assert c.nodes["late"].requested["cpu"] == 2000


def test_replace_deletes_what_the_relist_lacks(cache: ClusterCache) -> None:
    cache.replace("Pod", [pod("a", "n1"), pod("b", "n2")])
    cache.replace("Pod", [pod("a", "n1")])
    assert set(cache.pods) == {"uid-a"}
    assert requested(cache, "n2") == 0
    cache.replace("Node", [node("n1")])
    assert set(cache.nodes) == {"n1"}
    assert cache.table.row("n2") is None


def test_malformed_objects_are_counted_not_raised(cache: ClusterCache) -> None:
    bad = pod("x", "n1", cpu="lots")
    cache.apply(Event("Pod", EventType.ADDED, bad))
    assert cache.rejected_objects == 1
    assert "uid-x" not in cache.pods


def test_assume_accounts_then_watch_confirms(cache: ClusterCache) -> None:
    cache.apply(Event("Pod", EventType.ADDED, pod("p", "", "2")))
    cache.assume(parse_pod(pod("p", "", "2")), "n1")
    assert requested(cache, "n1") == 2000
    assert [p.name for p in cache.assumed_on("n1")] == ["p"]
    # a status update that does not yet show the binding keeps the assumption
    cache.apply(Event("Pod", EventType.MODIFIED, pod("p", "", "2", phase="Pending")))
    assert requested(cache, "n1") == 2000
    cache.apply(Event("Pod", EventType.MODIFIED, pod("p", "n1", "2")))
    assert cache.assumed == {}
    assert requested(cache, "n1") == 2000


def test_forget_and_expiry(cache: ClusterCache) -> None:
    clock = cache.clock
    assert isinstance(clock, Clock)
    cache.assume(parse_pod(pod("p", "", "1")), "n1")
    cache.forget("uid-p")
    assert requested(cache, "n1") == 0
    cache.assume(parse_pod(pod("q", "", "1")), "n2")
    cache.finish_binding("uid-q")
    clock.now += 29
    assert cache.cleanup_expired() == 0
    clock.now += 2
    assert cache.cleanup_expired() == 1
    assert requested(cache, "n2") == 0
    assert cache.pods["uid-q"].node_name == ""


def test_assume_refuses_unknown_node_and_bound_pods(cache: ClusterCache) -> None:
    with pytest.raises(AssumeError, match="node ghost not found"):
        cache.assume(parse_pod(pod("p")), "ghost")
    cache.apply(Event("Pod", EventType.ADDED, pod("b", "n1")))
    with pytest.raises(AssumeError, match="already assigned"):
        cache.assume(parse_pod(pod("b")), "n2")


def test_pod_events_reach_the_listeners_that_override_on_pod_only() -> None:
    """Pod events skip listeners that keep the default ``on_pod`` (issue 29); the others get every pod
    event, a node-only listener still gets nodes, and a listener that raises is counted, not fatal."""
    from app.cache.listener import CacheListener
    from app.cache.snapshot import ClusterCache
    from app.sources.events import Event, EventType

    seen: list[str] = []

    class NodesOnly(CacheListener):
        def on_node(self, name: str, node: object) -> None:
            seen.append(f"node {name}")

    class Pods(CacheListener):
        def on_pod(self, old: object, new: object) -> None:
            seen.append("pod")

    class Broken(CacheListener):
        def on_pod(self, old: object, new: object) -> None:
            raise ValueError("cannot take it")

    cache = ClusterCache()
    for listener in (NodesOnly(), Broken(), Pods()):
        cache.add_listener(listener)
    cache.apply(Event("Node", EventType.ADDED, {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1"}}}))
    cache.apply(Event("Pod", EventType.ADDED, {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}}))
    assert seen == ["node n", "pod"]
    assert cache.rejected_by_kind == {"Pod": 1}
    assert "u" in cache.pods
