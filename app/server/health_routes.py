"""GET /healthz, /readyz and /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.server.state import ServiceState
from app.server.wire import json_response

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Response:
    """Liveness: 200 ``ok`` while the process serves."""
    return Response("ok", media_type="text/plain")


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """Readiness: 200 once the source has fully loaded every kind, else 503 with the reason."""
    state: ServiceState = request.app.state.service
    if state.source.ready():
        return json_response({"status": "ready", "source": state.source.description})
    return json_response({"status": "not ready", "reason": f"{state.source.description} has not loaded yet"}, 503)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text exposition of the service's registry."""
    state: ServiceState = request.app.state.service
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
