"""`koord gang list | show` and `koord explain` on a gang member, against a live service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli.main import cli
from app.framework.config import parse_config
from app.plugins.registry import default_registry
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.gangkit import node, pod, pod_group, write


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    members = [pod(f"train-{i}", group="train") for i in range(3)]
    objs = [node("n1"), pod_group("train", 3, 30), *members, pod("solo")]
    with LiveServer(FileSource(write(tmp_path, objs), poll_interval=0)) as srv:
        yield srv


def test_gang_list_and_show(server: LiveServer) -> None:
    runner = CliRunner(env={"COLUMNS": "240"})
    r = runner.invoke(cli, ["gang", "list", "--server", server.url])
    assert r.exit_code == 0, r.output
    assert "default/train" in r.output and "once-satisfied" not in r.output  # policy: -o wide only
    r = runner.invoke(cli, ["gang", "list", "--server", server.url, "-o", "wide"])
    assert r.exit_code == 0, r.output
    assert "default/train" in r.output and "once-satisfied" in r.output and "Strict" in r.output
    r = runner.invoke(cli, ["gang", "list", "--server", server.url, "-o", "json"])
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data["default/train"]["minRequiredNumber"] == 3
    assert sorted(data["default/train"]["pendingChildren"]) == [f"default/train-{i}" for i in range(3)]
    r = runner.invoke(cli, ["gang", "show", "default/train", "--server", server.url])
    assert r.exit_code == 0, r.output
    assert "default/train-2" in r.output and "pending" in r.output and "not yet satisfied" in r.output
    r = runner.invoke(cli, ["gang", "show", "train", "--server", server.url, "-o", "json"])
    assert r.exit_code == 0 and json.loads(r.output)["name"] == "default/train"
    r = runner.invoke(cli, ["gang", "show", "default/nope", "--server", server.url])
    assert r.exit_code == 1 and "cannot find gang default/nope" in r.output
    r = runner.invoke(cli, ["gang", "show", "a/b/c", "--server", server.url])
    assert r.exit_code == 2 and "expected NAMESPACE/NAME" in r.output


def test_explain_shows_the_gang_verdict_of_a_member(server: LiveServer, tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "240"})
    member = tmp_path / "member.yaml"
    member.write_text(yaml.safe_dump(pod("train-1", group="train")))
    r = runner.invoke(cli, ["explain", "--pod", str(member), "--server", server.url, "-o", "json"])
    assert r.exit_code == 0, r.output
    verdict = json.loads(r.output)["podVerdicts"]["Coscheduling"]
    assert verdict["gang"] == "default/train" and verdict["status"] == "Success"
    assert (verdict["minMember"], verdict["children"], verdict["waiting"]) == (3, 3, 0)
    assert verdict["permit"] == "Wait: default/train lacks 2 waiting member(s)"
    r = runner.invoke(cli, ["explain", "--pod", str(member), "--server", server.url])
    assert r.exit_code == 0 and "Coscheduling: gang default/train" in r.output
    solo = tmp_path / "solo.yaml"
    solo.write_text(yaml.safe_dump(pod("solo")))
    r = runner.invoke(cli, ["explain", "--pod", str(solo), "--server", server.url, "-o", "json"])
    assert "podVerdicts" not in json.loads(r.output)
    stranger = tmp_path / "stranger.yaml"
    stranger.write_text(yaml.safe_dump(pod("x-0", group="ghost")))
    r = runner.invoke(cli, ["explain", "--pod", str(stranger), "--server", server.url, "-o", "json"])
    verdict = json.loads(r.output)["podVerdicts"]["Coscheduling"]
    assert verdict == {
        "gang": "default/ghost",
        "status": "UnschedulableAndUnresolvable",
        "reason": "can't find gang, gangName: default/ghost, podName: default/x-0",
    }


def test_gang_cli_names_a_disabled_plugin(tmp_path: Path) -> None:
    config = parse_config({"plugins": ["NodeResourcesFit"]}, default_registry().names())
    with LiveServer(FileSource(write(tmp_path, [node("n1")]), poll_interval=0), config) as srv:
        r = CliRunner(env={"COLUMNS": "240"}).invoke(cli, ["gang", "list", "--server", srv.url])
    assert r.exit_code == 1 and "is the Coscheduling plugin enabled" in r.output
