"""`koord reservation list | show` against a live service: table, JSON and errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.reservation.fixtures import node, phase_is, reservation, wait_for, write_cluster


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    objs = [node("n1"), reservation("r1", cpu="2", node_name="n1", ttl="0s"), reservation("huge", cpu="64")]
    with LiveServer(FileSource(write_cluster(tmp_path / "c", objs), poll_interval=0)) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        yield srv


def test_list_and_show(server: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["reservation", "list", "--server", server.url], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "r1" in r.output and "Available" in r.output and "huge" in r.output and "Pending" in r.output
    r = runner.invoke(cli, ["reservation", "show", "r1", "--server", server.url], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "n1" in r.output and "never" in r.output


def test_json_output_uses_upstream_field_names(server: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["reservation", "list", "--server", server.url, "-o", "json"])
    assert r.exit_code == 0, r.output
    items = {i["name"]: i for i in json.loads(r.output)}
    assert items["r1"]["phase"] == "Available" and items["r1"]["nodeName"] == "n1"
    assert items["r1"]["allocatable"] == {"cpu": "2", "memory": "2Gi"} and items["r1"]["allocated"] == {}
    assert items["r1"]["owners"] == [{"labelSelector": {"matchLabels": {"app": "web"}}}]
    assert items["r1"]["expires"] is None
    assert items["huge"]["phase"] == "Pending" and items["huge"]["nodeName"] == ""
    assert items["huge"]["expires"] is not None  # CRD default ttl 24h from creation
    r = runner.invoke(cli, ["reservation", "show", "r1", "--server", server.url, "-o", "json"])
    assert json.loads(r.output)["name"] == "r1"


def test_errors(server: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["reservation", "show", "ghost", "--server", server.url])
    assert r.exit_code == 1
    assert "not found" in r.output
    r = runner.invoke(cli, ["reservation", "list", "--server", "http://127.0.0.1:1"])
    assert r.exit_code == 2
    assert "cannot reach" in r.output
