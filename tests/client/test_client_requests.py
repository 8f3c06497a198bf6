"""What the clients send and how they page: bodies, content types, auth, query strings, one pool."""

from __future__ import annotations

import asyncio

import pytest

from app.client.aio import AsyncClient
from app.client.bodies import binding, eviction
from app.client.config import load_configuration
from app.client.errors import Conflict, Expired
from app.client.pager import Pager
from tests.client.conftest import TOKEN, Api
from tests.client.fake_apiserver import FakeAPIServer, status

PODS = "/api/v1/namespaces/ns/pods"
NODES = "/api/v1/nodes"


def node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def test_writes_send_json_with_the_content_type_and_the_token(api: Api, fake: FakeAPIServer) -> None:
    fake.seed(NODES, node("n1"))
    patched = await api("merge_patch", f"{NODES}/n1", {"status": {"allocatable": {"cpu": "4"}}}, subresource="status")
    assert patched["status"] == {"allocatable": {"cpu": "4"}}
    await api("merge_patch", f"{NODES}/n1", {"metadata": {"labels": {"a": "b"}}})
    await api("delete", f"{NODES}/n1")
    first, second, third = fake.requests
    assert (first.method, first.path) == ("PATCH", f"{NODES}/n1/status")
    assert first.headers["content-type"] == "application/merge-patch+json"
    assert first.body == {"status": {"allocatable": {"cpu": "4"}}}
    assert (second.method, second.path, second.body) == ("PATCH", f"{NODES}/n1", {"metadata": {"labels": {"a": "b"}}})
    assert (third.method, third.path, third.body) == ("DELETE", f"{NODES}/n1", None)
    assert "content-type" not in third.headers
    assert {r.headers["authorization"] for r in fake.requests} == {f"Bearer {TOKEN}"}
    assert {r.headers["accept"] for r in fake.requests} == {"application/json"}


async def test_bind_and_evict_send_the_one_body_each(api: Api, fake: FakeAPIServer) -> None:
    fake.seed(PODS, {"metadata": {"name": "p", "namespace": "ns", "uid": "u-p"}, "spec": {}})
    await api("bind", "ns", "p", "u-p", "n1")
    assert fake.store[PODS]["p"]["spec"]["nodeName"] == "n1"
    with pytest.raises(Conflict, match='pod p is already assigned to node "n1"'):
        await api("bind", "ns", "p", "u-p", "n2")
    await api("evict", "ns", "p", "u-p")
    posts = fake.calls("POST")
    assert [(r.path, r.body) for r in posts] == [
        (path, body)
        for path, body in (binding("ns", "p", "u-p", "n1"), binding("ns", "p", "u-p", "n2"), eviction("ns", "p", "u-p"))
    ]
    assert posts[0].body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    assert posts[2].path == "/api/v1/namespaces/ns/pods/p/eviction"
    assert posts[2].body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "ns"},
        "deleteOptions": {"preconditions": {"uid": "u-p"}},
    }
    assert eviction("ns", "p", "")[1]["deleteOptions"] == {}, "no uid: no precondition"


async def test_get_sends_query_parameters(api: Api, fake: FakeAPIServer) -> None:
    await api("get", "/api/v1/pods", {"fieldSelector": "spec.nodeName=n1", "labelSelector": "a in (b,c)"})
    assert fake.requests[0].path == "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&labelSelector=a+in+%28b%2Cc%29"
    assert fake.requests[0].query == {"fieldSelector": "spec.nodeName=n1", "labelSelector": "a in (b,c)"}


async def test_list_pages_with_limit_and_continue(api: Api, fake: FakeAPIServer) -> None:
    fake.seed(NODES, *(node(f"n{i}") for i in range(5)))
    result = await api("list", NODES, limit=2, params={"labelSelector": "x"})
    assert [o["metadata"]["name"] for o in result.items] == ["n0", "n1", "n2", "n3", "n4"]
    assert result.resource_version == "105"
    assert [r.query for r in fake.requests] == [
        {"labelSelector": "x", "limit": "2"},
        {"labelSelector": "x", "limit": "2", "continue": "2"},
        {"labelSelector": "x", "limit": "2", "continue": "4"},
    ]
    fake.requests.clear()
    whole = await api("list", NODES, limit=0)
    assert len(whole.items) == 5 and [r.query for r in fake.requests] == [{}]


async def test_an_expired_continue_token_falls_back_to_one_full_list(api: Api, fake: FakeAPIServer) -> None:
    fake.seed(NODES, *(node(f"n{i}") for i in range(5)))
    fake.continue_expired = True
    result = await api("list", NODES, limit=2)
    assert [o["metadata"]["name"] for o in result.items] == ["n0", "n1", "n2", "n3", "n4"], "no page counted twice"
    assert [r.query for r in fake.requests] == [{"limit": "2"}, {"limit": "2", "continue": "2"}, {}]


async def test_a_410_on_the_first_page_is_raised(api: Api, fake: FakeAPIServer) -> None:
    fake.fail[("GET", NODES)] = (410, status(410, "Expired", "too old resource version: 1 (200)"), {})
    with pytest.raises(Expired):
        await api("list", NODES)
    assert len(fake.requests) == 1


def test_pager_drops_items_that_are_not_objects() -> None:
    pager = Pager(10)
    pager.add_page({"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "a"}}, "junk", None]})
    assert pager.next_params() is None
    assert pager.result.items == [{"metadata": {"name": "a"}}] and pager.result.resource_version == "7"


async def test_async_client_reuses_one_pool_of_kept_alive_connections(fake: FakeAPIServer, kubeconfig: str) -> None:
    fake.seed(NODES, node("n1"))
    async with AsyncClient(load_configuration(kubeconfig), max_connections=2) as client:
        for _ in range(10):
            await client.get(f"{NODES}/n1")
        assert len({r.peer for r in fake.requests}) == 1, "sequential requests share one kept-alive connection"
        fake.requests.clear()
        await asyncio.gather(*(client.get(f"{NODES}/n1") for _ in range(20)))
        assert len({r.peer for r in fake.requests}) <= 2, "concurrent requests never open more than the pool size"


def test_relative_paths_are_refused() -> None:
    import kubernetes.client

    from app.client.sync import Client

    conf = kubernetes.client.Configuration()
    conf.host = "http://127.0.0.1:9"
    with Client(conf) as client, pytest.raises(ValueError, match="must be absolute"):
        client.get("api/v1/nodes")
