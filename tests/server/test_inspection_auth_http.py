"""Delegated authentication and authorization of the inspection calls (issue 46), over real HTTP against the fake
API server answering TokenReview and SubjectAccessReview with their real wire shapes.

The service runs against the API server (a :class:`~app.sources.kubernetes.KubernetesSource`) under the policy
``koord scheduler`` runs it with (:func:`app.server.inspectauth.inspection_access`); the caches' clock is the test's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.fake_apiserver import status
from tests.server.servekit import DelegatedService as Service
from tests.server.servekit import delegated_service

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
TTL = 10.0


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with delegated_service(tmp_path) as srv:
        yield srv


def test_no_credentials_is_401_and_nothing_is_asked(service: Service) -> None:
    for path in ("/apis/v1/pods/team-a/web", "/apis/v1/snapshot", "/ui", "/metrics"):
        answer = service.get(path)
        assert answer.status_code == 401, path
        assert answer.json() == {"message": "Unauthorized: this call needs a bearer token (Authorization: Bearer ...)"}
    assert service.get("/healthz").status_code == 200
    assert service.get("/readyz").status_code == 200
    assert service.fake.reviews("tokenreviews") == []


def test_a_token_the_api_server_refuses_is_401(service: Service) -> None:
    answer = service.get("/apis/v1/pods/team-a/web", "stolen")
    assert answer.status_code == 401
    assert answer.json()["message"] == "Unauthorized: the API server did not accept the bearer token (invalid token)"
    assert service.fake.reviews("tokenreviews")[0].body["spec"] == {"token": "stolen"}
    assert service.fake.reviews("subjectaccessreviews") == []


def test_a_user_without_the_permission_is_403_with_the_reason(service: Service) -> None:
    answer = service.get("/apis/v1/pods/team-a/web", "alice-token")
    assert answer.status_code == 403
    assert answer.json()["message"] == (
        'pods "web" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "team-a"'
    )
    review = service.fake.reviews("subjectaccessreviews")[0].body
    assert review["spec"] == {
        "user": "alice",
        "groups": ["devs", "system:authenticated"],
        "resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods", "name": "web"},
    }
    service.fake.deny_reason = "no RBAC policy matched"
    answer = service.get("/apis/v1/pods/team-a/db", "alice-token")
    assert answer.status_code == 403
    assert answer.json()["message"] == (
        'pods "db" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "team-a": '
        "no RBAC policy matched"
    )


def test_rbac_decides_per_namespace_and_path(service: Service) -> None:
    service.fake.grant("devs", verb="get", resource="pods", namespace="team-a")
    mine = service.get("/apis/v1/pods/team-a/web", "alice-token")
    assert mine.status_code == 200, mine.text
    assert mine.json()["name"] == "web"
    assert service.get("/apis/v1/pods/team-b/db", "alice-token").status_code == 403  # another namespace
    snapshot = service.get("/apis/v1/snapshot", "alice-token")
    assert snapshot.status_code == 403  # every pod of every namespace: its own permission
    assert snapshot.json()["message"] == 'forbidden: User "alice" cannot get path "/apis/v1/snapshot"'
    service.fake.grant("system:serviceaccount:monitoring:prometheus-k8s", verb="get", path="/metrics")
    assert service.get("/metrics", "prom-token").status_code == 200
    assert service.get("/apis/v1/overview", "prom-token").status_code == 403
    service.fake.grant("devs", verb="get", path="/apis/v1/*")
    service.advance(TTL + 1)  # the denial above is remembered until then
    assert service.get("/apis/v1/snapshot", "alice-token").status_code == 200
    assert service.get("/apis/v1/nodes/fake-node-1", "alice-token").status_code == 403  # get nodes, not a path


def test_a_token_review_outage_is_503_said_plainly_and_not_remembered(service: Service) -> None:
    service.fake.grant("devs", verb="get", resource="pods", namespace="team-a")
    service.fake.fail[("POST", TOKEN_REVIEWS)] = (
        500,
        status(500, "InternalError", "etcdserver: request timed out"),
        {},
    )
    answer = service.get("/apis/v1/pods/team-a/web", "alice-token")
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "1"
    assert answer.json()["message"] == (
        "cannot authenticate the request: the TokenReview to the API server failed (etcdserver: request timed "
        "out); nothing was cached, try again"
    )
    del service.fake.fail[("POST", TOKEN_REVIEWS)]
    assert service.get("/apis/v1/pods/team-a/web", "alice-token").status_code == 200  # asked again at once


def test_an_access_review_outage_is_503_and_not_remembered(service: Service) -> None:
    service.fake.grant("devs", verb="get", resource="pods", namespace="team-a")
    service.fake.fail[("POST", ACCESS_REVIEWS)] = (
        503,
        status(503, "ServiceUnavailable", "apiserver is shutting down"),
        {},
    )
    answer = service.get("/apis/v1/pods/team-a/web", "alice-token")
    assert answer.status_code == 503
    assert "the SubjectAccessReview to the API server failed (apiserver is shutting down)" in answer.json()["message"]
    del service.fake.fail[("POST", ACCESS_REVIEWS)]
    assert service.get("/apis/v1/pods/team-a/web", "alice-token").status_code == 200


def test_an_unreachable_api_server_is_503(service: Service) -> None:
    service.fake.close()
    answer = service.get("/apis/v1/pods/team-a/web", "alice-token")
    assert answer.status_code == 503
    assert answer.json()["message"].startswith("cannot authenticate the request: the TokenReview to the API server")


def test_decisions_are_cached_and_expire(service: Service) -> None:
    fake = service.fake
    fake.grant("devs", verb="get", resource="pods", namespace="team-a")
    for _ in range(3):
        assert service.get("/apis/v1/pods/team-a/web", "alice-token").status_code == 200
    assert len(fake.reviews("tokenreviews")) == 1
    assert len(fake.reviews("subjectaccessreviews")) == 1
    fake.grants.clear()  # the permission is revoked: remembered as allowed for the TTL, then asked again
    service.advance(TTL - 1)
    assert service.get("/apis/v1/pods/team-a/web", "alice-token").status_code == 200
    service.advance(2)
    assert service.get("/apis/v1/pods/team-a/web", "alice-token").status_code == 403
    assert len(fake.reviews("tokenreviews")) == 2
    assert len(fake.reviews("subjectaccessreviews")) == 2
    fake.users.pop("alice-token")  # the token is revoked: refused once its review expires
    service.advance(TTL + 1)
    assert service.get("/apis/v1/pods/team-a/web", "alice-token").status_code == 401


def test_a_refused_token_is_remembered_for_the_ttl_too(service: Service) -> None:
    assert service.get("/metrics", "late-token").status_code == 401
    service.fake.add_user("late-token", "late")
    service.fake.grant("late", verb="get", path="/metrics")
    assert service.get("/metrics", "late-token").status_code == 401
    service.advance(TTL + 1)
    assert service.get("/metrics", "late-token").status_code == 200


@pytest.mark.parametrize("ca", [False, True], ids=["token-only", "with-client-ca"])
def test_koord_scheduler_against_an_api_server_runs_inspection_under_delegated_auth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, ca: bool
) -> None:
    """The CLI picks the delegated policy for an API server source and says so at start."""
    import logging

    import uvicorn
    from typer.testing import CliRunner

    import app.server.app as server_app
    from app.cli.main import cli
    from app.server.inspectauth import InspectionAccess
    from app.sources.kubernetes import KubernetesSource
    from tests.client.conftest import write_kubeconfig

    seen: dict[str, object] = {}
    source = KubernetesSource(("Node",), kubeconfig=write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443"))
    monkeypatch.setattr("app.cli.main.choose_source", lambda cluster, kubeconfig: source)
    monkeypatch.setattr(server_app, "create_app", lambda *a, **kw: seen.update(kw) or object())
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    args = ["scheduler", "--role", "extender", "--host", "127.0.0.1", "--port", "0"]
    if ca:
        certs = tmp_path / "certs"
        assert CliRunner().invoke(cli, ["certs", "--out-dir", str(certs)]).exit_code == 0
        args += ["--tls-cert-file", str(certs / "tls.crt"), "--tls-private-key-file", str(certs / "tls.key")]
        args += ["--client-ca-file", str(certs / "ca.crt"), "--allowed-inspection-client-names", "ops"]
    with caplog.at_level(logging.INFO, logger="koord"):
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    access = seen["inspection"]
    assert isinstance(access, InspectionAccess) and access.authorizer is not None
    assert access.authenticator.review_token is not None
    assert access.authenticator.certificate_names == (frozenset({"ops"}) if ca else None)
    said = [r.getMessage() for r in caplog.records if "callers need" in r.getMessage()]
    certs_said = " or a client certificate of the --client-ca-file CA" if ca else ""
    assert said == [
        "inspection (/apis/v1/..., /ui) and /metrics: callers need a bearer token (TokenReview)"
        f"{certs_said}, authorized by SubjectAccessReview against https://127.0.0.1:6443; /healthz and /readyz "
        "are open"
    ]


def test_a_burst_with_one_new_token_asks_once(service: Service) -> None:
    """The page's first load sends several requests at once with the same token: one TokenReview and one
    SubjectAccessReview per question, as the apiserver's cache coalesces them."""
    from concurrent.futures import ThreadPoolExecutor

    service.fake.grant("devs", verb="get", path="/apis/v1/*")
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: service.get("/apis/v1/overview", "alice-token").status_code, range(8)))
    assert codes == [200] * 8
    assert len(service.fake.reviews("tokenreviews")) == 1
    assert len(service.fake.reviews("subjectaccessreviews")) == 1
