"""Smoke test of bench/whatif.py at tiny sizes: it runs, exits 0 and prints the documented JSON.

Not a timed test: the figures depend on the machine, so only the shape, the counts and positivity are checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "whatif.py"


def test_bench_prints_result_json() -> None:
    args = ["--nodes", "30", "--pods", "120", "--pending", "12", "--jobs", "1"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = orjson.loads(proc.stdout)
    assert set(result) == {"nodes", "pods", "pending", "load_1m", "jobs", "cpus", "snapshot", "whatif", "targets"}
    snapshot = result["snapshot"]
    assert snapshot["objects"]["Node"] == 30 and snapshot["objects"]["Pod"] == 120 + 12
    assert snapshot["dropped_env"] == 12  # the pending pods' env never reaches the files
    assert snapshot["total_s"] > 0 and snapshot["bytes"] > 0
    whatif = result["whatif"]
    assert set(whatif["configurations"]) == {"cpu65", "cpu80"}
    for run in whatif["configurations"].values():
        assert run["pods"] == 12 and run["placed"] + run["unschedulable"] == 12
        assert run["load_s"] > 0 and run["schedule_s"] > 0 and run["cpu_s"] > 0
    assert whatif["total_s"] > 0 and whatif["changed"] >= 0
