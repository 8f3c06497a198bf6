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
    """Readiness: 200 once the source has fully loaded every kind and every supervised loop runs
    (:mod:`app.sources.loops`), else 503 with the reason; ``loops`` names each loop that is not running
    with its last error (it waits to be restarted)."""
    state: ServiceState = request.app.state.service
    if not state.source.ready():
        reason = f"{state.source.description} has not loaded yet"
        return json_response({"status": "not ready", "reason": reason}, 503)
    down = state.loops.not_running()
    if down:
        reason = "loops not running: " + ", ".join(f"{name} ({error})" for name, error in down.items())
        return json_response({"status": "not ready", "reason": reason, "loops": down}, 503)
    return json_response({"status": "ready", "source": state.source.description})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text exposition of the service's registry."""
    state: ServiceState = request.app.state.service
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
