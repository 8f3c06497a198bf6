"""Validation errors worded as ``k8s.io/apimachinery/pkg/util/validation/field`` words them.

``FieldError.__str__`` gives ``<path>: <type>[: <value>]: <detail>``; :func:`aggregate` joins
several like ``utilerrors.NewAggregate(...).Error()`` (one message as is, several as
``[a, b]`` with duplicates dropped). Upstream's pod webhook answers these strings verbatim; the
typed admission edge (:mod:`webhooks.shapes`) words wrong JSON types the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

#: Longest rendering of a non-string bad value (a whole object or list) before it is cut with ``...``.
MAX_VALUE_CHARS = 200


@dataclass(frozen=True, slots=True)
class FieldError:
    """One ``field.Error``.

    Attributes:
        path: field path (``labels.koordinator.sh/qosClass``).
        type: ``Required value``, ``Invalid value`` or ``Forbidden``.
        detail: explanation.
        value: the bad value for ``Invalid value``, rendered as ``field.Error.ErrorBody`` renders it
            (:func:`render_value`: a string quoted as Go's ``%q``, a number or boolean as is, null as
            ``null``, an object or list as compact JSON).
    """

    path: str
    type: str
    detail: str
    value: Any = None

    def __str__(self) -> str:
        body = self.type
        if self.type == INVALID:
            body += f": {render_value(self.value)}"
        return f"{self.path}: {body}: {self.detail}" if self.detail else f"{self.path}: {body}"


REQUIRED = "Required value"
INVALID = "Invalid value"
FORBIDDEN = "Forbidden"


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_quote(value: str) -> str:
    """Go's ``strconv.Quote``: backslash and quote escaped, control and unprintable runes as ``\\xNN`` /
    ``\\uNNNN`` / ``\\UNNNNNNNN``, printable Unicode kept."""
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def render_value(value: Any) -> str:
    """A bad value as ``field.Error`` prints it: ``"x"`` for a string (Go ``%q``), ``5`` / ``1.5`` /
    ``true`` for a number or boolean, ``null`` for None, compact JSON for an object or list. A string
    or JSON longer than :data:`MAX_VALUE_CHARS` characters is cut there and ends with ``...``."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _go_quote(value) if len(value) <= MAX_VALUE_CHARS else _go_quote(value[:MAX_VALUE_CHARS]) + "..."
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):  # orjson refuses values nested over 254 levels
        text = _shallow_repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "..."


def _shallow_repr(value: Any) -> str:
    """``repr(value)``, or the type's name when the value nests too deep for ``repr`` (RecursionError)."""
    try:
        return repr(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deep to print>"


def required(path: str, detail: str) -> FieldError:
    """``field.Required``."""
    return FieldError(path, REQUIRED, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """``field.Invalid``: ``value`` is rendered by :func:`render_value`."""
    return FieldError(path, INVALID, detail, value)


def forbidden(path: str, detail: str) -> FieldError:
    """``field.Forbidden``."""
    return FieldError(path, FORBIDDEN, detail)


def immutable(path: str, new: str, old: str) -> list[FieldError]:
    """``validation.ValidateImmutableField``: an error when ``new != old``."""
    return [] if new == old else [invalid(path, new, "field is immutable")]


def aggregate(errors: list[FieldError]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: "" for none, the message for one, ``[a, b]`` otherwise."""
    messages = list(dict.fromkeys(str(e) for e in errors))
    if not messages:
        return ""
    if len(errors) == 1 or len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"
