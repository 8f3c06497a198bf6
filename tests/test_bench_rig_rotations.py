"""bench/rig_rotations.py without a rig: its flags and environment are checked before anything starts (exit 2 with
the reason), and the Prometheus samples it sums are the ones its patterns name."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import time
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


def test_sigterm_stops_the_extender_it_started(tmp_path: Path) -> None:
    """Killed with SIGTERM mid-run, the script still stops its extender: a leftover would keep the port and be measured
    by the next run in place of its own."""
    rig, scripts = tmp_path / "rig", tmp_path / "scripts"
    (rig / "bin").mkdir(parents=True)
    scripts.mkdir()
    started = tmp_path / "noop.pid"
    noop = rig / "bin" / "noop-extender"
    noop.write_text(f"#!/bin/sh\necho $$ > {started}.tmp && mv {started}.tmp {started}\nexec sleep 300\n")
    noop.chmod(0o755)
    (scripts / "cleanup-pods.sh").write_text("exit 0\n")
    (scripts / "bench-nodemetrics.py").write_text("import time\ntime.sleep(300)\n")
    env = {**os.environ, "RIG": str(rig)}
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--modes", "noop", "--rotations", "1", "--rig-scripts", str(scripts)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(started.read_text())
        time.sleep(1.5)  # past the script's own second of waiting, into the NodeMetrics step
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        proc.kill()
        proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose: it holds no port
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
