"""Smoke test of bench/quota.py at tiny sizes: it runs and prints the documented JSON (not timed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]


def test_bench_prints_result_json() -> None:
    args = ["--top", "2", "--mid", "2", "--leaves", "2", "--pods", "200", "--nodes", "5", "--events", "20"]
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "quota.py"), *args],
        cwd=REPO,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert result["quotas"] == 2 + 4 + 8
    assert set(result["incremental_update_ms"]) == {"p50", "p99"}
    assert set(result["prefilter_ms"]) == {"p50", "p99"}
    assert result["rebuild_ms"] >= 0
