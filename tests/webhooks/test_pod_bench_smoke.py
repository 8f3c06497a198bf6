"""Smoke test of bench/webhook.py at tiny sizes: it runs, exits 0 and prints the documented JSON (not timed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]


def test_webhook_bench_prints_result_json() -> None:
    args = ["--concurrency", "4", "--reviews", "60", "--warmup", "6"]
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "webhook.py"), *args],
        cwd=REPO,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert set(result) == {
        "concurrency",
        "reviews",
        "server_ms",
        "client_ms",
        "reviews_per_second",
        "target_p99_ms",
        "meets_target",
    }
    for key in ("server_ms", "client_ms"):
        assert set(result[key]) == {"p50_ms", "p99_ms", "max_ms"}
        assert 0 < result[key]["p50_ms"] <= result[key]["p99_ms"] <= result[key]["max_ms"]
    assert result["reviews_per_second"] > 0
