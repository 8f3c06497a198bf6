"""`koord quota list | tree | show` against a live service: tables, tree, JSON and errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli.main import cli
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.elasticquota.fixtures import node, pod, quota

MAX = {"cpu": "10", "memory": "64Gi"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    objs = [
        node("n1", "10"),
        quota("dept", {"cpu": "8"}, MAX, is_parent=True),
        quota("team-a", {"cpu": "4"}, MAX, parent="dept"),
        pod("a1", "3", namespace="team-a", quota_name="team-a", node="n1"),
    ]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(objs))
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        yield srv


def test_list_tree_show(server: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["quota", "list", "--server", server.url])
    assert r.exit_code == 0, r.output
    assert "team-a" in r.output and "dept" in r.output and "RUNTIME" in r.output
    r = runner.invoke(cli, ["quota", "tree", "--server", server.url])
    assert r.exit_code == 0, r.output
    assert "koordinator-root-quota" in r.output and "team-a" in r.output
    r = runner.invoke(cli, ["quota", "show", "team-a", "--server", server.url])
    assert r.exit_code == 0, r.output
    assert "team-a/a1" in r.output


def test_json_output(server: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["quota", "show", "team-a", "--server", server.url, "-o", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["used"] == {"cpu": "3"} and data["parentName"] == "dept"
    r = runner.invoke(cli, ["quota", "tree", "--server", server.url, "-o", "json"])
    tree = json.loads(r.output)
    dept = next(c for c in tree["root"]["children"] if c["name"] == "dept")
    assert [c["name"] for c in dept["children"]] == ["team-a"]
    r = runner.invoke(cli, ["quota", "list", "--server", server.url, "-o", "json"])
    assert set(json.loads(r.output)) >= {"dept", "team-a"}


def test_errors(server: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["quota", "show", "ghost", "--server", server.url])
    assert r.exit_code == 1
    assert "cannot find quota ghost" in r.output
    r = runner.invoke(cli, ["quota", "list", "--server", "http://127.0.0.1:1"])
    assert r.exit_code == 2
    assert "cannot reach" in r.output
