"""A real uvicorn server for an app, on a socket bound to port 0 (no port is chosen and released: safe under
pytest-xdist), over plain HTTP or TLS with the client certificate in the ASGI scope, as ``koord scheduler``
serves; and a service against the fake API server under delegated authentication and authorization."""

from __future__ import annotations

import copy
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi.routing import APIRoute

from app.server.app import create_app
from app.server.clientauth import ClientAuth
from app.server.httpprotocol import ServiceProtocol
from app.server.inspectauth import inspection_access
from app.sources.kubernetes import KubernetesSource
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer
from tests.conftest import wire


@contextmanager
def serve(app: Any, tls: ssl.SSLContext | None = None, *, ready_path: str | None = "/readyz") -> Iterator[str]:
    """Serve ``app`` in a thread until the block ends; yields its base URL (``https://localhost:PORT`` with ``tls``,
    whose certificate must hold localhost). Waits for ``ready_path`` to answer 200 (None: for any answer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        http=ServiceProtocol,
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
                    answer = probe.get(ready_path or "/")
                    if ready_path is None or answer.status_code == 200:
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


@dataclass
class DelegatedService:
    """A service against the fake API server under the policy ``koord scheduler`` runs (delegated authentication
    and authorization), its caches on the test's clock (``advance``)."""

    url: str
    fake: FakeAPIServer
    clock: list[float]
    app: Any

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        """GET ``path``, with ``Authorization: Bearer token`` when given."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=10)

    def advance(self, seconds: float) -> None:
        """Move the caches' clock on."""
        self.clock[0] += seconds


def _pod(namespace: str, name: str) -> dict[str, Any]:
    pod = copy.deepcopy(wire("filter.json")["Pod"])
    pod["metadata"] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    return pod


@contextmanager
def delegated_service(
    tmp_path: Path,
    *,
    role: str = "extender",
    tls: ssl.SSLContext | None = None,
    client_auth: ClientAuth | None = None,
) -> Iterator[DelegatedService]:
    """A :class:`DelegatedService` with nodes fake-node-1..3 and pods ``team-a/web`` and ``team-b/db``; tokens
    ``alice-token`` (user ``alice``, group ``devs``) and ``prom-token`` (Prometheus' ServiceAccount) are valid, and
    nothing is granted yet."""
    fake = FakeAPIServer(tokens={TOKEN})
    fake.seed("/api/v1/nodes", *wire("filter.nodecache-false.json")["Nodes"]["items"])
    fake.seed("/api/v1/pods", _pod("team-a", "web"), _pod("team-b", "db"))
    fake.add_user("alice-token", "alice", ["devs"])
    fake.add_user("prom-token", "system:serviceaccount:monitoring:prometheus-k8s")
    source = KubernetesSource(("Node", "Pod"), kubeconfig=write_kubeconfig(tmp_path / "service-kc", fake.url))
    clock = [1000.0]
    names = client_auth.inspection_names if client_auth is not None else None
    access = inspection_access(source, names, timer=lambda: clock[0])
    app = create_app(source, role=role, inspection=access, client_auth=client_auth)
    try:
        with serve(app, tls) as url:
            yield DelegatedService(url, fake, clock, app)
    finally:
        fake.close()


#: Paths every process serves to anyone: the kubelet's probes, and the route names.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})


def _routes(routes: list[object], prefix: str = "") -> Iterator[tuple[str, set[str]]]:
    """(path, methods) of every route, those of included routers too (FastAPI 0.16x wraps them)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, set(route.methods)
        elif hasattr(route, "original_router"):
            context = getattr(route, "include_context", None)
            yield from _routes(route.original_router.routes, prefix + (getattr(context, "prefix", "") or ""))


def get_paths(app: object) -> list[str]:
    """Every GET route of ``app`` but the open ones, path parameters filled in."""
    paths = {
        re.sub(r"\{[^}]+\}", "x", path)
        for path, methods in _routes(app.routes)  # type: ignore[attr-defined]
        if "GET" in methods and path not in OPEN_PATHS
    }
    return sorted(paths)
