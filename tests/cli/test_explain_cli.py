"""`koord explain`: the pod from the cluster (kubeconfig, --context), a file or stdin; kube-scheduler's
verdict beside the plugins'; every -o format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from app.cli.main import cli
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer
from tests.conftest import LiveServer, wire


def big_pod(cpu: str = "200") -> dict[str, Any]:
    pod: dict[str, Any] = wire("filter.json")["Pod"]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return pod


@pytest.fixture
def apiserver() -> Iterator[FakeAPIServer]:
    fake = FakeAPIServer(tokens={TOKEN})
    yield fake
    fake.close()


def test_a_pod_kube_scheduler_rejects_is_not_feasible(example_server: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["explain", "--pod", "-", "--server", example_server.url], input=yaml.safe_dump(big_pod()))
    assert r.exit_code == 0, r.output
    assert "Insufficient cpu" in r.output and "yes" not in r.output  # 200 cpus fit no 16-cpu node
    assert "KUBE-SCHEDULER" in r.output and "QUOTA" in r.output and "GANG" in r.output
    assert "RESERVATION" in r.output
    names = runner.invoke(
        cli, ["explain", "--pod", "-", "--server", example_server.url, "-o", "name"], input=json.dumps(big_pod())
    )
    assert names.exit_code == 0 and names.output == ""  # no node can take it
    small = yaml.safe_dump(big_pod("1"))
    names = runner.invoke(cli, ["explain", "--pod", "-", "--server", example_server.url, "-o", "name"], input=small)
    assert "node/node-idle" in names.output.splitlines() and "node/node-hot" not in names.output
    as_yaml = runner.invoke(cli, ["explain", "--pod", "-", "--server", example_server.url, "-o", "yaml"], input=small)
    answer = yaml.safe_load(as_yaml.output)
    assert answer["nodes"]["node-hot"]["total"] is None  # infeasible: no score
    wide = runner.invoke(cli, ["explain", "--pod", "-", "--server", example_server.url, "-o", "wide"], input=small)
    assert wide.exit_code == 0 and "LOADAWARESCHEDULING" in wide.output and "EXTENDER SCORE" in wide.output


def test_explain_pod_name_reads_the_cluster(
    example_server: LiveServer, apiserver: FakeAPIServer, tmp_path: Path
) -> None:
    pod = big_pod()
    pod["metadata"].update(name="web", namespace="shop")
    apiserver.seed("/api/v1/namespaces/shop/pods", pod)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", apiserver.url)
    base = ["explain", "pod", "web", "-n", "shop", "--kubeconfig", kubeconfig, "--server", example_server.url]
    r = CliRunner().invoke(cli, [*base, "-o", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["pod"] == "shop/web"
    assert any(c.path == "/api/v1/namespaces/shop/pods/web" for c in apiserver.calls("GET"))
    # --context picks another cluster of the kubeconfig: unreachable there
    r = CliRunner().invoke(cli, [*base, "--context", "other"])
    assert r.exit_code == 2 and "cannot read pod shop/web" in r.output
    r = CliRunner().invoke(cli, [*base[:2], "ghost", *base[3:]])
    assert r.exit_code == 1 and 'pods "ghost" not found' in r.output
    r = CliRunner().invoke(cli, [*base, "--context", "nope"])
    assert r.exit_code == 2 and "no usable kubeconfig" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "name the pod"),
        (["pod", "x", "--pod", "p.yaml"], "one of them"),
        (["deployment", "x"], "expected: koord explain pod NAME"),
        (["pod"], "expected: koord explain pod NAME"),
        (["--pod", "/no/such.yaml"], "No such file"),
    ],
)
def test_bad_usage_exits_2(args: list[str], message: str) -> None:
    r = CliRunner().invoke(cli, ["explain", *args, "--server", "http://127.0.0.1:1"])
    assert r.exit_code == 2 and message in r.output, r.output


def test_stdin_must_hold_one_pod() -> None:
    r = CliRunner().invoke(cli, ["explain", "--pod", "-"], input="kind: Node\n")
    assert r.exit_code == 2 and "stdin: expected exactly one Pod object" in r.output
    r = CliRunner().invoke(cli, ["explain", "--pod", "-"], input="a: [\n")
    assert r.exit_code == 2 and "stdin:" in r.output


def test_quota_verdict_is_a_column(tmp_path: Path) -> None:
    """A pod over its ElasticQuota's max: the QUOTA column says why, on every node."""
    from app.sources.files import FileSource
    from tests.plugins.elasticquota.fixtures import node, pod, quota

    objs = [node("n1", "10"), quota("team-a", {"cpu": "1"}, {"cpu": "2", "memory": "8Gi"})]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(objs))
    greedy = pod("greedy", "4", namespace="team-a", quota_name="team-a")
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        r = CliRunner().invoke(cli, ["explain", "--pod", "-", "--server", srv.url], input=yaml.safe_dump(greedy))
        answer = CliRunner().invoke(
            cli, ["explain", "--pod", "-", "--server", srv.url, "-o", "json"], input=yaml.safe_dump(greedy)
        )
    assert r.exit_code == 0, r.output
    header, row = r.output.splitlines()[1:3]
    quota_at = header.index("QUOTA")
    assert row.startswith("n1") and "exceed" in row[quota_at:].lower(), r.output
    verdict = json.loads(answer.output)["preFilter"]["ElasticQuota"]
    assert verdict["status"] == "Unschedulable" and verdict["reason"]
