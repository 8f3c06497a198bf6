"""Go duration strings (``"5m"``, ``"1h30m"``, ``"300ms"``) as metav1.Duration accepts them."""

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
