"""``/metrics``, ``/healthz`` and ``/explain`` on the descheduler's own port: the components' small
server (:func:`app.api.metricsserver.serve`) with the last round's report added."""

from __future__ import annotations

from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from app.api.metricsserver import serve as serve_metrics


def serve(
    host: str,
    port: int,
    registry: CollectorRegistry,
    healthy: Callable[[], bool],
    last_round: Callable[[], dict[str, Any] | None],
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread and return the server (``shutdown()`` stops it).

    ``GET /metrics``: the registry; ``GET /healthz``: 200 ``ok`` while ``healthy()``, else 503;
    ``GET /explain``: the last round's JSON report (404 before the first round); other paths 404.

    Raises:
        OSError: the port cannot be bound.
    """

    def explain() -> tuple[int, str, bytes]:
        report = last_round()
        if report is None:
            return 404, "application/json", b'{"error": "no round has run yet"}'
        return 200, "application/json", orjson.dumps(report)

    return serve_metrics(
        host,
        port,
        registry,
        healthy,
        unhealthy="not leading or not synced",
        thread_name="descheduler-http",
        extra={"/explain": explain},
    )
