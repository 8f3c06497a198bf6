"""The fail-fast check's free capacity (:class:`~app.plugins.coscheduling.capacity.ClusterFree`), kept
incrementally: after any sequence of pod and node events its sums equal a sum over every node taken from
scratch (a fresh ClusterFree over the same cache)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.cache.snapshot import ClusterCache
from app.framework.handle import SnapshotLister
from app.plugins.coscheduling.capacity import ClusterFree
from app.plugins.coscheduling.plugin import _NodeEvents
from app.sources.events import Event, EventType

RESOURCES = ["cpu", "memory", "nvidia.com/gpu"]


def node(name: str, cpu: int = 8) -> dict[str, Any]:
    alloc = {"cpu": str(cpu), "memory": f"{cpu * 2}Gi", "pods": "110"}
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}}


def pod(name: str, node_name: str, cpu_m: int, phase: str = "Running") -> dict[str, Any]:
    requests = {"cpu": f"{cpu_m}m", "memory": f"{cpu_m}Mi"}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": phase},
    }


def kept(cache: ClusterCache) -> ClusterFree:
    free = ClusterFree(SnapshotLister(cache))
    cache.add_listener(_NodeEvents(free))
    return free


def from_scratch(cache: ClusterCache) -> dict[str, int]:
    return ClusterFree(SnapshotLister(cache)).free(RESOURCES)


def test_free_sums_clamp_each_node_at_zero() -> None:
    cache = ClusterCache()
    cache.replace("Node", [node("a", 2), node("b", 4)])
    free = kept(cache)
    assert free.free(["cpu"]) == {"cpu": 6000}
    cache.apply(Event("Pod", EventType.ADDED, pod("big", "a", 3000)))  # a over-committed: counts 0, not -1
    assert free.free(["cpu", "memory"]) == {"cpu": 4000, "memory": (4 + 8) * 2**30 - 3000 * 2**20}
    assert free.free(["nvidia.com/gpu"]) == {"nvidia.com/gpu": 0}


def test_an_assumed_then_forgotten_pod_moves_the_kept_sum_and_back() -> None:
    cache = ClusterCache()
    cache.replace("Node", [node("a", 2), node("b", 4)])
    cache.apply(Event("Pod", EventType.ADDED, pod("p", "", 1500, phase="Pending")))
    free = kept(cache)
    assert free.free(["cpu"]) == {"cpu": 6000}
    entry_pod = cache.assume(cache.pods["uid-p"], "b")
    assert free.free(["cpu"]) == {"cpu": 4500}
    cache.forget(entry_pod.uid)
    assert free.free(["cpu"]) == {"cpu": 6000}


@pytest.mark.parametrize("seed", range(6))
def test_kept_sums_equal_a_sum_from_scratch_after_any_events(seed: int) -> None:
    rng = random.Random(seed)
    cache = ClusterCache()
    names = [f"n{i}" for i in range(12)]
    cache.replace("Node", [node(name, rng.randint(1, 8)) for name in names])
    free = kept(cache)
    pods: dict[str, str] = {}  # name -> node ("" pending)
    for step in range(300):
        op = rng.random()
        name = f"p{rng.randrange(40)}"
        if op < 0.35:  # a pod appears or changes: bound somewhere, moved, or pending
            where = rng.choice([*names, "", "ghost"])  # ghost: a node the cache does not know
            pods[name] = where
            cache.apply(Event("Pod", EventType.MODIFIED, pod(name, where, rng.randint(100, 5000))))
        elif op < 0.5 and name in pods:  # finished or gone
            if rng.random() < 0.5:
                cache.apply(Event("Pod", EventType.MODIFIED, pod(name, pods[name], 500, phase="Succeeded")))
            else:
                cache.apply(Event("Pod", EventType.DELETED, pod(name, pods[name], 500)))
                del pods[name]
        elif op < 0.7:  # assume a pending pod, or forget an assumption
            pending = [uid for uid, p in cache.pods.items() if not p.node_name and uid not in cache.assumed]
            if pending and cache.nodes and rng.random() < 0.6:
                cache.assume(cache.pods[rng.choice(pending)], rng.choice(sorted(cache.nodes)))
            elif cache.assumed:
                cache.forget(rng.choice(sorted(cache.assumed)))
        elif op < 0.75:  # a node changes, goes or comes back
            target = rng.choice(names)
            if rng.random() < 0.3:
                cache.apply(Event("Node", EventType.DELETED, node(target)))
            else:
                cache.apply(Event("Node", EventType.MODIFIED, node(target, rng.randint(1, 8))))
        if rng.random() < 0.4:  # not every event is followed by a check: touched nodes pile up
            assert free.free(RESOURCES) == from_scratch(cache), f"seed {seed}, step {step}"
    assert free.free(RESOURCES) == from_scratch(cache)


def test_many_touched_nodes_rebuild_the_sums() -> None:
    cache = ClusterCache()
    names = [f"n{i}" for i in range(8)]
    cache.replace("Node", [node(name, 4) for name in names])
    free = kept(cache)
    assert free.free(["cpu"]) == {"cpu": 32000}
    for i, name in enumerate(names):  # every node touched: more than a quarter of the cluster
        cache.apply(Event("Pod", EventType.ADDED, pod(f"p{i}", name, 1000)))
    assert free.free(["cpu"]) == {"cpu": 24000}
