"""uvicorn passes a ``color_message`` copy of its messages (with terminal colour escapes) as an extra field;
the plain-text and JSON logs leave it out and keep the real structured fields."""

from __future__ import annotations

import json
import logging

from app.api.logsetup import JSONFormatter, TextFormatter


def _record() -> logging.LogRecord:
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "Started server process [%d]", (42,), None)
    record.color_message = "Started server process [\x1b[36m%d\x1b[0m]"
    record.node = "n1"
    return record


def test_text_log_has_no_color_message() -> None:
    line = TextFormatter().format(_record())
    assert line.endswith("INFO uvicorn.error: Started server process [42] node=n1"), line
    assert "color_message" not in line and "\x1b[" not in line


def test_json_log_has_no_color_message() -> None:
    entry = json.loads(JSONFormatter().format(_record()))
    assert entry["msg"] == "Started server process [42]" and entry["node"] == "n1"
    assert "color_message" not in entry
