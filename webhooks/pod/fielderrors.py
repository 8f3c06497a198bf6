"""Validation errors worded as ``k8s.io/apimachinery/pkg/util/validation/field`` words them.

``FieldError.__str__`` gives ``<path>: <type>[: <value>]: <detail>``; :func:`aggregate` joins
several like ``utilerrors.NewAggregate(...).Error()`` (one message as is, several as
``[a, b]`` with duplicates dropped). Upstream's pod webhook answers these strings verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One ``field.Error``.

    Attributes:
        path: field path (``labels.koordinator.sh/qosClass``).
        type: ``Required value``, ``Invalid value`` or ``Forbidden``.
        detail: explanation.
        value: the bad value for ``Invalid value`` (rendered quoted, as Go's ``%q``), else None.
    """

    path: str
    type: str
    detail: str
    value: str | None = None

    def __str__(self) -> str:
        body = self.type
        if self.type == INVALID:
            body += f": {_go_quote(self.value or '')}"
        return f"{self.path}: {body}: {self.detail}" if self.detail else f"{self.path}: {body}"


REQUIRED = "Required value"
INVALID = "Invalid value"
FORBIDDEN = "Forbidden"


def _go_quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def required(path: str, detail: str) -> FieldError:
    """``field.Required``."""
    return FieldError(path, REQUIRED, detail)


def invalid(path: str, value: str, detail: str) -> FieldError:
    """``field.Invalid`` with a string value."""
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
