"""Smoke test of bench/midtrace.py on the first hours of the GenAI pod-usage trace (skipped without ../shared).

Not a timed test: it checks the JSON's shape and the ordering the Mid tier promises (prediction lends less than
the current-usage figure, and never more than prod leaves unused), not the figures themselves.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import SHARED

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "midtrace.py"
TRACE = SHARED / "data" / "alibaba-genai-v2026-pod-usage" / "pod_memory_util_anon.tar.gz"


@pytest.mark.skipif(not TRACE.is_file(), reason=f"the GenAI pod-usage trace is not at {TRACE}")
def test_bench_replays_the_trace_head() -> None:
    args = ["--trace", str(TRACE), "--hours", "2", "--nodes", "2", "--warmup-hours", "1"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert result["nodes"] == 2 and result["pods"] == 16 and result["hourly_points"] == 1
    assert 0 < result["mid_pct"] <= result["unused_now_pct"] <= 100
    assert result["batch_pct"] >= 0 and result["node_minutes"] > 0 and result["mid_pods_fit"] >= 0


def test_bench_says_when_the_trace_is_missing(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--trace", str(tmp_path / "none.tar.gz")],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and b"no trace at" in proc.stderr
