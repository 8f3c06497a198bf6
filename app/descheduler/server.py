"""``/metrics``, ``/healthz`` and ``/explain`` on the descheduler's own port (standard library HTTP server)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("koord.descheduler")


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

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, ctype, code = generate_latest(registry), CONTENT_TYPE_LATEST, 200
            elif path == "/healthz":
                ok = healthy()
                body, ctype, code = (b"ok" if ok else b"not leading or not synced"), "text/plain", 200 if ok else 503
            elif path == "/explain":
                report = last_round()
                if report is None:
                    body, ctype, code = b'{"error": "no round has run yet"}', "application/json", 404
                else:
                    body, ctype, code = orjson.dumps(report), "application/json", 200
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
    threading.Thread(target=server.serve_forever, name="descheduler-http", daemon=True).start()
    return server
