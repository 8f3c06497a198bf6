"""Inspection under Koordinator's paths (``/apis/v1/...``) and ``POST /apis/v1/explain``.

Mirrors pkg/scheduler/frameworkext/services: ``__services__`` lists the registered paths by
method, ``nodes/{nodeName}`` shows a node's snapshot, ``pods/{namespace}/{name}`` a pod's scheduling state
(phase, node, its ``scheduling.koordinator.sh/`` annotations and its device allocation), plugins add theirs under
``plugins/<Plugin>/`` (their handlers return data or raise ``NotFound``, answered 404 here).
Errors answer ``{"message": ...}`` as upstream does. Who may read what: :mod:`app.server.inspectauth`.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, Request, Response

from app.api.devicenames import ANNOTATION_DEVICE_ALLOCATED
from app.api.extender import ExtenderArgs
from app.api.quantity import QuantityError, display_resource_list, parse_resource_list
from app.api.timeparse import parse_time
from app.cache.podinfo import PodError
from app.client.errors import NotFound
from app.framework.interfaces import ServiceProvider
from app.plugins.deviceshare.allocation import format_allocations
from app.plugins.deviceshare.plugin import DeviceShare
from app.plugins.loadaware.plugin import LoadAwareScheduling
from app.plugins.nodenumaresource.plugin import NodeNUMAResource
from app.server.state import ServiceState
from app.server.wire import BadRequest, decode, error_response, json_response

router = APIRouter(prefix="/apis/v1", tags=["inspection"])


def _gin_path(path: str) -> str:
    """``/apis/v1/nodes/{nodeName}`` -> ``/apis/v1/nodes/:nodeName`` (how upstream lists routes)."""
    return path.replace("{", ":").replace("}", "")


@router.get("/__services__")
async def list_services(request: Request) -> Response:
    """Registered ``/apis/v1`` paths by HTTP method, sorted."""
    services: dict[str, list[str]] = {}
    for path, operations in request.app.openapi().get("paths", {}).items():
        if path.startswith("/apis/v1/"):
            for method in operations:
                services.setdefault(method.upper(), []).append(_gin_path(path))
    return json_response({m: sorted(paths) for m, paths in sorted(services.items())})


def node_usage(state: ServiceState, name: str) -> tuple[dict[str, int] | None, float | None]:
    """(reported node usage, NodeMetric age in seconds) from the cached NodeMetric of ``name``."""
    metric = state.cache.objects.get("NodeMetric", {}).get(name)
    if metric is None:
        return None, None
    status = metric.get("status") or {}
    age = None
    if status.get("updateTime"):
        try:
            age = max(0.0, round(state.cache.clock() - parse_time(status["updateTime"]), 3))
        except ValueError:
            age = None
    usage = ((status.get("nodeMetric") or {}).get("nodeUsage") or {}).get("resources")
    try:
        return (parse_resource_list(usage) if usage is not None else None), age
    except QuantityError:
        return None, age


@router.get("/nodes/{nodeName}")
async def query_node(nodeName: str, request: Request) -> Response:
    """A node's snapshot: allocatable, requested (assumed pods included), reported usage,
    NodeMetric age, assumed and bound pods, and the CPU topology its NodeResourceTopology reports
    (``cpuTopology``: cpus, sockets, cores, threads per core, cpus per NUMA node; null when none) and, with
    NodeNUMAResource enabled, ``cpuAllocation``: per NUMA node its free, allocated and kubelet-reserved cpus
    and the cpuset holders (null without a cpu topology).
    404 ``cannot find node <name>`` when unknown."""
    state: ServiceState = request.app.state.service
    node = state.cache.nodes.get(nodeName)
    if node is None:
        return error_response(f"cannot find node {nodeName}", 404)
    usage, age = node_usage(state, nodeName)
    assumed = state.cache.assumed_on(nodeName)
    pods = sorted((state.cache.pods[u] for u in node.pods if u in state.cache.pods), key=lambda p: p.key)
    body: dict[str, Any] = {
        "name": nodeName,
        "allocatable": display_resource_list(node.allocatable),
        "requested": display_resource_list({k: v for k, v in node.requested.items() if v}),
        "usage": display_resource_list(usage) if usage is not None else None,
        "nodeMetricAgeSeconds": age if age is None or math.isfinite(age) else None,
        "assumedPods": [{"namespace": p.namespace, "name": p.name, "uid": p.uid} for p in assumed],
        "pods": [{"namespace": p.namespace, "name": p.name, "uid": p.uid} for p in pods],
    }
    topology = state.cache.node_topologies.get(nodeName)
    body["cpuTopology"] = topology.summary() if topology is not None else None
    numa = next((p for p in state.framework.plugins if isinstance(p, NodeNUMAResource)), None)
    body["cpuAllocation"] = numa.node_cpus(nodeName) if numa is not None else None
    return json_response(body)


#: Prefix of the annotations the pod inspection shows.
SCHEDULING_ANNOTATION_PREFIX = "scheduling.koordinator.sh/"


def _device_allocated(state: ServiceState, uid: str, annotations: dict[str, str]) -> tuple[Any, str | None]:
    """(the pod's device allocation as JSON, where it came from): its ``device-allocated`` annotation, else
    what DeviceShare holds for it (embedded mode, or before the annotation is written); (None, None) if none."""
    raw = annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if raw:
        try:
            return orjson.loads(raw), "annotation"
        except orjson.JSONDecodeError:
            return raw, "annotation"
    plugin = next((p for p in state.framework.plugins if isinstance(p, DeviceShare)), None)
    held = plugin.devices.allocations_of(uid) if plugin is not None and uid else None
    if held:
        return orjson.loads(format_allocations(held[1])), "scheduler"
    return None, None


@router.get("/pods/{namespace}/{name}")
async def query_pod(namespace: str, name: str, request: Request) -> Response:
    """A pod as the scheduler sees it: uid, phase, node (``assumedNode`` while bound only in the cache), its
    ``scheduling.koordinator.sh/`` annotations, requests, and ``deviceAllocated``: the parsed
    ``device-allocated`` annotation, or in embedded mode (no API server to write annotations to) the
    allocation DeviceShare made, with ``deviceAllocatedFrom`` saying which. 404 ``cannot find pod ns/name``."""
    state: ServiceState = request.app.state.service
    pod = state.cache.find_pod(namespace=namespace, name=name)
    if pod is None or pod.namespace != namespace or pod.name != name:
        return error_response(f"cannot find pod {namespace}/{name}", 404)
    annotations = {k: v for k, v in sorted(pod.annotations.items()) if k.startswith(SCHEDULING_ANNOTATION_PREFIX)}
    allocated, source = _device_allocated(state, pod.uid, pod.annotations)
    assumed = state.cache.assumed.get(pod.uid)
    body: dict[str, Any] = {
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
        "phase": pod.phase,
        "nodeName": pod.node_name,
        "assumedNode": assumed.node if assumed is not None else None,
        "requests": display_resource_list({k: v for k, v in pod.requests.items() if v}),
        "annotations": annotations,
        "deviceAllocated": allocated,
        "deviceAllocatedFrom": source,
    }
    return json_response(body)


def _percent(used: dict[str, int] | None, allocatable: dict[str, int]) -> dict[str, float] | None:
    """``used`` over ``allocatable`` in percent (one decimal) for resources with a positive allocatable."""
    if used is None:
        return None
    return {r: round(100.0 * v / allocatable[r], 1) for r, v in sorted(used.items()) if allocatable.get(r, 0) > 0}


@router.get("/overview")
async def overview(request: Request) -> Response:
    """Every node (allocatable, requested, reported usage and its percent of allocatable, LoadAware's
    usage thresholds, pod count) and every pending pod with its object (what ``/ui`` draws and what
    ``POST /apis/v1/explain`` takes)."""
    state: ServiceState = request.app.state.service
    load_aware = next((p for p in state.framework.plugins if isinstance(p, LoadAwareScheduling)), None)
    nodes = []
    for name in sorted(state.cache.nodes):
        node = state.cache.nodes[name]
        usage, age = node_usage(state, name)
        nodes.append(
            {
                "name": name,
                "allocatable": display_resource_list(node.allocatable),
                "requested": display_resource_list({k: v for k, v in node.requested.items() if v}),
                "usage": display_resource_list(usage) if usage is not None else None,
                "usagePercent": _percent(usage, node.allocatable),
                "usageThresholds": load_aware.usage_thresholds(name) if load_aware is not None else {},
                "nodeMetricAgeSeconds": age if age is None or math.isfinite(age) else None,
                "pods": len(node.pods),
            }
        )
    pending = []
    for pod in sorted(state.cache.pods.values(), key=lambda p: p.key):
        if pod.node_name or pod.terminated or pod.uid in state.cache.assumed:
            continue
        pending.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
                "requests": display_resource_list(pod.requests),
                "pod": state.cache.pod_objects.get(pod.uid),
            }
        )
    return json_response({"nodes": nodes, "pendingPods": pending})


@router.get("/nodeslos/{nodeName}")
async def query_nodeslo(nodeName: str, request: Request) -> Response:
    """The cached NodeSLO named after the node; 404 when there is none."""
    state: ServiceState = request.app.state.service
    obj = state.cache.objects.get("NodeSLO", {}).get(nodeName)
    if obj is None:
        return error_response(f"cannot find nodeslo {nodeName}", 404)
    return json_response(obj)


@router.get("/plugins")
async def list_plugins(request: Request) -> Response:
    """Enabled plugins with their weights and extension points."""
    state: ServiceState = request.app.state.service
    return json_response(state.framework.describe())


@router.post("/explain")
async def explain(request: Request) -> Response:
    """Same body as ``/filter``; answers per node the filter verdict of every plugin and the scores."""
    state: ServiceState = request.app.state.service
    try:
        response = json_response(state.extender.explain(decode(await request.body(), ExtenderArgs)))
    except (BadRequest, PodError) as exc:
        response = error_response(str(exc), 400)
    state.metrics.observe_inspection("explain", response.status_code)
    return response


def install_plugin_routes(app: FastAPI, state: ServiceState) -> None:
    """Mount each ServiceProvider plugin's routes under ``/apis/v1/plugins/<name>``."""
    for plugin in state.framework.plugins:
        if not isinstance(plugin, ServiceProvider):
            continue
        for path, handler in plugin.routes():
            app.add_api_route(
                f"/apis/v1/plugins/{plugin.name}{path}",
                _plugin_endpoint(handler),
                methods=["GET"],
                name=f"{plugin.name}:{path}",
                summary=(handler.__doc__ or "").strip().splitlines()[0] if handler.__doc__ else None,
            )


def _plugin_endpoint(handler: Any) -> Any:
    """An endpoint calling ``handler`` with the path parameters and answering its result as JSON.

    Plugins return plain data and never build HTTP answers: a handler raising
    :class:`~app.client.errors.NotFound` is answered 404 ``{"message": <its message>}``.
    """

    async def endpoint(request: Request) -> Response:
        try:
            result = await handler(**request.path_params)
        except NotFound as exc:
            return error_response(exc.message, 404)
        return json_response(result)

    return endpoint
