"""``koord manager`` leader election against a fake API server speaking coordination.k8s.io/v1 Leases.

Two managers (each its own kubeconfig token, so the fake tells their requests apart) share one
Lease: only the holder runs the controllers (writes NodeSLOs); when the leader can no longer renew
(its Lease requests fail), it gives up after the renew deadline and exits with code 1, and the
other takes over once the lease it last observed has expired.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.manager.cli import _run

LEASES = "/apis/coordination.k8s.io/v1/namespaces/koordinator-system/leases"
LEASE = f"{LEASES}/koordinator-manager"
NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}
#: lease duration, renew deadline, retry period (seconds; the election library's minimums).
DURATIONS = (3, 2, 1)


class FakeLeaseAPI:
    """LIST (empty watches) for the manager's kinds, the Lease protocol with resourceVersion
    conflicts, and NodeSLO POSTs recorded with the caller's token (never stored, so every
    controller that runs writes them)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.lease_log: list[tuple[float, str, str]] = []  # (time, token, holderIdentity) of accepted writes
        self.nodeslo_posts: list[tuple[float, str, str]] = []  # (time, token, NodeSLO name)
        self.blocked: set[str] = set()  # tokens whose Lease requests fail (500, or dropped when ``drop``)
        self.drop = False
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason}
                self._send(code, {**body, "message": message, "code": code})

            @property
            def token(self) -> str:
                return str(self.headers.get("Authorization", "")).removeprefix("Bearer ")

            def _body(self) -> Any:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")

            def _lease_blocked(self) -> bool:
                if self.token in fake.blocked:
                    if fake.drop:  # a transport error, not an API error
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                    else:
                        self._status(500, "InternalError", "etcd is unreachable from here")
                    return True
                return False

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path == LEASE:
                    if self._lease_blocked():
                        return
                    with fake.lock:
                        lease = fake.lease
                    if lease is None:
                        self._status(404, "NotFound", 'leases.coordination.k8s.io "koordinator-manager" not found')
                    else:
                        self._send(200, lease)
                    return
                if "watch=true" in query:
                    time.sleep(0.2)
                    self._send(200, "")
                    return
                items = [NODE] if path == "/api/v1/nodes" else []
                self._send(200, {"metadata": {"resourceVersion": "1"}, "items": items})

            def do_POST(self) -> None:
                body = self._body()
                if self.path == LEASES:
                    if self._lease_blocked():
                        return
                    with fake.lock:
                        if fake.lease is not None:
                            self._status(
                                409, "AlreadyExists", 'leases.coordination.k8s.io "koordinator-manager" exists'
                            )
                            return
                        fake.lease = fake._stored(body, self.token)
                        self._send(201, fake.lease)
                    return
                if self.path == NODESLOS:
                    fake.nodeslo_posts.append((time.monotonic(), self.token, body["metadata"]["name"]))
                self._send(201, body)

            def do_PUT(self) -> None:
                body = self._body()
                if self.path != LEASE:
                    self._send(200, body)
                    return
                if self._lease_blocked():
                    return
                with fake.lock:
                    current = (fake.lease or {}).get("metadata", {}).get("resourceVersion")
                    if fake.lease is None or body["metadata"].get("resourceVersion") != current:
                        self._status(409, "Conflict", "the object has been modified; please apply your changes")
                        return
                    fake.lease = fake._stored(body, self.token)
                    self._send(200, fake.lease)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _stored(self, body: dict[str, Any], token: str) -> dict[str, Any]:
        """``body`` as the API server stores it: a new resourceVersion, kind and apiVersion set."""
        self.version += 1
        meta = {**(body.get("metadata") or {}), "namespace": "koordinator-system", "resourceVersion": str(self.version)}
        stored = {**body, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta}
        self.lease_log.append((time.monotonic(), token, str(stored["spec"]["holderIdentity"])))
        return stored

    def holder(self) -> str | None:
        """The Lease's current holderIdentity."""
        with self.lock:
            return None if self.lease is None else str(self.lease["spec"]["holderIdentity"])

    def writers(self) -> set[str]:
        """Tokens that wrote NodeSLOs (i.e. whose controllers ran)."""
        return {token for _, token, _ in self.nodeslo_posts}


@pytest.fixture
def fake() -> Iterator[FakeLeaseAPI]:
    api = FakeLeaseAPI()
    yield api
    api.httpd.shutdown()


def kubeconfig(tmp_path: Path, port: int, token: str) -> Path:
    """A kubeconfig for the fake with bearer ``token``."""
    path = tmp_path / f"kubeconfig-{token}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def manager(tmp_path: Path, fake: FakeLeaseAPI, token: str) -> asyncio.Task[int]:
    """``koord manager --kubeconfig ...`` (leader election on) as a task, with identity ``token``."""
    coro = _run(
        None,
        kubeconfig(tmp_path, fake.port, token),
        True,
        "koordinator-manager",
        "koordinator-system",
        token,
        DURATIONS,
    )
    return asyncio.create_task(coro)


async def until(cond: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("drop", [False, True], ids=["api-error", "connection-error"])
async def test_one_leader_runs_controllers_and_the_other_takes_over_when_its_lease_expires(
    tmp_path: Path, fake: FakeLeaseAPI, drop: bool
) -> None:
    fake.drop = drop
    a = manager(tmp_path, fake, "manager-a")
    b: asyncio.Task[int] | None = None
    try:
        await until(lambda: fake.writers() == {"manager-a"})
        assert fake.holder() == "manager-a"
        assert fake.lease is not None and fake.lease["spec"]["leaseDurationSeconds"] == DURATIONS[0]
        b = manager(tmp_path, fake, "manager-b")
        # b follows: a renews every retry period, so b never acquires and never runs the controllers
        await asyncio.sleep(2.5)
        assert fake.holder() == "manager-a"
        assert fake.writers() == {"manager-a"}
        assert not b.done()
        renewals = [t for t, token, _ in fake.lease_log if token == "manager-a"]
        assert len(renewals) >= 2

        # a's Lease requests fail from now on: it gives up after the renew deadline and exits 1
        fake.blocked.add("manager-a")
        blocked_at = time.monotonic()
        await until(a.done)
        assert a.result() == 1
        assert time.monotonic() - blocked_at >= DURATIONS[1] - 0.5

        await until(lambda: fake.holder() == "manager-b")
        last_a = max(t for t, token, _ in fake.lease_log if token == "manager-a")
        took_over = min(t for t, token, holder in fake.lease_log if holder == "manager-b")
        assert took_over - last_a >= DURATIONS[0] - 0.1  # only once a's lease expired
        await until(lambda: "manager-b" in fake.writers())
        first_b = min(t for t, token, _ in fake.nodeslo_posts if token == "manager-b")
        assert first_b >= took_over  # b's controllers started only after b became the leader
        assert not b.done()
    finally:
        for task in (a, b):
            if task is not None and not task.done():
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
