"""`koord manager` argument checks and its file mode."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.cli.main import cli


def test_lease_timings_are_checked() -> None:
    result = CliRunner().invoke(cli, ["manager", "--lease-duration", "5", "--renew-deadline", "10"])
    assert result.exit_code == 2
    assert "--lease-duration > --renew-deadline" in result.output


def test_missing_cluster_files_are_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["manager", "--cluster", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert "no such file or directory" in result.output
