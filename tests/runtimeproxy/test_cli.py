"""``koord runtime-proxy`` refuses bad flags with exit status 2 and a message naming the flag."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app.cli.main import cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend-runtime-mode", "Docker"], "Docker is not implemented"),
        (["--backend-runtime-mode", "cri-o"], "unknown runtime engine backend"),
        (["--hook-timeout", "0"], "--hook-timeout must be > 0"),
        (["--koord-runtimeproxy-endpoint", "/x.sock", "--remote-runtime-service-endpoint", "/x.sock"], "same socket"),
    ],
)
def test_bad_flags_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["runtime-proxy", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_agent_refuses_an_unknown_hook_failure_policy(tmp_path: object) -> None:
    from pathlib import Path

    base = Path(str(tmp_path))
    (base / "cluster").mkdir()
    result = CliRunner().invoke(
        cli,
        [
            "agent",
            "--node-name=n1",
            f"--cluster={base / 'cluster'}",
            f"--cgroup-root={base}",
            "--port=0",
            "--no-gpu",
            f"--runtime-hooks-addr={base / 'k.sock'}",
            "--runtime-hooks-failure-policy=Maybe",
        ],
    )
    assert result.exit_code == 2
    assert "--runtime-hooks-failure-policy 'Maybe'" in result.output


def test_grpc_experiments_are_set_for_the_proxy_unless_the_operator_chose() -> None:
    from runtimeproxy.options import GRPC_EXPERIMENTS_OFF, set_grpc_environment

    env: dict[str, str] = {}
    set_grpc_environment(env)
    assert env == {"GRPC_EXPERIMENTS": GRPC_EXPERIMENTS_OFF}
    mine = {"GRPC_EXPERIMENTS": ""}  # gRPC's defaults kept
    set_grpc_environment(mine)
    assert mine == {"GRPC_EXPERIMENTS": ""}
