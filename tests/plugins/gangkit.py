"""Builders for the Coscheduling tests: nodes, gang pods, PodGroups, and the filter/bind calls
kube-scheduler makes, over real HTTP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.api import coscheduling as n
from tests.conftest import filter_body


def node(name: str, cpu: str = "8") -> dict[str, Any]:
    """A Node with ``cpu`` cores, 64Gi and 110 pods allocatable."""
    res = {"cpu": cpu, "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": res, "capacity": res},
    }


def pod(
    name: str,
    cpu: str = "1",
    *,
    group: str | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    phase: str | None = None,
) -> dict[str, Any]:
    """A pending pod of koord-scheduler requesting ``cpu``; ``group`` labels it into that PodGroup."""
    all_labels = dict(labels or {})
    if group is not None:
        all_labels[n.LABEL_POD_GROUP] = group
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": all_labels,
            "annotations": dict(annotations or {}),
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "job-" + (group or name), "uid": "j"}
            ],
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
    }
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def gang_pod(name: str, gang: str, min_available: str, cpu: str = "1", **extra: str) -> dict[str, Any]:
    """A pod of an annotation-declared gang (``gang.scheduling.koordinator.sh/*`` annotations)."""
    annotations = {n.ANNOTATION_GANG_NAME: gang, n.ANNOTATION_GANG_MIN_NUM: min_available}
    keys = {
        "mode": n.ANNOTATION_GANG_MODE,
        "total": n.ANNOTATION_GANG_TOTAL_NUM,
        "wait": n.ANNOTATION_GANG_WAIT_TIME,
        "groups": n.ANNOTATION_GANG_GROUPS,
        "policy": n.ANNOTATION_GANG_MATCH_POLICY,
    }
    for key, value in extra.items():
        annotations[keys[key]] = value
    return pod(name, cpu, annotations=annotations)


def pod_group(
    name: str, min_member: Any, timeout: Any = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A PodGroup (``scheduling.sigs.k8s.io/v1alpha1``)."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": dict(annotations or {})},
        "spec": spec,
    }


def write(tmp: Path, objs: list[dict[str, Any]]) -> Path:
    """Write ``objs`` as the cluster file of ``tmp`` (rewriting it: the file source sees the change)."""
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


def bind_body(obj: dict[str, Any], node_name: str) -> dict[str, Any]:
    """ExtenderBindingArgs for ``obj`` on ``node_name``."""
    meta = obj["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node_name}


async def bind(client: httpx.AsyncClient, obj: dict[str, Any], node_name: str) -> str:
    """POST /bind and return its ``Error`` ("" when bound)."""
    r = await client.post("/bind", json=bind_body(obj, node_name))
    assert r.status_code == 200, r.text
    error: str = r.json()["Error"]
    return error


def start_binds(client: httpx.AsyncClient, placed: list[tuple[dict[str, Any], str]]) -> list[asyncio.Task[str]]:
    """One /bind task per (pod, node), started in order."""
    return [asyncio.create_task(bind(client, p, nd)) for p, nd in placed]


async def start_binds_in_order(
    client: httpx.AsyncClient, placed: list[tuple[dict[str, Any], str]], timeout: float = 10.0
) -> list[asyncio.Task[str]]:
    """One /bind task per (pod, node), each sent only once the previous one is waiting at Permit (the
    service's waiting-pod count grew) or answered: the arrival order the test states is the order the
    service sees, however loaded the machine."""
    tasks: list[asyncio.Task[str]] = []
    for p, nd in placed:
        before = await _waiting_count(client)
        task = asyncio.create_task(bind(client, p, nd))
        tasks.append(task)
        deadline = asyncio.get_running_loop().time() + timeout
        while not task.done() and await _waiting_count(client) <= before:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"/bind of {p['metadata']['name']} neither waits nor answers")
            await asyncio.sleep(0.01)
    return tasks


async def _waiting_count(client: httpx.AsyncClient) -> int:
    """Pods waiting at Permit in every gang (``GET /apis/v1/plugins/Coscheduling/gangs``)."""
    r = await client.get("/apis/v1/plugins/Coscheduling/gangs")
    assert r.status_code == 200, r.text
    body = r.json()
    gangs = body.values() if isinstance(body, dict) else body
    return sum(len(g.get("waitingForBindChildren") or []) for g in gangs)


def filter_verdict(client: httpx.Client, obj: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """POST /filter for ``obj`` over ``names`` and return the ExtenderFilterResult."""
    r = client.post("/filter", json=filter_body(obj, names))
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def annotations_of(source: Any, name: str) -> dict[str, str]:
    """The annotations the file source holds now for pod ``default/<name>``."""
    obj = source._objects["Pod"][f"default/{name}"]
    return dict(obj["metadata"].get("annotations") or {})


def dumps(value: Any) -> str:
    """Compact JSON (for the groups annotation)."""
    return json.dumps(value)
