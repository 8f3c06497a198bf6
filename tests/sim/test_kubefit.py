"""kube-scheduler's own filters in a what-if run: its node sampling (``numFeasibleNodesToFind``,
``nextStartNodeIndex``) and its reasons, over a real cache."""

from __future__ import annotations

from typing import Any

from app.cache.podinfo import parse_pod
from app.cache.snapshot import ClusterCache
from app.sim.kubefit import REASON_AFFINITY, KubeFit


def _node(i: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"n{i:03d}", "labels": {"kubernetes.io/hostname": f"n{i:03d}"}},
        "spec": spec,
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def _pod(cpu: str = "1", **spec: Any) -> tuple[Any, dict[str, Any]]:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec},
    }
    return parse_pod(obj), obj["spec"]


def _cache(nodes: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache()
    cache.replace("Node", nodes)
    return cache


def test_the_search_stops_at_enough_feasible_nodes_and_the_next_one_starts_after_it() -> None:
    nodes = [_node(i) for i in range(200)]
    names = [n["metadata"]["name"] for n in nodes]
    fit = KubeFit(_cache(nodes), names, percentage=10)  # 10 % of 200 is 20: at least 100
    assert fit.to_find == 100
    pod, spec = _pod()
    first, reasons = fit.feasible(pod, spec)
    assert first.tolist() == list(range(100)) and not reasons and fit.next_start == 100
    second, _ = fit.feasible(pod, spec)
    assert second.tolist() == list(range(100, 200)) and fit.next_start == 0
    every = KubeFit(_cache(nodes), names, percentage=100)
    assert len(every.feasible(pod, spec)[0]) == 200


def test_failing_nodes_are_counted_by_their_first_failing_filter() -> None:
    nodes = [
        _node(0),
        _node(1, unschedulable=True),
        _node(2, taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
    ]
    nodes += [_node(i) for i in range(3, 6)]
    names = [n["metadata"]["name"] for n in nodes]
    fit = KubeFit(_cache(nodes), names)
    pod, spec = _pod(cpu="5")  # more than any node's 4 cpu
    found, reasons = fit.feasible(pod, spec)
    assert not len(found)
    assert reasons == {
        "NodeResourcesFit: Insufficient cpu": 4,
        "NodeUnschedulable: node(s) were unschedulable": 1,
        "TaintToleration: node(s) had untolerated taint {gpu: yes}": 1,
    }
    pinned, pinned_spec = _pod(nodeSelector={"kubernetes.io/hostname": "n004"})
    found, reasons = fit.feasible(pinned, pinned_spec)
    assert [names[i] for i in found] == ["n004"]
    fit.next_start = 0
    tolerant, tolerant_spec = _pod(tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert 2 in fit.feasible(tolerant, tolerant_spec)[0].tolist()
    assert REASON_AFFINITY == "NodeAffinity: node(s) didn't match Pod's node affinity/selector"


def test_pod_counts_follow_the_run() -> None:
    node = _node(0)
    node["status"]["allocatable"]["pods"] = "1"
    fit = KubeFit(_cache([node]), ["n000"])
    pod, spec = _pod()
    assert fit.feasible(pod, spec)[0].tolist() == [0]
    fit.assume(0)
    assert fit.feasible(pod, spec)[1] == {"NodeResourcesFit: Too many pods": 1}
    fit.forget(0)
    assert fit.feasible(pod, spec)[0].tolist() == [0]
