"""Builders for ElasticQuota tests: quotas, pods and nodes as the API server would store them."""

from __future__ import annotations

import json
from typing import Any

from app.api import elasticquota as n


def quota(
    name: str,
    min_: dict[str, str],
    max_: dict[str, str],
    *,
    parent: str = "",
    is_parent: bool = False,
    lend: bool = True,
    namespace: str = "koordinator-system",
    weight: dict[str, str] | None = None,
    namespaces: list[str] | None = None,
) -> dict[str, Any]:
    """An ElasticQuota object."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if parent:
        labels[n.LABEL_QUOTA_PARENT] = parent
    if is_parent:
        labels[n.LABEL_QUOTA_IS_PARENT] = "true"
    if not lend:
        labels[n.LABEL_ALLOW_LENT_RESOURCE] = "false"
    if weight is not None:
        annotations[n.ANNOTATION_SHARED_WEIGHT] = json.dumps(weight)
    if namespaces is not None:
        annotations[n.ANNOTATION_QUOTA_NAMESPACES] = json.dumps(namespaces)
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"min": min_, "max": max_},
    }


def pod(
    name: str,
    cpu: str,
    *,
    namespace: str = "default",
    quota_name: str = "",
    node: str = "",
    priority: int | None = None,
    uid: str = "",
    start: str = "",
    memory: str = "",
    non_preemptible: bool = False,
) -> dict[str, Any]:
    """A pod with one container requesting ``cpu`` (and ``memory``)."""
    labels: dict[str, str] = {}
    if quota_name:
        labels[n.LABEL_QUOTA_NAME] = quota_name
    if non_preemptible:
        labels[n.LABEL_PREEMPTIBLE] = "false"
    requests = {"cpu": cpu}
    if memory:
        requests["memory"] = memory
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if start:
        status["startTime"] = start
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "labels": labels},
        "spec": spec,
        "status": status,
    }


def node(name: str, cpu: str, memory: str = "64Gi") -> dict[str, Any]:
    """A Node with ``cpu`` and ``memory`` allocatable."""
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": alloc, "capacity": alloc},
    }
