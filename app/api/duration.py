"""Go duration strings (``"5m"``, ``"1h30m"``, ``"300ms"``) as metav1.Duration accepts them (shared by the
scheduler framework, the descheduler and the node daemons)."""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(value: object) -> float:
    """Parse a Go duration string into seconds (``"1m30s"`` -> 90.0; ``"0"`` -> 0.0).

    Raises:
        ValueError: not a Go duration (the message quotes the value).
    """
    if not isinstance(value, str):
        raise ValueError(f'invalid duration {value!r}: expected a string such as "5m"')
    text = value.strip()
    sign = 1.0
    if text[:1] in "+-" and text:
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        m = _PART.match(text, pos)
        if m is None:
            raise ValueError(f'invalid duration {value!r}: expected a string such as "5m" or "1h30m"')
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError(f"invalid duration {value!r}")
    return sign * total


def _frac(value: int, unit: int) -> str:
    """``value / unit`` printed as Go's ``fmtFrac``: the integer part, then the fraction without trailing zeros."""
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def format_duration(seconds: float) -> str:
    """Format seconds exactly as Go's ``time.Duration.String`` (nanosecond precision).

    ``300`` -> ``"5m0s"``, ``3600`` -> ``"1h0m0s"``, ``1.5`` -> ``"1.5s"``, ``0.25`` -> ``"250ms"``,
    ``0`` -> ``"0s"``; negative durations get a leading ``-``.
    """
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1_000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_frac(u, 1_000)}µs"
    if u < 1_000_000_000:
        return f"{sign}{_frac(u, 1_000_000)}ms"
    minutes, sec_ns = divmod(u, 60_000_000_000)
    out = f"{_frac(sec_ns, 1_000_000_000)}s"
    if minutes:
        hours, minutes = divmod(minutes, 60)
        out = f"{minutes}m{out}"
        if hours:
            out = f"{hours}h{out}"
    return sign + out
