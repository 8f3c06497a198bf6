"""The typed error tree of every Kubernetes API call (k8s.io/apimachinery/pkg/api/errors).

Callers catch the class they care about (``except NotFound``) instead of comparing status codes.
A non-2xx answer becomes the subclass named by its ``Status.reason`` when the body carries one
(``AlreadyExists`` and ``Conflict`` are both 409; ``Expired`` and ``Gone`` both 410), else the
subclass of its HTTP code, else :class:`ApiError` itself. A request that got no answer at all
(connection refused, TLS failure, timeout) is :class:`ConnectionFailed` with status 0.

The file source raises the same classes, so code written against the client works unchanged in
embedded mode.
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

import orjson

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "ConnectionFailed",
    "Expired",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "InvalidResponse",
    "MethodNotAllowed",
    "NotFound",
    "ServerTimeout",
    "ServiceUnavailable",
    "Timeout",
    "TooManyRequests",
    "Unauthorized",
    "error_from_response",
    "error_from_status",
    "status_message",
]


class ApiError(Exception):
    """A Kubernetes API call failed.

    Attributes:
        status: the HTTP status of the answer (0 when none came).
        reason: the ``Status.reason`` of the answer (``NotFound``, ``Conflict``, ...), or the class's
            default reason when the body carried none.
        message: the ``Status.message`` (what ``kubectl`` prints), or a short rendering of the body.
        retry_after: seconds from ``Retry-After`` or ``Status.details.retryAfterSeconds`` (429, 503), else None.
    """

    #: HTTP status this class stands for (0: any).
    code: ClassVar[int] = 0
    #: ``metav1.StatusReason`` this class stands for ("" for the base class).
    default_reason: ClassVar[str] = ""

    def __init__(self, message: str, status: int | None = None, reason: str = "", retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.status = self.code if status is None else status
        self.reason = reason or self.default_reason
        self.retry_after = retry_after


class ConnectionFailed(ApiError):
    """No answer: connection refused or reset, DNS or TLS failure, or a timeout (status 0)."""


class InvalidResponse(ApiError):
    """A 2xx answer, list or watch line whose body is not the JSON object the call expects.

    client-go reports these as decoding errors (and a watch decoder error as an ``InternalError`` event);
    here they stay in the tree so one ``except ApiError`` covers every failed call. ``status`` is the HTTP
    status of the answer that could not be decoded.
    """


class BadRequest(ApiError):
    """400 BadRequest: the request itself is malformed."""

    code, default_reason = 400, "BadRequest"


class Unauthorized(ApiError):
    """401 Unauthorized: no or invalid credentials."""

    code, default_reason = 401, "Unauthorized"


class Forbidden(ApiError):
    """403 Forbidden: RBAC does not allow the verb on the resource."""

    code, default_reason = 403, "Forbidden"


class NotFound(ApiError):
    """404 NotFound: the object or its collection (a CRD not installed) does not exist."""

    code, default_reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    """405 MethodNotAllowed: the resource does not support the verb (or the source does not write)."""

    code, default_reason = 405, "MethodNotAllowed"


class Conflict(ApiError):
    """409 Conflict: optimistic concurrency failed (stale resourceVersion, uid precondition)."""

    code, default_reason = 409, "Conflict"


class AlreadyExists(Conflict):
    """409 AlreadyExists: a create found the object there."""

    default_reason = "AlreadyExists"


class Gone(ApiError):
    """410 Gone: the resourceVersion of a watch or a continue token is too old; relist."""

    code, default_reason = 410, "Gone"


class Expired(Gone):
    """410 Expired: a continue token expired."""

    default_reason = "Expired"


class Invalid(ApiError):
    """422 Invalid: the object fails validation."""

    code, default_reason = 422, "Invalid"


class TooManyRequests(ApiError):
    """429 TooManyRequests: rate limited, or an eviction a PodDisruptionBudget blocks; retry later."""

    code, default_reason = 429, "TooManyRequests"


class InternalError(ApiError):
    """500 InternalError: the server failed."""

    code, default_reason = 500, "InternalError"


class ServerTimeout(ApiError):
    """500 ServerTimeout: the server could not finish in time; the request may be retried."""

    code, default_reason = 500, "ServerTimeout"


class ServiceUnavailable(ApiError):
    """503 ServiceUnavailable: the server (or an aggregated API) is not available now."""

    code, default_reason = 503, "ServiceUnavailable"


class Timeout(ApiError):
    """504 Timeout: the request did not finish in time (the operation may still complete)."""

    code, default_reason = 504, "Timeout"


_BY_REASON: dict[str, type[ApiError]] = {
    cls.default_reason: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        Conflict,
        AlreadyExists,
        Gone,
        Expired,
        Invalid,
        TooManyRequests,
        InternalError,
        ServerTimeout,
        ServiceUnavailable,
        Timeout,
    )
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: Timeout,
}


def _status_body(body: bytes | dict[str, Any] | None) -> dict[str, Any] | None:
    if isinstance(body, dict):
        return body
    if not body:
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def status_message(status: int, body: bytes | dict[str, Any] | None) -> str:
    """The ``message`` of a ``Status`` body, else the first 200 characters of the body, else ``HTTP <status>``."""
    parsed = _status_body(body)
    if parsed is not None and parsed.get("message"):
        return str(parsed["message"])
    if isinstance(body, bytes | bytearray) and body:
        text = bytes(body[:200]).decode("utf-8", "replace").strip()
        if text:
            return text
    return f"HTTP {status}"


def error_from_response(
    status: int, body: bytes | dict[str, Any] | None, retry_after_header: str | None = None
) -> ApiError:
    """The typed error for a non-2xx answer (``status`` and its body, raw or decoded).

    The ``Status.reason`` picks the class when it is a known reason, else the HTTP code; anything
    else is a plain :class:`ApiError` carrying the status. Never raises.
    """
    parsed = _status_body(body)
    reason = str(parsed.get("reason") or "") if parsed is not None else ""
    retry: float | None = None
    details = parsed.get("details") if parsed is not None else None
    if isinstance(details, dict) and isinstance(details.get("retryAfterSeconds"), int):
        retry = float(details["retryAfterSeconds"])
    if retry_after_header:
        with contextlib.suppress(ValueError):
            retry = float(retry_after_header)
    cls = _BY_REASON.get(reason)
    if cls is None or (cls.code and cls.code != status and status):
        cls = _BY_CODE.get(status, ApiError)
    return cls(status_message(status, body), status, reason, retry)


def error_from_status(status: dict[str, Any]) -> ApiError:
    """The typed error for a ``Status`` object carried in a body or in a watch ``ERROR`` event.

    Its ``code`` is the HTTP status (0 when absent), its ``reason`` picks the class as in
    :func:`error_from_response` (k8s.io/apimachinery ``errors.FromObject``). Never raises.
    """
    code = status.get("code")
    return error_from_response(code if isinstance(code, int) else 0, status)
