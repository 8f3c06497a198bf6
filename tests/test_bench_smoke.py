"""Smoke test of bench/extender.py at tiny sizes: it runs, exits 0 and prints the documented JSON.

Not a timed test: latencies depend on the machine, so only the shape and positivity are checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "extender.py"

VERB_KEYS = {"p50_ms", "p99_ms", "calls_per_second", "ratio_to_noop"}
NOOP_KEYS = {"p50_ms", "p99_ms", "calls_per_second"}


def test_bench_prints_result_json() -> None:
    args = ["--nodes", "200", "--candidates", "50", "--calls", "50", "--full-calls", "20", "--warmup", "10"]
    args += ["--binds", "40"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)

    assert set(result) == {
        "filter",
        "prioritize",
        "noop",
        "filter_full_nodes",
        "bind",
        "nodes",
        "candidates_per_request",
        "calls",
    }
    for verb in ("filter", "prioritize", "filter_full_nodes"):
        assert set(result[verb]) == VERB_KEYS, verb
        assert all(isinstance(v, float) and v > 0 for v in result[verb].values()), result[verb]
    assert set(result["noop"]) == NOOP_KEYS
    assert all(isinstance(v, float) and v > 0 for v in result["noop"].values()), result["noop"]
    bind = result["bind"]
    assert set(bind) == NOOP_KEYS | {"refused"}
    assert bind["p50_ms"] > 0 and bind["calls_per_second"] > 0
    assert 0 <= bind["refused"] < 40  # most binds land: each goes to a node its filter call found feasible
    assert result["nodes"] == 200
    assert result["candidates_per_request"] == 50
    assert result["calls"] == 50
