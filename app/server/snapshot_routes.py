"""``GET /apis/v1/snapshot``: the service's view of the cluster, for ``koord snapshot --server``.

Answers ``{"objects": {kind: [objects]}, "configmaps": [...], "config": {plugins, pluginConfig}, "dropped": {...}}``:
the cached objects of :data:`SNAPSHOT_KINDS` (pods trimmed here to what the plugins read,
:func:`app.api.podfields.trim_pod`, so no env or command leaves the service; ``dropped`` counts what was
left out by field path), Koordinator's own ConfigMaps among those the service watches (it watches
ConfigMaps in ``koordinator-system`` only), and the plugin configuration the service runs with.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Request, Response

from app.api.podfields import trim_pod
from app.server.state import ServiceState
from app.server.wire import json_response

router = APIRouter(prefix="/apis/v1", tags=["inspection"])

#: Kinds the answer holds (those ``koord snapshot`` writes).
SNAPSHOT_KINDS: tuple[str, ...] = (
    "Node",
    "Pod",
    "NodeMetric",
    "NodeSLO",
    "Device",
    "ElasticQuota",
    "PodGroup",
    "Reservation",
)
#: Koordinator's ConfigMaps in ``koordinator-system`` the answer may hold.
KOORDINATOR_CONFIGMAPS: tuple[str, ...] = ("koord-scheduler-extender-config", "slo-controller-config")


def service_snapshot(state: ServiceState) -> dict[str, Any]:
    """The answer of ``GET /apis/v1/snapshot`` (module docstring) from ``state``'s cache and framework."""
    cache = state.cache
    objects: dict[str, list[dict[str, Any]]] = {}
    dropped: Counter[str] = Counter()
    objects["Node"] = [cache.nodes[name].obj for name in sorted(cache.nodes)]
    pods = []
    for uid in sorted(cache.pods, key=lambda u: cache.pods[u].key):
        obj = cache.pod_objects.get(uid)
        if obj is None:
            continue
        trimmed, gone = trim_pod(obj)
        dropped.update(gone)
        pods.append(trimmed)
    objects["Pod"] = pods
    for kind in SNAPSHOT_KINDS[2:]:
        stored = cache.objects.get(kind, {})
        objects[kind] = [stored[key] for key in sorted(stored)]
    configmaps = [
        obj
        for obj in cache.objects.get("ConfigMap", {}).values()
        if (obj.get("metadata") or {}).get("namespace") == "koordinator-system"
        and (obj.get("metadata") or {}).get("name") in KOORDINATOR_CONFIGMAPS
    ]
    specs = state.framework.config.plugins
    config = {
        "plugins": [{"name": s.name, "weight": s.weight} for s in specs],
        "pluginConfig": [{"name": s.name, "args": s.args} for s in specs if s.args],
    }
    return {"objects": objects, "configmaps": configmaps, "config": config, "dropped": dict(dropped)}


@router.get("/snapshot")
async def snapshot(request: Request) -> Response:
    """The cluster as the service holds it, pods trimmed, with the plugin configuration in use."""
    state: ServiceState = request.app.state.service
    return json_response(service_snapshot(state))
