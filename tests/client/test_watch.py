"""AsyncClient.watch over real HTTP: chunked event lines as they arrive, errors, prompt close."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from app.client.aio import AsyncClient
from app.client.config import load_configuration
from app.client.errors import ConnectionFailed, Expired, Forbidden, Gone, InvalidResponse, error_from_status
from app.client.watch import WatchEvent
from tests.client.fake_apiserver import FakeAPIServer, WatchScript, status, wait_until

PODS = "/api/v1/pods"


def ev(etype: str, name: str, rv: str) -> dict[str, object]:
    return {
        "type": etype,
        "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "resourceVersion": rv}},
    }


@pytest.fixture
async def client(kubeconfig: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(load_configuration(kubeconfig), timeout=5) as c:
        yield c


async def collect(client: AsyncClient, **kw: object) -> list[WatchEvent]:
    return [e async for e in client.watch(PODS, **kw)]  # type: ignore[arg-type]


async def test_events_in_order_with_bookmarks_and_error_events(client: AsyncClient, fake: FakeAPIServer) -> None:
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}}
    expired = {"type": "ERROR", "object": status(410, "Expired", "too old resource version: 3 (9)")}
    fake.watch_scripts[PODS].append(
        WatchScript(
            [ev("ADDED", "a", "5"), b"\n", ev("MODIFIED", "a", "6"), ev("DELETED", "a", "7"), bookmark, expired]
        )
    )
    events = await collect(client, resource_version="4", timeout_seconds=17, params={"labelSelector": "x=y"})
    assert [(e.type, e.object["metadata"].get("resourceVersion")) for e in events] == [
        ("ADDED", "5"),
        ("MODIFIED", "6"),
        ("DELETED", "7"),
        ("BOOKMARK", "9"),
        ("ERROR", None),
    ]
    assert isinstance(error_from_status(events[-1].object), Expired)
    assert fake.requests[0].query == {
        "labelSelector": "x=y",
        "watch": "true",
        "resourceVersion": "4",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "17",
    }


async def test_events_arrive_before_the_stream_ends(client: AsyncClient, fake: FakeAPIServer) -> None:
    fake.watch_scripts[PODS].append(WatchScript([ev("ADDED", "a", "5")], end="hold"))
    events = client.watch(PODS)
    async with contextlib.aclosing(events):
        first = await asyncio.wait_for(anext(events), 2.0)
        assert first.object["metadata"]["name"] == "a"
        assert fake.open_watches == 1
    await asyncio.to_thread(wait_until, lambda: fake.open_watches == 0, 2.0)  # closing the iterator hung up


async def test_cancelling_the_task_closes_the_stream_promptly(client: AsyncClient, fake: FakeAPIServer) -> None:
    fake.watch_scripts[PODS].append(WatchScript(end="hold"))
    task = asyncio.create_task(collect(client, timeout_seconds=300))
    await asyncio.to_thread(wait_until, lambda: fake.open_watches == 1, 2.0)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(wait_until, lambda: fake.open_watches == 0, 2.0)
    assert time.monotonic() - t0 < 1.0


async def test_http_errors_before_the_stream(client: AsyncClient, fake: FakeAPIServer) -> None:
    fake.fail[("GET", PODS)] = (410, status(410, "Gone", "too old resource version: 1 (200)"), {})
    with pytest.raises(Gone) as gone:
        await collect(client, resource_version="1")
    assert gone.value.status == 410 and str(gone.value) == "too old resource version: 1 (200)"
    fake.fail[("GET", PODS)] = (403, status(403, "Forbidden", "pods is forbidden"), {})
    with pytest.raises(Forbidden):
        await collect(client)


async def test_an_undecodable_line_ends_the_watch_with_invalid_response(
    client: AsyncClient, fake: FakeAPIServer
) -> None:
    fake.watch_scripts[PODS].append(WatchScript([ev("ADDED", "a", "5"), b"{not json\n"], end="hold"))
    seen: list[WatchEvent] = []
    with pytest.raises(InvalidResponse, match="unable to decode an event"):
        async for e in client.watch(PODS):
            seen.append(e)
    assert [e.object["metadata"]["name"] for e in seen] == ["a"]
    fake.watch_scripts[PODS].append(WatchScript([b'"just a string"\n']))
    with pytest.raises(InvalidResponse, match="just a string"):
        await collect(client)
    fake.watch_scripts[PODS].append(WatchScript([{"type": "ADDED", "object": ["not", "an", "object"]}]))
    with pytest.raises(InvalidResponse):
        await collect(client)


async def test_a_broken_stream_is_connection_failed(client: AsyncClient, fake: FakeAPIServer) -> None:
    fake.watch_scripts[PODS].append(WatchScript([ev("ADDED", "a", "5")], end="break"))
    seen: list[WatchEvent] = []
    with pytest.raises(ConnectionFailed, match="GET /api/v1/pods"):
        async for e in client.watch(PODS):
            seen.append(e)
    assert len(seen) == 1, "the events before the break were delivered"
