"""Smoke test of bench/cpuset.py at tiny sizes: it runs, exits 0 and prints the documented JSON (not timed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "cpuset.py"


def test_cpuset_bench_prints_result_json() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--nodes", "6", "--window", "4", "--calls", "12"],
        cwd=REPO,
        capture_output=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert result["cpus_per_node"] == 256 and result["numa_nodes_per_node"] == 8
    for point in ("filter", "score", "reserve"):
        assert 0 < result["one_node"][point]["p50_ms"] <= result["one_node"][point]["p99_ms"]
    assert result["nodes"]["count"] == 6 and result["nodes"]["window"] == 4
    for key in ("filter_window", "score_window", "filter_all_nodes", "numa_filter_window"):
        assert set(result["nodes"][key]) == {"p50_ms", "p99_ms"}
    assert set(result["framework"]) == {"plain_pod_filter_window", "lsr_pod_filter_window"}
    assert result["plain_pre_filter_us"] > 0


def test_cpuset_bench_refuses_a_zero_count() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--nodes", "0"], cwd=REPO, capture_output=True, timeout=60, check=False, env=env
    )
    assert proc.returncode == 2 and b"--nodes" in proc.stderr
