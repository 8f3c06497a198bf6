"""Smoke test of bench/gang.py at tiny sizes: it runs, exits 0 and prints the documented JSON.

Not a timed test: latencies and RSS depend on the machine, so only the shape, the counts and
positivity are checked (the targets are the full-size run's, reported in docs/gang.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gang.py"
KEYS = {
    "nodes",
    "members",
    "candidates_per_filter",
    "schedule_seconds",
    "schedule_service_cpu_s",
    "schedule_driver_cpu_s",
    "waiting_binds",
    "release_seconds",
    "rss_idle_mb",
    "rss_waiting_mb",
    "rss_above_idle_mb",
    "rss_peak_mb",
    "decision_digest",
    "targets",
}


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, timeout=300, check=False, env=env
    )


def test_gang_bench_prints_result_json() -> None:
    proc = run("--nodes", "50", "--members", "20")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert set(result) == KEYS
    assert (result["nodes"], result["members"], result["waiting_binds"]) == (50, 20, 19)
    assert result["candidates_per_filter"] == 50  # fewer than 100 nodes: kube-scheduler sends them all
    assert result["release_seconds"] > 0 and result["schedule_seconds"] > 0
    assert result["schedule_service_cpu_s"] > 0 and result["schedule_driver_cpu_s"] > 0
    assert result["rss_idle_mb"] > 10 and result["rss_peak_mb"] >= result["rss_waiting_mb"] > 10
    assert result["targets"] == {"release_seconds": 1.0, "rss_above_idle_mb": 50.0}
    assert len(result["decision_digest"]) == 16 and int(result["decision_digest"], 16) >= 0


def test_gang_bench_refuses_bad_sizes() -> None:
    proc = run("--members", "0")
    assert proc.returncode == 2 and b"--members must be >= 1" in proc.stderr
