"""kubectl's conventions on every ``koord`` listing: ``-o json|yaml|wide|name``, unknown values exit 2
with the allowed list, ``--version``, ``--certificate-authority``, help without Python type names,
``unlimited`` for upstream's MaxInt64/5 and default tables within 100 columns."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli.main import cli
from app.cli.quota import quantity_cell
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer
from tests.plugins.elasticquota.fixtures import node, pod, quota
from tests.plugins.gangkit import pod as gang_pod
from tests.plugins.gangkit import pod_group
from tests.server.test_client_auth_https import TLSServer

LISTINGS = [["quota", "list"], ["quota", "tree"], ["quota", "show", "team-a"], ["gang", "list"]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("cluster")
    objs = [
        node("n1", "10"),
        quota("dept", {"cpu": "8"}, {"cpu": "10", "memory": "64Gi"}, is_parent=True),
        quota("team-a", {"cpu": "4"}, {"cpu": "10", "memory": "64Gi"}, parent="dept"),
        pod("a1", "3", namespace="team-a", quota_name="team-a", node="n1"),
        pod_group("train", 2, 30),
        gang_pod("train-0", group="train"),
    ]
    (tmp / "c.yaml").write_text(yaml.safe_dump_all(objs))
    with LiveServer(FileSource(tmp, poll_interval=0)) as srv:
        yield srv


@pytest.mark.parametrize("args", LISTINGS, ids=" ".join)
def test_every_output_format(server: LiveServer, args: list[str]) -> None:
    runner = CliRunner()
    base = [*args, "--server", server.url]
    as_json = runner.invoke(cli, [*base, "-o", "json"])
    assert as_json.exit_code == 0, as_json.output
    as_yaml = runner.invoke(cli, [*base, "-o", "yaml"])
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.output) == json.loads(as_json.output)  # the same answer, not a table
    names = runner.invoke(cli, [*base, "-o", "name"])
    assert names.exit_code == 0, names.output
    lines = names.output.splitlines()
    assert lines and all(re.fullmatch(r"(elasticquota|gang)/[\w./-]+", line) for line in lines), lines
    table = runner.invoke(cli, base)
    wide = runner.invoke(cli, [*base, "-o", "wide"])
    assert table.exit_code == wide.exit_code == 0
    assert table.output.strip() and wide.output.strip()
    if args[1] != "tree":  # the default table fits 100 columns (the runner is no terminal: rows are never wrapped)
        assert max(len(line) for line in table.output.splitlines()) <= 100, table.output


def test_wide_shows_more_columns(server: LiveServer) -> None:
    runner = CliRunner()
    table = runner.invoke(cli, ["quota", "show", "team-a", "--server", server.url])
    wide = runner.invoke(cli, ["quota", "show", "team-a", "--server", server.url, "-o", "wide"])
    assert "CHILDREQUEST" not in table.output and "CHILDREQUEST" in wide.output
    names = runner.invoke(cli, ["quota", "list", "--server", server.url, "-o", "name"]).output.splitlines()
    assert "elasticquota/team-a" in names and "elasticquota/dept" in names


@pytest.mark.parametrize(
    "args", [*LISTINGS, ["reservation", "list"], ["gang", "show", "x"], ["explain", "--pod", "-"]], ids=" ".join
)
def test_unknown_output_exits_2_with_the_allowed_list(args: list[str]) -> None:
    r = CliRunner().invoke(cli, [*args, "--server", "http://127.0.0.1:1", "-o", "xml"])
    assert r.exit_code == 2
    for allowed in ("json", "yaml", "wide", "name"):
        assert allowed in r.output


def test_version() -> None:
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and re.fullmatch(r"koord \S+\n", r.output)


@pytest.mark.parametrize("args", [[], ["quota", "list"], ["gang", "show"], ["scheduler"], ["agent"], ["explain"]])
def test_help_names_no_python_types(args: list[str]) -> None:
    r = CliRunner().invoke(cli, [*args, "--help"], env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    for python_name in ("<str>", "<bool>", "<int>", "<float>", "<Path>", "<path>", "<file>"):
        assert python_name not in r.output


def test_certificate_authority(tmp_path: Path) -> None:
    """Over real HTTPS: the service's CA is trusted with --certificate-authority, refused without it."""
    certs = tmp_path / "certs"
    assert CliRunner().invoke(cli, ["certs", "--out-dir", str(certs)]).exit_code == 0
    cluster = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, cluster)
    runner = CliRunner()
    with TLSServer(certs, cluster, None) as srv:
        url = f"https://localhost:{srv.port}"
        ok = runner.invoke(cli, ["quota", "list", "--server", url, "--certificate-authority", str(certs / "ca.crt")])
        assert ok.exit_code == 0, ok.output
        untrusted = runner.invoke(cli, ["quota", "list", "--server", url])
        assert untrusted.exit_code == 2 and "CERTIFICATE_VERIFY_FAILED" in untrusted.output
        insecure = runner.invoke(cli, ["quota", "list", "--server", url, "--insecure-skip-tls-verify"])
        assert insecure.exit_code == 0, insecure.output
    missing = runner.invoke(cli, ["quota", "list", "--server", url, "--certificate-authority", "/nope.pem"])
    assert missing.exit_code == 2 and "no such file" in missing.output
    junk = runner.invoke(cli, ["quota", "list", "--server", url, "--certificate-authority", __file__])
    assert junk.exit_code == 2 and "not a PEM CA bundle" in junk.output
    both = runner.invoke(cli, ["quota", "list", "--server", url, "--certificate-authority", __file__, "--insecure"])
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_unlimited() -> None:
    assert quantity_cell("1844674407370955161") == "unlimited"  # memory: MaxInt64/5 bytes
    assert quantity_cell("1844674407370955161000m") == "unlimited"
    assert quantity_cell("10") == "10" and quantity_cell(None) == "-" and quantity_cell("junk") == "junk"
