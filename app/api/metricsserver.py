"""``/metrics`` (Prometheus text) and ``/healthz`` on a port of its own, with the standard library's HTTP server.

Used by the agent, ``koord manager`` and ``koord descheduler`` (which adds ``/explain``); the service
answers both through FastAPI. Here, in the lowest layer, because the agent may import ``app.api`` only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)


def serve(
    host: str,
    port: int,
    registry: CollectorRegistry,
    healthy: Callable[[], bool],
    *,
    unhealthy: str = "collection stalled",
    thread_name: str = "agent-http",
    extra: Mapping[str, Callable[[], tuple[int, str, bytes]]] | None = None,
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread and return the server (``shutdown()`` stops it).

    ``GET /metrics``: the registry; ``GET /healthz``: 200 ``ok`` while ``healthy()``, else 503 with
    ``unhealthy`` as the body; ``GET <path>`` of ``extra``: what its handler returns as
    ``(status, content type, body)``; other paths 404.

    Raises:
        OSError: the port cannot be bound.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, ctype, code = generate_latest(registry), CONTENT_TYPE_LATEST, 200
            elif path == "/healthz":
                ok = healthy()
                body, ctype, code = (b"ok" if ok else unhealthy.encode()), "text/plain", 200 if ok else 503
            elif extra is not None and path in extra:
                code, ctype, body = extra[path]()
            else:
                body, ctype, code = b"not found", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug(format, *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=thread_name, daemon=True).start()
    return server
