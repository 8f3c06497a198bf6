"""Go duration strings; the parser lives in :mod:`app.api.duration` so the node-side daemons (which may
import only :mod:`app.api` and :mod:`app.client`) share it. Re-exported here for the framework's callers."""

from __future__ import annotations

from app.api.duration import format_duration, parse_duration

__all__ = ["format_duration", "parse_duration"]
