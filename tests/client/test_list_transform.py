"""AsyncClient.list(transform=...) runs on each item as its page arrives (what it drops never piles up),
and what it returns is kept in the item's place."""

from __future__ import annotations

from typing import Any

from app.client.aio import AsyncClient
from app.client.config import load_configuration
from tests.client.fake_apiserver import FakeAPIServer

PODS = "/api/v1/namespaces/ns/pods"


async def test_transform_runs_per_item_page_by_page(fake: FakeAPIServer, kubeconfig: str) -> None:
    fake.seed(
        PODS,
        *({"metadata": {"name": f"p{i}", "namespace": "ns", "managedFields": [{"manager": "m"}]}} for i in range(5)),
    )
    pages_seen: list[int] = []

    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        pages_seen.append(sum(1 for r in fake.requests if r.method == "GET"))
        obj["metadata"].pop("managedFields")
        return obj

    async with AsyncClient(load_configuration(kubeconfig)) as client:
        result = await client.list(PODS, limit=2, transform=strip)
    assert [o["metadata"]["name"] for o in result.items] == [f"p{i}" for i in range(5)]
    assert all("managedFields" not in o["metadata"] for o in result.items)
    assert pages_seen == [1, 1, 2, 2, 3], "each item is transformed before the next page is asked for"


async def test_what_transform_returns_is_kept(fake: FakeAPIServer, kubeconfig: str) -> None:
    fake.seed(PODS, *({"metadata": {"name": f"p{i}", "namespace": "ns"}} for i in range(3)))
    async with AsyncClient(load_configuration(kubeconfig)) as client:
        result = await client.list(PODS, limit=2, transform=lambda obj: obj["metadata"]["name"].encode())
    assert result.items == [b"p0", b"p1", b"p2"]
