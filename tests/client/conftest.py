"""Fixtures of the client tests: a fake API server over real HTTP, a kubeconfig for it, and each client."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.client.aio import AsyncClient
from app.client.config import load_configuration
from app.client.sync import Client
from tests.client.fake_apiserver import FakeAPIServer

TOKEN = "t0k3n"

#: ``await api("get", path)`` calls the method on the sync or the async client alike.
Api = Callable[..., Awaitable[Any]]


def write_kubeconfig(path: Path, server: str, user: dict[str, Any] | None = None, **cluster: Any) -> str:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "fake", "cluster": {"server": server, **cluster}},
            {"name": "elsewhere", "cluster": {"server": "http://127.0.0.1:9"}},
        ],
        "users": [{"name": "tester", "user": user if user is not None else {"token": TOKEN}}],
        "contexts": [
            {"name": "other", "context": {"cluster": "elsewhere", "user": "tester"}},
            {"name": "fake", "context": {"cluster": "fake", "user": "tester"}},
        ],
        "current-context": "fake",
    }
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.fixture
def fake() -> Iterator[FakeAPIServer]:
    f = FakeAPIServer(tokens={TOKEN})
    yield f
    f.close()


@pytest.fixture
def kubeconfig(fake: FakeAPIServer, tmp_path: Path) -> str:
    return write_kubeconfig(tmp_path / "kubeconfig", fake.url)


@pytest.fixture(params=["sync", "async"])
async def api(request: pytest.FixtureRequest, kubeconfig: str) -> AsyncIterator[Api]:
    """Each client over the fake; ``await api(method, *args)`` calls it."""
    cfg = load_configuration(kubeconfig)
    if request.param == "sync":
        client: Any = Client(cfg, timeout=5)
    else:
        client = AsyncClient(cfg, timeout=5)

    async def call(method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(client, method)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    call.client = client  # type: ignore[attr-defined]
    yield call
    if isinstance(client, Client):
        client.close()
    else:
        await client.aclose()
