"""``koord descheduler drain`` against the fake API server over real HTTP: start, list and get a drain in
progress (with why it cannot finish), confirm and undo; refusals exit 1 or 2 with a clear message. And the
DeschedulerConfiguration switch that runs the DrainNodeController."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.api import drain as api
from app.cli.main import cli
from app.descheduler.config import ConfigError, parse_config
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer

DN = "/apis/scheduling.koordinator.sh/v1alpha1/drainnodes"
NODES = "/api/v1/nodes"

IN_PROGRESS = {
    "phase": "Running",
    api.STATUS_POD_MIGRATIONS: [
        {"uid": "u1", "namespace": "default", "podName": "web-0", "phase": "Succeed", "reservationName": "n1-u1",
         "reservationPhase": "Succeeded", "targetNode": "b", "podMigrationJobName": "n1-u1",
         "podMigrationJobPhase": "Succeeded"},
        {"uid": "u2", "namespace": "default", "podName": "web-1", "phase": "Migrating", "reservationName": "n1-u2",
         "reservationPhase": "Available", "targetNode": "c", "podMigrationJobName": "n1-u2",
         "podMigrationJobPhase": "Running"},
        {"uid": "u3", "namespace": "default", "podName": "web-2", "phase": "Unavailable", "reservationName": "n1-u3",
         "reservationPhase": "Pending",
         "message": "reservation n1-u3 cannot be scheduled: 0/3 nodes are available: Insufficient cpu"},
    ],
    api.STATUS_POD_MIGRATION_SUMMARY: {"Succeed": 1, "Migrating": 1, "Unavailable": 1, "Waiting": 0},
    "conditions": [
        {"type": "UnavailableReservationExists", "status": "True", "reason": "unavailable reservation count: 1",
         "message": "default/web-2: reservation n1-u3 cannot be scheduled: 0/3 nodes are available: Insufficient cpu"},
        {"type": "FailedMigrationJobExists", "status": "False", "reason": "failed job count: 0", "message": ""},
    ],
}  # fmt: skip


@pytest.fixture
def fake() -> Iterator[FakeAPIServer]:
    f = FakeAPIServer(tokens={TOKEN})
    f.seed(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    yield f
    f.close()


@pytest.fixture
def kc(fake: FakeAPIServer, tmp_path: Path) -> str:
    return write_kubeconfig(tmp_path / "kc", fake.url)


def drain(*args: str) -> Any:
    return CliRunner().invoke(cli, ["descheduler", "drain", *args])


def test_start_creates_a_confirmed_migrate_directly_drain(fake: FakeAPIServer, kc: str) -> None:
    result = drain("start", "n1", "--kubeconfig", kc, "-o", "json")
    assert result.exit_code == 0, result.output
    stored = fake.store[DN]["n1"]
    assert stored["spec"] == {
        "nodeName": "n1",
        "confirmState": "Confirmed",
        "migrationPolicy": {"mode": "MigrateDirectly"},
    }
    assert json.loads(result.stdout)["metadata"]["name"] == "n1"

    again = drain("start", "n1", "--kubeconfig", kc)
    assert again.exit_code == 1 and "drainnode n1 already exists" in again.output


def test_start_with_wait_for_confirm_then_confirm(fake: FakeAPIServer, kc: str) -> None:
    args = ["start", "n1", "--name", "plan", "--wait-for-confirm", "--wait-first", "30m", "--cordon-mode", "Taint"]
    assert drain(*args, "--ttl", "2h", "--kubeconfig", kc).exit_code == 0
    spec = fake.store[DN]["plan"]["spec"]
    assert spec == {
        "nodeName": "n1",
        "confirmState": "WaitForConfirm",
        "migrationPolicy": {"mode": "WaitFirst", "waitDuration": "30m"},
        "cordonPolicy": {"mode": "Taint"},
        "ttl": "2h",
    }
    result = drain("confirm", "plan", "--kubeconfig", kc)
    assert result.exit_code == 0 and "confirmState=Confirmed" in result.output
    assert fake.store[DN]["plan"]["spec"]["confirmState"] == "Confirmed"


def test_list_and_get_show_a_drain_in_progress_and_why_it_cannot_finish(fake: FakeAPIServer, kc: str) -> None:
    fake.seed(DN, {**api.new_drain_node("n1", "n1"), "status": IN_PROGRESS})
    listed = drain("list", "--kubeconfig", kc)
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.stdout.splitlines() if "│ n1 " in line)
    assert "Running" in row and "Confirmed" in row and "Migrating 1" in listed.stdout
    assert "Succeed 1" in listed.stdout and "Unavailable 1" in listed.stdout
    assert "UnavailableReservationExists" in listed.stdout and "Insufficient cpu" in listed.stdout
    assert "FailedMigrationJobExists" not in listed.stdout  # a False condition is nothing left to do

    got = drain("get", "n1", "--kubeconfig", kc)
    assert got.exit_code == 0, got.output
    assert "default/web-1" in got.stdout and "n1-u2 (Running)" in got.stdout
    assert "default/web-2" in got.stdout and "Unavailable" in got.stdout

    as_json = drain("list", "--kubeconfig", kc, "-o", "json")
    assert json.loads(as_json.stdout)[0]["status"]["phase"] == "Running"


def test_undo_sets_aborted(fake: FakeAPIServer, kc: str) -> None:
    fake.seed(DN, api.new_drain_node("n1", "n1"))
    result = drain("undo", "n1", "--kubeconfig", kc)
    assert result.exit_code == 0 and "confirmState=Aborted" in result.output
    assert fake.store[DN]["n1"]["spec"]["confirmState"] == "Aborted"


def test_an_empty_list_says_so(kc: str) -> None:
    result = drain("list", "--kubeconfig", kc)
    assert result.exit_code == 0 and "No drains found." in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["start", "nope"], 1, "node nope not found"),
        (["get", "ghost"], 1, "drainnode ghost not found"),
        (["undo", "ghost"], 1, "drainnode ghost not found"),
        (["start", "n1", "--cordon-mode", "Paint"], 2, "cordonPolicy.mode must be Taint or Label"),
        (["start", "n1", "--wait-first", "soon"], 2, "--wait-first: invalid duration"),
        (["list", "-o", "yaml"], 2, "-o must be table or json"),
    ],
)
def test_refusals(kc: str, args: list[str], code: int, message: str) -> None:
    result = drain(*args, "--kubeconfig", kc)
    assert result.exit_code == code, result.output
    assert message in result.output


def test_unreachable_api_server_exits_2(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")
    result = drain("list", "--kubeconfig", kc)
    assert result.exit_code == 2 and "error:" in result.output


def _config(*plugins: str) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "profiles": [{"name": "p", "plugins": {"evict": {"enabled": [{"name": n} for n in plugins]}}}],
    }


def test_config_enables_the_drain_controller_only_with_the_migration_controller() -> None:
    cfg = parse_config(_config("MigrationController", "DrainNodeController"))
    assert cfg.drain_enabled and cfg.migration_enabled
    assert not parse_config(_config("MigrationController")).drain_enabled
    with pytest.raises(ConfigError, match="DrainNodeController needs MigrationController"):
        parse_config(_config("DrainNodeController"))
