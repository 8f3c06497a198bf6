"""Smoke test of bench/cycle.py at tiny sizes: it runs, exits 0 and prints the documented JSON.

Not a timed test: CPU and latencies depend on the machine, so only the shape, the event count per
pod (created, bound, running: three watch events) and positivity are checked.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "cycle.py"


#: The quick knobs of a smoke run: a floor of 200 requests instead of 2,000, an idle rate over 0.3 s instead of 2 s.
QUICK = ("--floor-calls", "200", "--idle-seconds", "0.3")


def run(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, timeout=300, check=False, env=env
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return orjson.loads(proc.stdout)


def test_cycle_bench_prints_result_json() -> None:
    result = run("--nodes", "120", "--pods", "30", "--touches", "200", "--repeat", "2", *QUICK)
    assert result["nodes"] == 120 and result["pods"] == 30
    assert len(result["cpu_ms_per_pod_rounds"]) == 2  # the median of the rounds is cpu_ms_per_pod
    assert min(result["cpu_ms_per_pod_rounds"]) <= result["cpu_ms_per_pod"] <= max(result["cpu_ms_per_pod_rounds"])
    assert result["candidates_per_filter"] == 100  # kube-scheduler's minimum of feasible nodes to find
    assert result["cpu_ms_per_pod"] > 0 and result["cpu_ms_per_pod_raw"] >= result["cpu_ms_per_pod"]
    assert result["watch_events_per_pod"] == 3.0  # ADDED, MODIFIED (bound), MODIFIED (Running)
    for verb in ("filter", "prioritize", "bind"):
        assert set(result[verb]) == {"p50_ms", "p99_ms"}
        assert 0 < result[verb]["p50_ms"] <= result[verb]["p99_ms"]
    # process CPU time ticks in 10 ms steps: at these sizes a phase may read 0
    assert result["filter_cpu_ms_per_call"] >= 0 and result["prioritize_cpu_ms_per_call"] >= 0
    assert result["watch"]["events"] == 200
    assert result["watch"]["events_per_second"] > 0
    floor = result["http_floor"]
    assert floor["cpu_ms_per_request"] > 0 and floor["client_cpu_ms_per_bind"] > 0
    assert abs(floor["cpu_ms_per_pod"] - 3 * floor["cpu_ms_per_request"] - floor["client_cpu_ms_per_bind"]) <= 0.003
    # the no-op extender played the same rounds, alternating, against its own fake
    noop = result["noop_extender"]
    assert len(noop["cpu_ms_per_pod_rounds"]) == 2
    assert min(noop["cpu_ms_per_pod_rounds"]) <= noop["cpu_ms_per_pod"] <= max(noop["cpu_ms_per_pod_rounds"])
    assert noop["cpu_ms_per_pod"] > 0
    assert noop["filter_cpu_ms_per_call"] >= 0 and noop["prioritize_cpu_ms_per_call"] >= 0
    for verb in ("filter", "prioritize", "bind"):
        assert 0 < noop[verb]["p50_ms"] <= noop[verb]["p99_ms"]
    # the ratio is taken before either figure is rounded to 3 places: bound it by the rounded figures'
    # intervals (each +-0.0005), plus its own rounding
    n, c = noop["cpu_ms_per_pod"], result["cpu_ms_per_pod"]
    assert (n - 0.0005) / (c + 0.0005) - 0.0005 <= result["floor_ratio"] <= (n + 0.0005) / (c - 0.0005) + 0.0005
    assert result["decisions"] == 60 and len(result["decision_digest"]) == 16
    # the interpreter is part of the figure: the same code costs ~7 % less on an optimised CPython build
    assert result["python"] == {
        "version": platform.python_version(),
        "executable": sys.executable,
        "compiler": platform.python_compiler(),
    }


def test_cycle_bench_decisions_repeat_on_a_fixed_seed() -> None:
    """Two runs of the same seed bind every pod to the same node (the digest the builds are compared by)."""
    a = run("--nodes", "120", "--pods", "20", "--touches", "10", "--no-floor", *QUICK)
    b = run("--nodes", "120", "--pods", "20", "--touches", "10", "--no-floor", *QUICK)
    assert "noop_extender" not in a and "floor_ratio" not in a
    assert a["decisions"] == 20
    assert a["decision_digest"] == b["decision_digest"]
    c = run("--nodes", "120", "--pods", "20", "--touches", "10", "--no-floor", "--seed", "2", *QUICK)
    assert c["decision_digest"] != a["decision_digest"]  # the digest does see the decisions


def test_cycle_bench_memory_mode() -> None:
    result = run("--memory", "--memory-nodes", "50")
    mem = result["memory"]
    assert mem["nodes"] == 50
    assert mem["rss_mb"] > 10
    assert 50 * 16 <= mem["pods_in_cache"] <= 50 * 24  # 16-24 running pods per node, all listed
    assert result["python"]["version"] == platform.python_version()


def test_quick_knobs_are_checked_like_the_other_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    """``--floor-calls`` and ``--idle-seconds`` below their least values are usage errors (exit 2), not a bench
    that divides by zero or measures nothing (the bench's own argument parser, in this process)."""
    spec = importlib.util.spec_from_file_location("cycle_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for flag, value, least in (("--floor-calls", "0", "1"), ("--idle-seconds", "0", "0.1")):
        with pytest.raises(SystemExit) as exited:
            bench.parse_args([flag, value])
        assert exited.value.code == 2
        assert f"{flag} must be >= {least}" in capsys.readouterr().err
