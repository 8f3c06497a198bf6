"""Smoke test of bench/cyclecode.py at tiny sizes: it runs, exits 0 and prints the documented JSON.

Not a timed test: only the shape, the steps and positivity are checked (process CPU time of a few
pods can read 0 for a step on a coarse clock, so only the total must be positive).
"""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "cyclecode.py"


def test_cyclecode_bench_prints_result_json() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--nodes", "120", "--pods", "20", "--rounds", "3", "--gap-ms", "0.1"],
        cwd=REPO,
        capture_output=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert result["nodes"] == 120 and result["pods"] == 20
    assert result["candidates_per_filter"] == 100  # kube-scheduler's minimum of feasible nodes to find
    assert result["gap_ms"] == 0.1
    assert len(result["cpu_ms_per_pod_rounds"]) == 3
    assert min(result["cpu_ms_per_pod_rounds"]) <= result["cpu_ms_per_pod"] <= max(result["cpu_ms_per_pod_rounds"])
    assert result["cpu_ms_per_pod"] > 0
    assert result["python"]["version"] == platform.python_version()
    assert result["python"]["executable"] == sys.executable
    rounds = result["cpu_ms_per_pod_rounds"]
    assert result["cpu_ms_per_pod_mean"] == pytest.approx(sum(rounds) / len(rounds), abs=1e-3)
    assert set(result["per_pod_us"]) == {"watch", "filter", "prioritize", "bind"}
    assert all(v >= 0 for v in result["per_pod_us"].values())
    assert result["watch_events_per_pod"] == 3


def test_cyclecode_bench_applies_three_events_per_pod() -> None:
    """The fake's pod log holds ADDED, MODIFIED (bound) and MODIFIED (Running) per scheduled pod, and the
    service's cache ends with every pod bound where /bind put it."""
    from bench.cyclecode import CodeCycle
    from bench.fakeapi import PODS

    async def scenario() -> tuple[int, int, int]:
        cycle = CodeCycle(110, 1)
        await cycle.load()
        before = len(cycle.fake.log.get(PODS, []))
        await cycle.round(7, 1)
        events = len(cycle.fake.log[PODS]) - before
        recorded = len(cycle.source.bindings)
        cache = cycle.state.cache
        on_nodes = sum(
            1
            for uid, p in cache.pods.items()
            if p.name.startswith("cycle-1-") and p.node_name and p.phase == "Running" and uid not in cache.assumed
        )
        return events, recorded, on_nodes

    threshold = gc.get_threshold()
    try:
        events, recorded, on_nodes = asyncio.run(scenario())
        assert gc.get_freeze_count() > 0  # the load settled the collector as the service's lifespan does
    finally:  # CodeCycle.load froze this test process's objects and raised the young threshold
        gc.unfreeze()
        gc.set_threshold(*threshold)
    assert events == 3 * 7
    assert recorded == 7  # the in-memory source got one Binding per pod
    assert on_nodes == 7  # the watch's MODIFIED events confirmed every binding (no assumption left) and ran it


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "--rounds must be >= 1"),
        (["--pods", "0"], "--pods must be >= 1"),
        (["--nodes", "-3"], "--nodes must be >= 1"),
        (["--gap-ms", "-0.5"], "--gap-ms must be >= 0"),
    ],
)
def test_bad_flags_exit_2_with_the_reason(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A count below 1 or a negative gap is argparse's usage error (exit 2, the flag named), never a traceback."""
    from bench.cyclecode import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
