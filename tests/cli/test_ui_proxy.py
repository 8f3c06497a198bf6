"""``koord ui``: the page through a local proxy that adds the kubeconfig's credentials (issue 46: a browser sends no
token, and the service answers nothing without one). Real HTTP: browser -> proxy -> service -> fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.cli.remote import connection
from app.cli.ui import build_proxy, host_name
from tests.client.conftest import write_kubeconfig
from tests.conftest import wire
from tests.server.servekit import DelegatedService, delegated_service, serve


@pytest.fixture
def service(tmp_path: Path) -> Iterator[DelegatedService]:
    with delegated_service(tmp_path) as srv:
        yield srv


@pytest.fixture
def proxy(service: DelegatedService, tmp_path: Path) -> Iterator[str]:
    kc = write_kubeconfig(tmp_path / "user-kc", "https://127.0.0.1:9", {"token": "alice-token"})
    verify, auth = connection(service.url, kubeconfig=Path(kc))
    with serve(build_proxy(service.url, verify, auth), ready_path=None) as url:
        yield url


def test_the_page_is_served_with_the_users_credentials(service: DelegatedService, proxy: str) -> None:
    assert service.get("/ui").status_code == 401  # the browser straight to the service: nothing
    denied = httpx.get(f"{proxy}/ui")
    assert denied.status_code == 403  # alice's token went along; RBAC has not granted the page yet
    assert denied.json()["message"] == 'forbidden: User "alice" cannot get path "/ui"'
    service.fake.grant("devs", verb="get", path="/ui")
    service.fake.grant("devs", verb="get", path="/ui/*")
    service.fake.grant("devs", verb="get", path="/apis/v1/*")
    service.fake.grant("devs", verb="post", path="/apis/v1/explain")
    service.advance(11)
    page = httpx.get(f"{proxy}/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    script = httpx.get(f"{proxy}/ui/static/ui.js")
    assert script.status_code == 200 and "/apis/v1/overview" in script.text
    overview = httpx.get(f"{proxy}/apis/v1/overview")
    assert overview.status_code == 200 and {n["name"] for n in overview.json()["nodes"]} >= {"fake-node-1"}
    explain = httpx.post(f"{proxy}/apis/v1/explain", json={**wire("filter.json"), "NodeNames": ["fake-node-1"]})
    assert explain.status_code == 200, explain.text
    redirect = httpx.get(f"{proxy}/ui/")
    assert redirect.status_code == 308 and redirect.headers["location"] == "/ui"


def test_only_the_page_and_its_calls_are_forwarded(proxy: str) -> None:
    for path in ("/metrics", "/healthz", "/filter"):
        answer = httpx.get(f"{proxy}{path}")
        assert answer.status_code == 404, path
        assert "koord ui forwards /ui and /apis/v1/... only" in answer.json()["message"]


def test_a_foreign_host_is_refused(proxy: str) -> None:
    answer = httpx.get(f"{proxy}/ui", headers={"Host": "attacker.example:8001"})
    assert answer.status_code == 403
    assert "host 'attacker.example:8001' is not accepted" in answer.json()["message"]


def test_an_unreachable_service_is_502(tmp_path: Path) -> None:
    with serve(build_proxy("http://127.0.0.1:9", True, None), ready_path=None) as url:
        answer = httpx.get(f"{url}/ui")
    assert answer.status_code == 502 and answer.json()["message"].startswith("cannot reach http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("host", "name"), [("127.0.0.1:8001", "127.0.0.1"), ("localhost", "localhost"), ("[::1]:8001", "[::1]")]
)
def test_host_name(host: str, name: str) -> None:
    assert host_name(host) == name
