"""A real uvicorn server for an app, on a socket bound to port 0 (no port is chosen and released: safe under
pytest-xdist), over plain HTTP or TLS with the client certificate in the ASGI scope, as ``koord scheduler``
serves."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from app.server.clientauth import TLSScopeProtocol


@contextmanager
def serve(app: Any, tls: ssl.SSLContext | None = None, *, ready_path: str = "/readyz") -> Iterator[str]:
    """Serve ``app`` in a thread until the block ends; yields its base URL (``https://localhost:PORT`` with ``tls``,
    whose certificate must hold localhost). Waits for ``ready_path`` to answer 200."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        http=TLSScopeProtocol,
        ssl_context_factory=(lambda _cfg, _default: tls) if tls is not None else None,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"https://localhost:{port}" if tls is not None else f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        with httpx.Client(base_url=url, verify=False, timeout=5) as probe:
            while True:
                try:
                    if probe.get(ready_path).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{url} did not become ready")
                time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
