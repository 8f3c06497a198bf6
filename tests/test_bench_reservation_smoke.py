"""Smoke test of bench/reservation.py at tiny sizes: it runs, exits 0 and prints the documented JSON.

Not a timed test: latencies depend on the machine, so only the shape and positivity are checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "reservation.py"


def test_bench_prints_result_json() -> None:
    args = ["--nodes", "100", "--reservations", "40", "--candidates", "30", "--calls", "30", "--warmup", "5"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert set(result) == {
        "baseline",
        "with_reservations",
        "owner",
        "ratio",
        "nodes",
        "reservations",
        "candidates_per_request",
        "calls",
    }
    for run in ("baseline", "with_reservations", "owner"):
        for verb in ("filter", "prioritize"):
            summary = result[run][verb]
            assert set(summary) == {"p50_ms", "p99_ms", "calls_per_second"}, (run, verb)
            assert all(v > 0 for v in summary.values()), (run, verb, summary)
    assert set(result["ratio"]) == {"filter", "prioritize"} and all(v > 0 for v in result["ratio"].values())
    assert (result["nodes"], result["reservations"], result["calls"]) == (100, 40, 30)
