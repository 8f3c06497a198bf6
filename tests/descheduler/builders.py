"""Small builders of nodes, pods and NodeMetrics for the descheduler tests."""

from __future__ import annotations

from typing import Any

from app.api.timeparse import format_time
from app.cache.podinfo import parse_pod
from app.descheduler.model import ClusterView, PodView, node_view

NOW = 1_800_000_000.0
OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": True}]


def node(name: str, cpu: str = "10", memory: str = "100Gi", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def pod(name: str, node_name: str, ns: str = "default", owners: Any = OWNER, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"uid-{name}",
        "creationTimestamp": extra.pop("created", "2026-01-01T00:00:00Z"),
        "labels": extra.pop("labels", {}),
        "annotations": extra.pop("annotations", {}),
    }
    if owners:
        meta["ownerReferences"] = owners
    spec = {"nodeName": node_name, "containers": [{"name": "c", "resources": extra.pop("resources", {})}], **extra}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def metric(name: str, system: dict[str, str], pods: dict[str, dict[str, str]], age: float = 0.0) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "updateTime": format_time(NOW - age),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "999"}}, "systemUsage": {"resources": system}},
            "podsMetric": [
                {"namespace": k.split("/")[0], "name": k.split("/")[1], "podUsage": {"resources": v}}
                for k, v in pods.items()
            ],
        },
    }


def view(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], metrics: list[dict[str, Any]], pdbs: Any = ()
) -> ClusterView:
    from app.api.quantity import parse_resource_list

    by_node: dict[str, list[PodView]] = {n["metadata"]["name"]: [] for n in nodes}
    for p in pods:
        info = parse_pod(p)
        by_node.setdefault(info.node_name, []).append(PodView(info, p))
    views = {}
    for n in nodes:
        name = n["metadata"]["name"]
        requested: dict[str, int] = {}
        for pv in by_node.get(name, []):
            for r, v in pv.info.requests.items():
                requested[r] = requested.get(r, 0) + v
        views[name] = node_view(n, parse_resource_list(n["status"]["allocatable"]), requested)
    return ClusterView(views, by_node, {m["metadata"]["name"]: m for m in metrics}, list(pdbs), NOW)
