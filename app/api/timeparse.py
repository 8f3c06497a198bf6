"""RFC 3339 timestamps as Kubernetes writes them (``metav1.Time``), to and from epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any


def parse_time(value: Any) -> float:
    """Parse ``2026-11-22T09:47:27Z`` (fractions and offsets allowed) into epoch seconds.

    Strings are remembered (the last 65,536): a pod's condition times come back unchanged in each of
    its watch events, and parsing one costs a few microseconds.

    Raises:
        ValueError: not a string in RFC 3339 form.
    """
    if not isinstance(value, str):
        raise ValueError(f"invalid time {value!r}: expected an RFC 3339 string")
    return _parse_string(value)


@lru_cache(maxsize=65536)
def _parse_string(value: str) -> float:
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"invalid time {value!r}: expected RFC 3339, e.g. 2026-01-02T15:04:05Z") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def format_time(epoch: float) -> str:
    """Format epoch seconds as ``metav1.Time`` does: RFC 3339 in UTC with second precision."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
