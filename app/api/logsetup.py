"""One log format for every ``koord`` process (service, agent, manager), uvicorn's loggers included.

- ``--log-level debug|info|warning|error`` (checked: anything else exits 2 listing these);
- ``-v N``: klog's verbosity; ``-v 4`` and more log DEBUG whatever ``--log-level`` says, as klog's
  ``V(4)`` is its debug level (routine events, e.g. GC freeze counts and certificate reloads, are
  logged at DEBUG);
- ``--log-format text``: ``2025-01-02T03:04:05.678Z INFO app.server.app: message key=value``;
  ``--log-format json``: one object per line with ``ts`` (RFC 3339, UTC), ``level``, ``logger``,
  ``msg``, the structured fields passed as ``extra={...}`` and ``exc`` for a traceback.

Here (not in ``app.cli``) because the agent, which may import ``app.api`` only, configures its
logging the same way.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from enum import StrEnum
from typing import Any


class LogLevel(StrEnum):
    """``--log-level`` values (Python's level names in lower case)."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class LogFormat(StrEnum):
    """``--log-format`` values."""

    text = "text"
    json = "json"


#: ``-v`` at or above which DEBUG is logged (klog's V(4): debug-level verbosity).
DEBUG_VERBOSITY = 4

#: LogRecord attributes that are not structured fields given through ``extra=``; ``color_message`` is
#: uvicorn's copy of its message with terminal colour escapes, which no log file wants.
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of ``record`` (what the caller passed as ``extra``)."""
    return {k: v for k, v in record.__dict__.items() if k not in _RESERVED and not k.startswith("_")}


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 in UTC with milliseconds: ``2025-01-02T03:04:05.678Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


class TextFormatter(logging.Formatter):
    """``TS LEVEL logger: msg key=value ...`` (structured fields appended as ``key=value``)."""

    def format(self, record: logging.LogRecord) -> str:
        """One line (plus the traceback, if any)."""
        fields = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if fields:
            line += " " + fields
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``msg``, structured fields, ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (values JSON cannot carry are written as their ``str``)."""
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _fields(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class StderrHandler(logging.StreamHandler):
    """A stream handler writing to whatever ``sys.stderr`` is at the time of each record (as logging's own
    last-resort handler), so a replaced stderr (tests, daemons) is followed, never a closed one kept."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        """The current ``sys.stderr``."""
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(
    level: LogLevel | str = LogLevel.info, fmt: LogFormat | str = LogFormat.text, verbosity: int = 0
) -> int:
    """Send every logger (uvicorn's too) to stderr in one format; returns the effective level. Handlers others
    installed on the root logger (e.g. pytest's capture) are kept; calling again replaces this one's.

    Args:
        level: ``--log-level``.
        fmt: ``--log-format``.
        verbosity: klog's ``-v``; :data:`DEBUG_VERBOSITY` or more means DEBUG.

    Raises:
        ValueError: an unknown level or format (the CLI's choices normally catch these first).
    """
    effective = logging.DEBUG if verbosity >= DEBUG_VERBOSITY else logging.getLevelName(LogLevel(level).upper())
    handler = StderrHandler()
    handler.setFormatter(JSONFormatter() if LogFormat(fmt) is LogFormat.json else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:  # ours from an earlier call only
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(effective)
    for name in ("httpx", "httpcore"):  # a line per API request: routine, shown from DEBUG on
        logging.getLogger(name).setLevel(logging.NOTSET if effective <= logging.DEBUG else logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # uvicorn's own handlers would print its format
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    return int(effective)
