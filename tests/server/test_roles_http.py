"""``koord scheduler --role``: which routes each process serves, over real HTTP, and how the CLI picks the role.

In Kubernetes the extender runs beside kube-scheduler (``--role extender``) and the webhooks in their own
Deployment (``--role webhooks``); a webhooks replica must never answer an extender verb (it would bind
pods from a process nobody elected) and an extender must not serve admission reviews.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import app.server.app as server_app
from app.cli.main import cli
from app.framework.interfaces import BackgroundPlugin
from app.server.app import ROLES, UnknownRole, create_app
from app.sources.files import FileSource
from tests.conftest import LiveServer, fake_nodes_cluster, wire

EXTENDER_VERBS = ("/filter", "/prioritize", "/preempt", "/bind")
WEBHOOK_PATHS = ("/mutate-pod", "/validate-pod")


def _server(tmp_path: Path, role: str) -> LiveServer:
    return LiveServer(FileSource(fake_nodes_cluster(tmp_path), poll_interval=0), role=role)


@pytest.fixture(params=ROLES)
def role_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, LiveServer]]:
    with _server(tmp_path, request.param) as srv:
        yield request.param, srv


def _verb_status(srv: LiveServer, path: str) -> int:
    return srv.client.post(path, json=wire("filter.json")).status_code


def _webhook_status(srv: LiveServer, path: str) -> int:
    return srv.client.post(f"{path}?timeout=10s", json=wire("admissionreview.json")).status_code


def test_each_role_serves_only_its_routes(role_server: tuple[str, LiveServer]) -> None:
    role, srv = role_server
    verbs = {path: _verb_status(srv, path) for path in EXTENDER_VERBS}
    hooks = {path: _webhook_status(srv, path) for path in WEBHOOK_PATHS}
    if role == "webhooks":
        assert verbs == dict.fromkeys(EXTENDER_VERBS, 404)
    else:
        # /filter answers the sample; the other verbs get the filter body, so 400 (not 404) proves the route.
        assert verbs["/filter"] == 200
        assert 404 not in verbs.values(), verbs
    if role == "extender":
        assert hooks == dict.fromkeys(WEBHOOK_PATHS, 404)
    else:
        assert hooks == dict.fromkeys(WEBHOOK_PATHS, 200)
        review = srv.client.post("/mutate-pod", json=wire("admissionreview.json")).json()
        assert review["response"]["uid"] == wire("admissionreview.json")["request"]["uid"]


INSPECTION_PATHS = (
    "/apis/v1/nodes/fake-node-1",
    "/apis/v1/__services__",
    "/apis/v1/snapshot",
    "/apis/v1/overview",
    "/apis/v1/plugins",
    "/apis/v1/plugins/ElasticQuota/quotas",
    "/ui",
    "/ui/static/ui.js",
)


def test_every_role_serves_health_and_metrics_and_only_the_webhooks_role_no_inspection(
    role_server: tuple[str, LiveServer],
) -> None:
    """The webhooks' port is open to the network (the API server is not a pod): nothing there serves the cluster's
    state (issue 46); inspection is the extender's, on loopback."""
    role, srv = role_server
    assert srv.client.get("/healthz").status_code == 200
    assert srv.client.get("/readyz").status_code == 200
    assert srv.client.get("/metrics").status_code == 200
    codes = {path: srv.client.get(path).status_code for path in INSPECTION_PATHS}
    assert codes == dict.fromkeys(INSPECTION_PATHS, 404 if role == "webhooks" else 200)
    explain = srv.client.post("/apis/v1/explain", json=wire("filter.json")).status_code
    assert explain == (404 if role == "webhooks" else 200)


def test_webhooks_role_runs_no_background_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    async def fake_background(self: Any) -> None:
        started.append(type(self).__name__)
        await asyncio.Event().wait()  # a background loop runs until cancelled (one that returns is restarted)

    for plugin in BackgroundPlugin.__subclasses__():
        monkeypatch.setattr(plugin, "run_background", fake_background)
    (tmp_path / "w").mkdir()
    with _server(tmp_path / "w", "webhooks"):
        pass
    assert started == []
    (tmp_path / "e").mkdir()
    with _server(tmp_path / "e", "extender"):
        pass
    assert started, "the extender role runs the plugins' background work (e.g. ElasticQuota status)"


def test_unknown_role_is_refused_by_the_factory(tmp_path: Path) -> None:
    with pytest.raises(UnknownRole, match="all, extender, webhooks"):
        create_app(FileSource(fake_nodes_cluster(tmp_path), poll_interval=0), role="manager")


def test_cli_unknown_role_exits_2_with_the_allowed_roles() -> None:
    result = CliRunner().invoke(cli, ["scheduler", "--role", "bogus"])
    assert result.exit_code == 2
    assert "all, extender, webhooks" in result.output


class _ApiServerSource:
    """Stands in for a Kubernetes source: anything that is not a file source."""


@pytest.mark.parametrize(("role", "embedded"), [("webhooks", True), ("extender", False), ("all", True)])
def test_cli_passes_the_role_and_runs_controllers_only_where_they_belong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, role: str, embedded: bool
) -> None:
    import uvicorn

    seen: dict[str, Any] = {}

    def fake_create_app(source: Any, cfg: Any, **kwargs: Any) -> object:
        seen.update(kwargs, source=source)
        return object()

    source = FileSource(fake_nodes_cluster(tmp_path), poll_interval=0) if embedded else _ApiServerSource()
    monkeypatch.setattr("app.cli.main.choose_source", lambda cluster, kubeconfig: source)
    monkeypatch.setattr(server_app, "create_app", fake_create_app)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    with caplog.at_level(logging.INFO, logger="koord"):
        result = CliRunner().invoke(cli, ["scheduler", "--role", role])
    assert result.exit_code == 0, result.output
    assert seen["role"] == role
    names = [getattr(task, "__name__", "") for task in seen["background"]]
    assert ("run_embedded_controllers" in names) == (embedded and role != "webhooks")
    told = any("koord manager" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    assert told == (not embedded)
