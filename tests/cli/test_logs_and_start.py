"""One log format for every process (--log-level checked, --log-format text|json, -v N) and a scheduler
that fails fast on a taken port; the processes are real (subprocess) where it matters."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.api.logsetup import JSONFormatter, TextFormatter, configure_logging
from app.cli.main import cli
from tests.conftest import EXAMPLE_CLUSTER, free_port

ROOT = Path(__file__).resolve().parents[2]


def koord(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize("command", [["scheduler"], ["manager"], ["agent", "--node-name", "n1"]])
def test_log_level_is_checked(command: list[str]) -> None:
    r = CliRunner().invoke(cli, [*command, "--log-level", "verbose"])
    assert r.exit_code == 2
    assert "verbose" in r.output and all(level in r.output for level in ("debug", "info", "warning", "error"))
    assert "Traceback" not in r.output
    r = CliRunner().invoke(cli, [*command, "--log-format", "xml"])
    assert r.exit_code == 2 and "text" in r.output and "json" in r.output


def test_scheduler_fails_fast_when_its_port_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        proc = koord("scheduler", "--host", "127.0.0.1", "--port", str(port), "--cluster", str(EXAMPLE_CLUSTER))
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err
    assert "serving the embedded" not in err and "initial load" not in err  # nothing was loaded
    assert time.monotonic() - started < 30


def test_scheduler_logs_json_uvicorn_included() -> None:
    port = free_port()
    proc = koord(
        "scheduler", "--host", "127.0.0.1", "--port", str(port), "--cluster", str(EXAMPLE_CLUSTER),
        "--log-format", "json", "-v", "4",
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "Uvicorn running" in line or "Application startup complete" in line:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    entries = [json.loads(line) for line in lines]  # every line is JSON
    assert entries and all({"ts", "level", "logger", "msg"} <= set(e) for e in entries)
    loggers = {e["logger"] for e in entries}
    assert any(name.startswith("uvicorn") for name in loggers), loggers
    assert any(e["level"] == "debug" for e in entries)  # -v 4: routine events show
    assert any("permanent GC generation" in e["msg"] for e in entries)


def test_formats_carry_structured_fields(capsys: pytest.CaptureFixture[str]) -> None:
    record = logging.LogRecord("koord.test", logging.WARNING, __file__, 1, "hello %s", ("world",), None)
    record.node = "n1"
    entry = json.loads(JSONFormatter().format(record))
    assert entry["level"] == "warning" and entry["logger"] == "koord.test" and entry["msg"] == "hello world"
    assert entry["node"] == "n1" and entry["ts"].endswith("Z")
    assert TextFormatter().format(record).endswith("WARNING koord.test: hello world node=n1")
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        assert configure_logging("info", "text", verbosity=4) == logging.DEBUG
        assert configure_logging("warning", "json") == logging.WARNING
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
