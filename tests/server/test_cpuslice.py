"""The CPU slice the serving thread asks of Linux (``app.server.cpuslice``, ``koord scheduler --cpu-slice-ms``).

Each case runs in a thread of its own, so the test process keeps the kernel's slice; the slice a thread runs with
is read back from ``/proc/thread-self/sched`` (``se.slice``, in ns), which kernels built with scheduler debugging
show. A kernel before 6.12 takes the request and ignores it: the read-back cases skip there."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.server.cpuslice import DEFAULT_SLICE_MS, request_slice
from tests.conftest import EXAMPLE_CLUSTER, free_port

ROOT = Path(__file__).resolve().parents[2]


def slice_ns(tid: int | str = "thread-self") -> int | None:
    """The ``se.slice`` of a thread (``/proc/thread-self`` or a pid's main thread), or None where not shown."""
    path = Path("/proc/thread-self/sched") if tid == "thread-self" else Path(f"/proc/{tid}/task/{tid}/sched")
    try:
        for line in path.read_text().splitlines():
            if line.startswith("se.slice"):
                return int(line.split()[-1])
    except OSError:
        return None
    return None


def in_thread(body: Callable[[], Any]) -> Any:
    """``body()`` run in a new thread (whose scheduling attributes die with it); what it returned or raised."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = body()
        except BaseException as exc:  # re-raised in the caller
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def needs_custom_slices() -> None:
    before = slice_ns()
    if before is None:
        pytest.skip("this kernel does not show se.slice in /proc/thread-self/sched")
    probe = in_thread(lambda: (request_slice(7.0), slice_ns()))
    if probe[0] is not None or probe[1] != 7_000_000:
        pytest.skip(f"this kernel keeps no custom fair slice (Linux 6.12+): {probe}")


def test_the_slice_asked_is_the_threads_and_its_new_threads_with_policy_and_nice_kept() -> None:
    needs_custom_slices()
    default = slice_ns()

    def body() -> tuple[Any, ...]:
        os.setpriority(os.PRIO_PROCESS, 0, 3)  # this thread only (Linux): raising nice needs no privilege
        why_not = request_slice(3.0)
        child: list[int | None] = []
        started = threading.Thread(target=lambda: child.append(slice_ns()))
        started.start()
        started.join()
        return why_not, slice_ns(), os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), child[0]

    assert in_thread(body) == (None, 3_000_000, 3, os.SCHED_OTHER, 3_000_000)
    assert slice_ns() == default  # the test process's own thread was not touched


def test_a_batch_thread_stays_batch_and_an_idle_one_is_left_as_it_is() -> None:
    needs_custom_slices()

    def batch() -> tuple[Any, ...]:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        return request_slice(5.0), slice_ns(), os.sched_getscheduler(0)

    assert in_thread(batch) == (None, 5_000_000, os.SCHED_BATCH)

    def idle() -> tuple[Any, ...]:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        before = slice_ns()
        return request_slice(5.0), slice_ns() == before, os.sched_getscheduler(0)

    why_not, unchanged, policy = in_thread(idle)
    assert "left as it is" in why_not and unchanged and policy == os.SCHED_IDLE


@pytest.mark.parametrize("bad", [0.05, 100.5, -1.0, float("nan")])
def test_a_slice_outside_what_linux_takes_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match=r"a CPU slice is 0\.1 to 100 ms"):
        request_slice(bad)


@pytest.mark.parametrize("flag", ["500", "-2", "0.01"])
def test_the_flag_outside_its_range_exits_2_naming_it(flag: str) -> None:
    r = CliRunner().invoke(cli, ["scheduler", "--port", str(free_port()), "--cpu-slice-ms", flag])
    assert r.exit_code == 2, r.output
    assert "--cpu-slice-ms" in r.output and "outside 0.1-100" in r.output and "Traceback" not in r.output


def test_koord_scheduler_keeps_the_kernels_slice_by_default_and_asks_the_one_it_is_told() -> None:
    """A real ``koord scheduler``: by default (``DEFAULT_SLICE_MS``, 0) its serving thread keeps the kernel's slice and
    the log says nothing of it; ``--cpu-slice-ms 3`` gives it 3 ms, and the start-up log says so."""
    needs_custom_slices()
    default = slice_ns()
    assert DEFAULT_SLICE_MS == 0
    for flags, want in (([], default), (["--cpu-slice-ms", "3"], 3_000_000)):
        port = free_port()
        command = [sys.executable, "-m", "app.cli", "scheduler", "--host", "127.0.0.1", "--port", str(port)]
        proc = subprocess.Popen(
            [*command, "--cluster", str(EXAMPLE_CLUSTER), *flags],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=subprocess.PIPE,
            text=True,
        )
        lines = []
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = proc.stderr.readline()
                lines.append(line)
                if not line or "Uvicorn running" in line:
                    break
            seen = slice_ns(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        log = "".join(lines)
        assert ("asked Linux for a 3 ms CPU slice for the serving thread" in log) == bool(flags), log
        assert seen == want, log
