"""Builders for Reservation tests: nodes, pods and Reservations as the API server would store them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import LiveServer

GROUP = "scheduling.koordinator.sh/v1alpha1"


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", **extra: str) -> dict[str, Any]:
    """A Ready node with ``cpu``/``memory``/``pods`` (and extended resources) allocatable."""
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **{k.replace("__", "/"): v for k, v in extra.items()}}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": alloc, "capacity": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(
    name: str,
    cpu: str = "1",
    memory: str = "1Gi",
    *,
    node: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A pod with one container requesting ``cpu`` and ``memory``."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def reservation(
    name: str,
    cpu: str = "2",
    memory: str = "2Gi",
    *,
    owners: list[dict[str, Any]] | None = None,
    policy: str = "",
    allocate_once: bool | None = None,
    ttl: str | None = None,
    expires: str | None = None,
    node_name: str = "",
    labels: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A Reservation whose template requests ``cpu``/``memory`` (plus ``extra``) and whose owners default to
    pods labelled ``app: web``."""
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    tspec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}
    if node_name:
        tspec["nodeName"] = node_name
    spec: dict[str, Any] = {
        "template": {"metadata": {"namespace": "default"}, "spec": tspec},
        "owners": owners if owners is not None else [{"labelSelector": {"matchLabels": {"app": "web"}}}],
    }
    if policy:
        spec["allocatePolicy"] = policy
    if allocate_once is not None:
        spec["allocateOnce"] = allocate_once
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = expires
    meta: dict[str, Any] = {"name": name, "uid": f"ruid-{name}", "labels": labels or {}}
    meta["creationTimestamp"] = created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    obj: dict[str, Any] = {"apiVersion": GROUP, "kind": "Reservation", "metadata": meta, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def write_cluster(path: Path, objects: list[dict[str, Any]]) -> Path:
    """Write ``objects`` as one multi-document YAML file in ``path`` and return the folder."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "cluster.yaml").write_text(yaml.safe_dump_all(objects))
    return path


def wait_for(check: Any, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``check()`` until it returns a truthy value (returned) or ``timeout`` passes (AssertionError)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")


def reservation_view(srv: LiveServer, name: str) -> dict[str, Any]:
    """``GET /apis/v1/plugins/Reservation/reservations/{name}`` (asserting 200)."""
    resp = srv.client.get(f"/apis/v1/plugins/Reservation/reservations/{name}")
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    return data


def phase_is(srv: LiveServer, name: str, phase: str) -> dict[str, Any] | None:
    """The view of ``name`` when its phase is ``phase``, else None."""
    view = reservation_view(srv, name)
    return view if view["phase"] == phase else None


def filter_call(srv: LiveServer, pod_obj: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """POST /filter (nodeCacheCapable) and return the ExtenderFilterResult."""
    resp = srv.client.post("/filter", json={"Pod": pod_obj, "Nodes": None, "NodeNames": names})
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    return data


def prioritize_call(srv: LiveServer, pod_obj: dict[str, Any], names: list[str]) -> dict[str, int]:
    """POST /prioritize and return host -> score."""
    resp = srv.client.post("/prioritize", json={"Pod": pod_obj, "Nodes": None, "NodeNames": names})
    assert resp.status_code == 200, resp.text
    return {e["Host"]: e["Score"] for e in resp.json()}


def bind_call(srv: LiveServer, pod_obj: dict[str, Any], node_name: str) -> dict[str, Any]:
    """POST /bind and return the ExtenderBindingResult."""
    meta = pod_obj["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node_name}
    resp = srv.client.post("/bind", json=body)
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    return data


def annotation_json(value: str) -> Any:
    """Decode a JSON annotation value."""
    return json.loads(value)


#: Collections of the fake API server: pods as listed and watched, and where the Eviction API finds them.
PODS = "/api/v1/pods"
NS_PODS = "/api/v1/namespaces/default/pods"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"


@contextmanager
def serve_on_fake_apiserver(
    tmp_path: Path, kinds: tuple[str, ...], seeds: list[tuple[str, dict[str, Any]]]
) -> Iterator[tuple[LiveServer, Any]]:
    """The service with the Kubernetes source on a fake API server seeded with ``seeds`` ((collection path,
    object); pods go to both :data:`PODS` and :data:`NS_PODS`), listing and watching ``kinds``. Yields the
    server and the ``FakeAPIServer``."""
    from app.sources.kubernetes import KubernetesSource
    from tests.client.fake_apiserver import FakeAPIServer

    fake = FakeAPIServer()
    try:
        for coll, obj in seeds:
            fake.seed(coll, obj)
            if coll == PODS:
                fake.seed(NS_PODS, obj)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
            "current-context": "fake",
        }
        (tmp_path / "kubeconfig").write_text(json.dumps(config))
        source = KubernetesSource(kinds, kubeconfig=str(tmp_path / "kubeconfig"), backoff_initial=0.1)
        with LiveServer(source) as srv:
            yield srv, fake
    finally:
        fake.close()
