"""Shared fixtures: wire samples, a cluster built from them, and a real uvicorn server."""

from __future__ import annotations

import copy
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml

from app.framework.config import SchedulerConfig
from app.framework.registry import Registry
from app.server.app import create_app
from app.server.httpprotocol import ServiceProtocol
from app.sources.base import Source
from app.sources.files import FileSource

ROOT = Path(__file__).resolve().parents[1]
#: Requests captured from a real kube-scheduler / kube-apiserver v1.26, kept in the repo as fixtures
#: (copied from ../shared/reference/wire-samples; see its README).
WIRE = ROOT / "tests" / "fixtures" / "wire-samples"
#: The shared folder beside the checkout (public traces for the sim tests). ``KOORD_SHARED_DIR`` points
#: elsewhere; CI sets it to a missing folder once to prove the suite passes without it.
SHARED = Path(os.environ.get("KOORD_SHARED_DIR") or ROOT.parent / "shared")
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster"


def wire(name: str) -> dict[str, Any]:
    """A wire sample captured from kube-scheduler / kube-apiserver v1.26, as a dict."""
    data: dict[str, Any] = json.loads((WIRE / name).read_text())
    return data


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """The real app under a real uvicorn server in a thread, with an httpx client bound to it; ``protocol`` is
    uvicorn's ``http`` (the service's own by default)."""

    def __init__(
        self,
        source: Source,
        config: SchedulerConfig | None = None,
        registry: Registry | None = None,
        *,
        protocol: type[Any] = ServiceProtocol,
        **app_kwargs: Any,
    ) -> None:
        self.app = create_app(source, config, registry=registry, **app_kwargs)
        # The socket is bound here and handed to uvicorn, so no other test (another pytest-xdist worker
        # included) can take the port between choosing it and listening on it.
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                access_log=False,
                http=protocol,
            )
        )
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, timeout=10.0)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if self.client.get("/readyz").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not become ready")

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    @property
    def service(self) -> Any:
        return self.app.state.service


def fake_nodes_cluster(tmp: Path) -> Path:
    """A cluster dir holding the three nodes of filter.nodecache-false.json (fake-node-1..3)."""
    nodes = wire("filter.nodecache-false.json")["Nodes"]["items"]
    (tmp / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "NodeList", "items": nodes}))
    return tmp


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Undo what a command run in-process (koord manager, scheduler, agent) did to logging: its handler
    and levels would otherwise print into later tests' captured output."""
    import logging

    root = logging.getLogger()
    names = ("httpx", "httpcore", "uvicorn", "uvicorn.error", "uvicorn.access")
    saved = (root.handlers[:], root.level, {n: logging.getLogger(n).level for n in names})
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture
def example_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A live server on a copy of the example cluster."""
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    for f in EXAMPLE_CLUSTER.iterdir():
        (cluster / f.name).write_text(f.read_text())
    with LiveServer(FileSource(cluster, poll_interval=0.1)) as srv:
        yield srv


@pytest.fixture
def fake_node_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A live server whose cluster is the wire samples' fake-node-1..3 (no NodeMetrics)."""
    with LiveServer(FileSource(fake_nodes_cluster(tmp_path), poll_interval=0)) as srv:
        yield srv


def filter_body(pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends it with nodeCacheCapable: true."""
    return {"Pod": copy.deepcopy(pod), "Nodes": None, "NodeNames": names}


#: Tests that run a whole program in subprocesses (the benches' smoke runs, the documented commands, the
#: sim's replays) and take seconds each. They are collected first, so that pytest-xdist's workers start on
#: them and the run does not end with one worker busy on a long test while the other has nothing left.
_LONG_FIRST = ("tests/test_bench_", "tests/test_docs.py", "tests/sim/", "tests/webhooks/test_pod_bench_smoke.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the long tests of :data:`_LONG_FIRST` to the front, keeping every other order as collected."""
    root = str(ROOT) + "/"

    def long_first(item: pytest.Item) -> int:
        path = str(item.path).removeprefix(root)
        return 0 if path.startswith(_LONG_FIRST) else 1

    items.sort(key=long_first)
