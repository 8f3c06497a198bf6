"""bench/rig_rotations.py without a rig: its flags and environment are checked before anything starts (exit 2 with
the reason), and the Prometheus samples it sums are the ones its patterns name."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "rig_rotations.py"


def _run(*args: str, rig: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RIG"}
    if rig is not None:
        env["RIG"] = rig
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_bad_flags_and_a_missing_rig_exit_2_with_the_reason(tmp_path: Path) -> None:
    unknown = _run("--modes", "noop,bogus", rig=str(tmp_path))
    assert unknown.returncode == 2 and "unknown modes ['bogus']" in unknown.stderr
    before = _run("--modes", "koord,koord-before", rig=str(tmp_path))
    assert before.returncode == 2 and "mode koord-before needs --koord-before" in before.stderr
    no_rig = _run("--modes", "noop")
    assert no_rig.returncode == 2 and "RIG is not set" in no_rig.stderr
    assert not (tmp_path / "run").exists()  # nothing was started


def test_samples_are_summed_by_name_and_labels() -> None:
    sample_sum = runpy.run_path(str(SCRIPT))["sample_sum"]
    text = "\n".join(
        [
            "# HELP scheduler_framework_extension_point_duration_seconds x",
            'scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",status="Success"} 1.5',
            'scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",status="Error"} 0.25',
            'scheduler_framework_extension_point_duration_seconds_sum{extension_point="Score",status="Success"} 4',
            "scheduler_scheduling_algorithm_duration_seconds_sum 2.5e-1",
            "scheduler_scheduling_algorithm_duration_seconds_count 10",
        ]
    )
    filter_pattern = r'scheduler_framework_extension_point_duration_seconds_sum\{extension_point="Filter".*'
    assert sample_sum(text, filter_pattern) == 1.75
    assert sample_sum(text, r"scheduler_scheduling_algorithm_duration_seconds_sum") == 0.25
    assert sample_sum(text, r"scheduler_scheduling_algorithm_duration_seconds") == 0.0  # whole names only
