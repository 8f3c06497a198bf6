"""TokenReview and SubjectAccessReview through the one API client, against the fake API server's real wire shapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.client.aio import AsyncClient
from app.client.config import load_configuration
from app.client.errors import ConnectionFailed, Forbidden, ServiceUnavailable
from app.client.reviews import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    AccessDecision,
    Attributes,
    UserInfo,
)
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer, status


@pytest.fixture
async def client(kubeconfig: str) -> AsyncIterator[AsyncClient]:
    c = AsyncClient(load_configuration(kubeconfig), timeout=5)
    yield c
    await c.aclose()


async def test_a_valid_token_is_reviewed_with_the_wire_shape(fake: FakeAPIServer, client: AsyncClient) -> None:
    fake.add_user("alice-token", "alice", ["devs"], uid="42")
    decision = await client.review_token("alice-token")
    assert decision.authenticated
    assert decision.user == UserInfo("alice", "42", ("devs", "system:authenticated"))
    sent = fake.reviews("tokenreviews")[-1]
    assert sent.path == TOKEN_REVIEWS
    assert sent.body == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "alice-token"},
    }
    assert sent.headers["authorization"] == "Bearer t0k3n"  # the service's own credentials


async def test_an_unknown_token_is_not_authenticated(fake: FakeAPIServer, client: AsyncClient) -> None:
    decision = await client.review_token("nobody")
    assert not decision.authenticated
    assert decision.user is None
    assert decision.error == "invalid token"


@pytest.mark.parametrize(
    ("attributes", "wire"),
    [
        (
            Attributes("get", resource="pods", namespace="team-a", name="web-1"),
            {"resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods", "name": "web-1"}},
        ),
        (
            Attributes("get", resource="nodeslos", group="slo.koordinator.sh", name="n1"),
            {
                "resourceAttributes": {
                    "verb": "get",
                    "group": "slo.koordinator.sh",
                    "resource": "nodeslos",
                    "name": "n1",
                }
            },
        ),
        (Attributes("get", path="/metrics"), {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}),
    ],
    ids=["pod", "nodeslo", "non-resource"],
)
async def test_access_reviews_carry_the_user_and_the_attributes(
    fake: FakeAPIServer, client: AsyncClient, attributes: Attributes, wire: dict[str, object]
) -> None:
    user = UserInfo("alice", "42", ("devs",), (("scopes", ("a", "b")),))
    assert await client.review_access(user, attributes) == AccessDecision(allowed=False)
    sent = fake.reviews("subjectaccessreviews")[-1]
    assert sent.path == SUBJECT_ACCESS_REVIEWS
    assert sent.body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "groups": ["devs"], "uid": "42", "extra": {"scopes": ["a", "b"]}, **wire},
    }


async def test_grants_allow_and_denials_carry_the_reason(fake: FakeAPIServer, client: AsyncClient) -> None:
    fake.grant("devs", verb="get", resource="pods", namespace="team-a")
    fake.deny_reason = "no RBAC policy matched"
    alice = UserInfo("alice", groups=("devs",))
    allowed = await client.review_access(alice, Attributes("get", resource="pods", namespace="team-a", name="x"))
    assert allowed.allowed
    denied = await client.review_access(alice, Attributes("get", resource="pods", namespace="team-b", name="x"))
    assert denied == AccessDecision(allowed=False, reason="no RBAC policy matched")


async def test_review_failures_are_typed(fake: FakeAPIServer, client: AsyncClient) -> None:
    fake.fail[("POST", TOKEN_REVIEWS)] = (403, status(403, "Forbidden", "tokenreviews is forbidden"), {})
    with pytest.raises(Forbidden):
        await client.review_token("x")
    fake.fail[("POST", SUBJECT_ACCESS_REVIEWS)] = (503, status(503, "ServiceUnavailable", "etcd is down"), {})
    with pytest.raises(ServiceUnavailable):
        await client.review_access(UserInfo("a"), Attributes("get", path="/metrics"))


async def test_no_answer_is_connection_failed(tmp_path: Path) -> None:
    gone = FakeAPIServer(tokens={TOKEN})
    gone.close()
    async with AsyncClient(load_configuration(write_kubeconfig(tmp_path / "kc", gone.url)), timeout=2) as c:
        with pytest.raises(ConnectionFailed):
            await c.review_token("x")


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        (
            Attributes("get", resource="pods", namespace="ns", name="p"),
            'pods "p" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "ns"',
        ),
        (
            Attributes("get", resource="nodes", name="n1"),
            'nodes "n1" is forbidden: User "alice" cannot get resource "nodes" in API group "" at the cluster scope',
        ),
        (
            Attributes("get", resource="nodeslos", group="slo.koordinator.sh", name="n1"),
            'nodeslos.slo.koordinator.sh "n1" is forbidden: User "alice" cannot get resource "nodeslos" in API '
            'group "slo.koordinator.sh" at the cluster scope',
        ),
        (Attributes("get", path="/metrics"), 'forbidden: User "alice" cannot get path "/metrics"'),
    ],
    ids=["namespaced", "cluster", "group", "non-resource"],
)
def test_forbidden_messages_are_kube_apiservers(attributes: Attributes, message: str) -> None:
    assert attributes.forbidden_message("alice") == message
    assert attributes.forbidden_message("alice", "why") == f"{message}: why"
