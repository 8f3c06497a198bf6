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
    result = CliRunner().invoke(cli, ["manager", "--cluster", str(tmp_path / "nope"), "--port", "0"])
    assert result.exit_code == 1
    assert "no such file or directory" in result.output


def test_manager_serves_metrics_and_healthz() -> None:
    """A real `koord manager` process on the example cluster answers /healthz and /metrics (its controllers'
    series, process metrics, no _created series)."""
    import os
    import subprocess
    import sys
    import time

    import httpx

    from tests.conftest import EXAMPLE_CLUSTER, free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "manager", "--cluster", str(EXAMPLE_CLUSTER), "--host", "127.0.0.1",
         "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        health = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert health is not None and health.status_code == 200 and health.text == "ok"
        metrics = ""
        while time.monotonic() < deadline and "koord_slo_controller_writes" not in metrics:  # first NodeSLO writes
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            time.sleep(0.2)
        assert "koord_slo_controller_writes" in metrics and "process_cpu_seconds_total" in metrics
        assert "_created" not in metrics
    finally:
        proc.terminate()
        proc.wait(timeout=30)
