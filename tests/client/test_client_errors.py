"""The typed error tree over real HTTP, for the sync and the async client alike (``api`` fixture)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from app.client.aio import AsyncClient
from app.client.config import load_configuration
from app.client.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    ConnectionFailed,
    Expired,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    InvalidResponse,
    NotFound,
    ServerTimeout,
    ServiceUnavailable,
    Timeout,
    TooManyRequests,
    Unauthorized,
)
from app.client.sync import Client
from tests.client.conftest import Api, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer, status

PODS = "/api/v1/namespaces/ns/pods"


def pod(name: str, **labels: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": labels}}


async def test_not_found(api: Api, fake: FakeAPIServer) -> None:
    with pytest.raises(NotFound) as err:
        await api("get", f"{PODS}/nope")
    assert err.value.status == 404 and err.value.reason == "NotFound"
    assert str(err.value) == 'pods "nope" not found'
    with pytest.raises(NotFound):
        await api("delete", f"{PODS}/nope")
    with pytest.raises(NotFound):
        await api("merge_patch", f"{PODS}/nope", {"metadata": {"labels": {"a": "b"}}})


async def test_already_exists_on_create_and_conflict_on_a_stale_resource_version(api: Api, fake: FakeAPIServer) -> None:
    created = await api("create", PODS, pod("p1"))
    assert created["metadata"]["resourceVersion"] == "101"
    with pytest.raises(AlreadyExists) as exists:
        await api("create", PODS, pod("p1"))
    assert exists.value.status == 409 and exists.value.reason == "AlreadyExists"
    assert str(exists.value) == 'pods "p1" already exists'
    assert isinstance(exists.value, Conflict), "AlreadyExists is a Conflict (both 409)"

    await api("merge_patch", f"{PODS}/p1", {"metadata": {"labels": {"x": "1"}}})  # bumps the resourceVersion
    with pytest.raises(Conflict) as stale:
        await api("put", f"{PODS}/p1", created)
    assert type(stale.value) is Conflict, "a stale resourceVersion is a Conflict, not AlreadyExists"
    assert "the object has been modified" in str(stale.value)
    fresh = await api("get", f"{PODS}/p1")
    stored = await api("put", f"{PODS}/p1", {**fresh, "spec": {"x": 1}})
    assert stored["spec"] == {"x": 1} and stored["metadata"]["resourceVersion"] != fresh["metadata"]["resourceVersion"]


async def test_eviction_blocked_by_a_disruption_budget_is_too_many_requests(api: Api, fake: FakeAPIServer) -> None:
    fake.seed(PODS, pod("web", pdb="blocked"), pod("batch"))
    uid = fake.store[PODS]["web"]["metadata"]["uid"]
    with pytest.raises(TooManyRequests) as err:
        await api("evict", "ns", "web", uid)
    assert err.value.status == 429 and err.value.reason == "TooManyRequests"
    assert err.value.retry_after == 10.0
    assert str(err.value) == "Cannot evict pod as it would violate the pod's disruption budget."
    with pytest.raises(Conflict, match="Precondition failed"):
        await api("evict", "ns", "batch", "not-the-uid")
    await api("evict", "ns", "batch", fake.store[PODS]["batch"]["metadata"]["uid"])
    assert "batch" not in fake.store[PODS]
    with pytest.raises(NotFound):
        await api("evict", "ns", "batch", "")


@pytest.mark.parametrize(
    ("code", "reason", "message", "details", "cls"),
    [
        (
            500,
            "ServerTimeout",
            "The list operation against pods could not be completed at this time, please try again.",
            {"name": "list", "kind": "pods", "retryAfterSeconds": 1},
            ServerTimeout,
        ),
        (500, "InternalError", "Internal error occurred: etcdserver: leader changed", None, InternalError),
        (
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
            None,
            Timeout,
        ),
        (
            403,
            "Forbidden",
            'pods is forbidden: User "system:serviceaccount:koordinator-system:koord" cannot list resource "pods"'
            ' in API group "" in the namespace "ns"',
            {"kind": "pods"},
            Forbidden,
        ),
        (410, "Gone", "too old resource version: 1 (200)", None, Gone),
        (410, "Expired", "too old resource version: 1 (200)", None, Expired),
        (422, "Invalid", 'Pod "p" is invalid: spec.containers: Required value', {"name": "p", "kind": "Pod"}, Invalid),
        (503, "ServiceUnavailable", "the server is currently unable to handle the request", None, ServiceUnavailable),
    ],
)
async def test_status_answers_map_to_their_class(
    api: Api,
    fake: FakeAPIServer,
    code: int,
    reason: str,
    message: str,
    details: dict[str, object] | None,
    cls: type[ApiError],
) -> None:
    fake.fail[("GET", PODS)] = (code, status(code, reason, message, details), {})
    with pytest.raises(ApiError) as err:
        await api("get", PODS)
    assert type(err.value) is cls
    assert (err.value.status, err.value.reason, str(err.value)) == (code, reason, message)
    if cls is ServerTimeout:
        assert err.value.retry_after == 1.0
    if cls is Expired:
        assert isinstance(err.value, Gone)


async def test_retry_after_header_of_a_503(api: Api, fake: FakeAPIServer) -> None:
    fake.fail[("GET", PODS)] = (503, status(503, "ServiceUnavailable", "x"), {"Retry-After": "4"})
    with pytest.raises(ServiceUnavailable) as err:
        await api("get", PODS)
    assert err.value.retry_after == 4.0


async def test_a_2xx_answer_that_is_not_an_object_is_invalid_response(api: Api, fake: FakeAPIServer) -> None:
    fake.fail[("GET", PODS)] = (200, b"<html>proxy login</html>", {})
    with pytest.raises(InvalidResponse, match="not JSON") as err:
        await api("get", PODS)
    assert err.value.status == 200
    fake.fail[("GET", PODS)] = (200, b"[1, 2]", {})
    with pytest.raises(InvalidResponse, match="expected a JSON object, got list"):
        await api("get", PODS)
    fake.fail[("GET", PODS)] = (200, {"kind": "PodList", "metadata": {}, "items": {"not": "a list"}}, {})
    with pytest.raises(InvalidResponse, match="items is dict"):
        await api("list", PODS)


async def test_missing_token_is_unauthorized(fake: FakeAPIServer, tmp_path: Path) -> None:
    cfg = load_configuration(write_kubeconfig(tmp_path / "kc", fake.url, user={"token": "wrong"}))
    with Client(cfg) as client, pytest.raises(Unauthorized) as err:
        client.get("/version")
    assert err.value.status == 401
    async with AsyncClient(cfg) as aclient:
        with pytest.raises(Unauthorized):
            await aclient.get("/version")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connection_refused_and_silence_are_connection_failed(tmp_path: Path) -> None:
    cfg = load_configuration(write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{_free_port()}"))
    with Client(cfg) as client, pytest.raises(ConnectionFailed, match="GET /api/v1/nodes") as err:
        client.get("/api/v1/nodes")
    assert err.value.status == 0 and err.value.reason == ""
    async with AsyncClient(cfg) as aclient:
        with pytest.raises(ConnectionFailed, match="binding pod ns/p to n1 failed"):
            await aclient.bind("ns", "p", "uid", "n1")
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        cfg = load_configuration(write_kubeconfig(tmp_path / "kc2", f"http://127.0.0.1:{silent.getsockname()[1]}"))
        t0 = time.monotonic()
        with Client(cfg, timeout=0.3) as client, pytest.raises(ConnectionFailed, match="ReadTimeout"):
            client.get("/version")
        async with AsyncClient(cfg, timeout=0.3) as aclient:
            with pytest.raises(ConnectionFailed, match="ReadTimeout"):
                await aclient.get("/version")
        assert time.monotonic() - t0 < 3.0
