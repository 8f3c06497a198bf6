"""The service under simulation: the real app on a real uvicorn server in a background thread.

:class:`InProcessService` builds ``create_app(SimSource, config)``, serves it on 127.0.0.1 at a free
port (uvloop and httptools when installed, as ``koord scheduler`` does), waits for ``/readyz``, and
offers :meth:`InProcessService.call` to run a coroutine or function on the server's event loop
(source writes and cache reads must happen there) plus one keep-alive httpx client (over
:class:`~app.sim.transport.KeepAliveTransport`). The verb loop runs on the server's loop
(:meth:`app.sim.run.Simulation.run`) with its own connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn

from app.framework.config import SchedulerConfig
from app.server.app import create_app
from app.server.state import ServiceState
from app.sim.source import SimSource
from app.sim.transport import KeepAliveTransport

T = TypeVar("T")

#: Loop turns :meth:`InProcessService.read` yields before reading, so writes the service deferred to
#: tasks (a task, then its watch event) are applied.
READ_YIELDS = 4
#: Seconds to wait for the server to answer ``/readyz``.
START_TIMEOUT = 30.0


class ServiceError(RuntimeError):
    """The in-process service did not start (or died)."""


def listening_socket() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1 and kept open for the server: choosing a port and
    binding it later raced with the other runs of a parallel sweep (``address already in use``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


async def settle() -> None:
    """Yield the loop :data:`READ_YIELDS` turns, so that writes the service deferred to tasks (a task,
    then its watch event, e.g. PreBind annotation patches) are applied before a read of the cache."""
    for _ in range(READ_YIELDS):
        await asyncio.sleep(0)


class InProcessService:
    """Context manager: start on enter, stop on exit.

    Args:
        config: the plugin configuration of the service.
        cluster: cluster files the service starts with (a file or directory, read once, as
            ``koord scheduler --cluster`` reads them: ``koord sim whatif``); None: an empty cluster.
        loop: uvicorn's loop setting (``auto``: uvloop when installed; ``asyncio``).
        http: uvicorn's HTTP implementation (``auto``: httptools when installed).
        start_timeout: seconds to wait for ``/readyz`` (loading a large cluster takes a while).
        log_level: uvicorn's (``critical`` when the caller reports a failed start itself).

    Raises (on enter):
        ConfigError: the plugin configuration is invalid.
        ServiceError: the server did not become ready in ``start_timeout`` seconds (or exited: the
            cluster files could not be loaded).
    """

    def __init__(
        self,
        config: SchedulerConfig,
        *,
        cluster: Path | None = None,
        loop: str = "auto",
        http: str = "auto",
        start_timeout: float = START_TIMEOUT,
        log_level: str = "warning",
    ) -> None:
        self.start_timeout = start_timeout
        self._tmp = tempfile.TemporaryDirectory(prefix="koord-sim-")
        self.source = SimSource(cluster if cluster is not None else self._tmp.name)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.app = create_app(self.source, config, background=[self._capture_loop])
        self._socket = listening_socket()
        self.port = int(self._socket.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level=log_level, access_log=False, loop=loop, http=http
        )
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self._serve, name="koord-sim-server", daemon=True)
        self.client = httpx.Client(
            base_url=self.url,
            headers={"Content-Type": "application/json"},
            transport=KeepAliveTransport("127.0.0.1", self.port),
        )

    def _serve(self) -> None:
        """The server thread: uvicorn's ``run``; a failed start (it calls ``sys.exit``) ends the thread quietly,
        :meth:`__enter__` reports it."""
        with contextlib.suppress(SystemExit):
            self.server.run(sockets=[self._socket])

    async def _capture_loop(self, state: ServiceState) -> None:
        """A service-lifetime background task whose only job is to learn the server's loop."""
        self._loop = asyncio.get_running_loop()
        await asyncio.Event().wait()

    @property
    def state(self) -> ServiceState:
        """The service's state (cache, framework, extender) for in-process inspection."""
        state: ServiceState = self.app.state.service
        return state

    def __enter__(self) -> InProcessService:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if not self.thread.is_alive():
                raise ServiceError(f"the service on port {self.port} exited during start-up")
            try:
                if self.client.get("/readyz").status_code == 200 and self._loop is not None:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        self.close()
        raise ServiceError(f"the service on port {self.port} did not become ready in {self.start_timeout:.0f}s")

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server, join its thread and remove the temporary directory."""
        self.client.close()
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout=15)
        self._socket.close()
        self._tmp.cleanup()

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``fn()`` (a coroutine) on the server's loop, let the events it scheduled be applied,
        and return its result (its exception is raised here)."""
        loop = self._loop
        if loop is None:
            raise ServiceError("the service is not running")

        async def run() -> T:
            result = await fn()
            await asyncio.sleep(0)  # deliver the watch events the write scheduled with call_soon
            return result

        return asyncio.run_coroutine_threadsafe(run(), loop).result()

    def read(self, fn: Callable[[], T]) -> T:
        """Run the plain function ``fn()`` on the server's loop (a consistent view of the cache)."""

        async def run() -> T:
            await settle()
            return fn()

        return self.call(run)
