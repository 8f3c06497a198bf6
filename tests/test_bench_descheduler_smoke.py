"""Smoke test of bench/descheduler.py on a slice of the trace: it runs, moves pods off hot nodes, and
no move pushes a target over its high threshold. Skipped when the shared trace is not present."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "descheduler.py"
DATA = REPO.parent / "shared" / "data" / "alibaba-gpu-v2023" / "csv" / "openb_node_list_gpu_node.csv"


@pytest.mark.skipif(not DATA.exists(), reason="the Alibaba GPU trace is not under ../shared/data")
def test_bench_rebalances_without_new_hot_spots() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--limit-nodes", "80"], cwd=REPO, capture_output=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert result["over_high_after_move"] == 0
    assert result["pods_moved"] > 0
    assert result["nodes_over_high_cpu_after"] < result["nodes_over_high_cpu_before"]
    assert result["cpu_usage_percent_after"]["stddev"] < result["cpu_usage_percent_before"]["stddev"]
