"""Request building and answer decoding shared by :class:`~app.client.sync.Client` and
:class:`~app.client.aio.AsyncClient`: the two differ only in how they send.

Bodies are JSON encoded and decoded with :mod:`orjson`; objects stay plain dicts (no model
layer). A 2xx answer decodes to its JSON object; any other answer raises the typed error of
:mod:`app.client.errors` (k8s.io/client-go ``rest.Result.Error`` / apimachinery
``errors.FromObject``); a request that got no answer raises :class:`~app.client.errors.ConnectionFailed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from app.client.config import ConnectionSettings
from app.client.errors import ConnectionFailed, InvalidResponse, error_from_response

__all__ = [
    "CONNECT_TIMEOUT",
    "JSON",
    "JSON_PATCH",
    "MERGE_PATCH",
    "REQUEST_TIMEOUT",
    "WATCH_READ_SLACK",
    "Params",
    "build_request",
    "connection_failed",
    "decode_answer",
    "decode_object",
    "http_options",
]

#: Content types: plain JSON, RFC 7386 merge patch, RFC 6902 JSON patch.
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

#: Connect timeout (seconds) of every request.
CONNECT_TIMEOUT = 5.0
#: Read timeout (seconds) of every request except watches.
REQUEST_TIMEOUT = 60.0
#: Read timeout granted to a watch beyond its server-side ``timeoutSeconds`` (seconds).
WATCH_READ_SLACK = 30.0

USER_AGENT = "koordinator-py"

#: Query parameters: names to values, sent in order (``labelSelector``, ``fieldSelector``, ``limit``, ...).
Params = Mapping[str, str]


def http_options(settings: ConnectionSettings, max_connections: int, read_timeout: float) -> dict[str, Any]:
    """Keyword arguments of ``httpx.Client`` / ``httpx.AsyncClient`` for one connection pool of at most
    ``max_connections`` (all kept alive) to the server ``settings`` describe.

    Redirects are not followed and the environment (proxy variables, ``SSL_CERT_FILE``, netrc) is not
    read: the configuration alone decides, as with the ``kubernetes`` package's client.

    Raises:
        ValueError: ``max_connections`` is less than 1 or ``read_timeout`` is not positive.
    """
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, got {max_connections}")
    if not read_timeout > 0:
        raise ValueError(f"the read timeout must be positive, got {read_timeout}")
    return {
        "base_url": settings.base_url,
        "verify": settings.verify,
        "proxy": settings.proxy,
        "auth": settings.auth,
        "limits": httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        "timeout": httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT),
        "trust_env": False,
        "follow_redirects": False,
    }


def build_request(
    http: httpx.Client | httpx.AsyncClient,
    settings: ConnectionSettings,
    method: str,
    path: str,
    *,
    params: Params | None = None,
    body: Any = None,
    content_type: str = JSON,
    read_timeout: float = REQUEST_TIMEOUT,
) -> httpx.Request:
    """One request to ``path`` (absolute, e.g. ``/api/v1/nodes``, appended to the server URL's own path).

    ``body`` (any JSON-encodable value; None sends no body) is encoded with orjson and sent as
    ``content_type``. Every request accepts JSON; the ``Authorization`` header is added when it is
    sent (:class:`~app.client.config.ConfigurationAuth`).

    Raises:
        ValueError: ``path`` does not start with ``/``.
        TypeError: ``body`` is not JSON-encodable (orjson's ``JSONEncodeError``).
    """
    if not path.startswith("/"):
        raise ValueError(f"API path must be absolute, got {path!r}")
    headers = {"Accept": JSON, "User-Agent": USER_AGENT}
    content: bytes | None = None
    if body is not None:
        content = orjson.dumps(body)
        headers["Content-Type"] = content_type
    timeout = httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT)
    extensions = {"sni_hostname": settings.sni_hostname} if settings.sni_hostname else None
    return http.build_request(
        method,
        path,
        params=dict(params or {}),
        content=content,
        headers=headers,
        timeout=timeout,
        extensions=extensions,
    )


def decode_object(what: str, status: int, content: bytes | str) -> dict[str, Any]:
    """The JSON object ``content`` of a 2xx answer (``{}`` when empty); ``what`` names the call in errors.

    Raises:
        InvalidResponse: the content is not JSON, or not a JSON object.
    """
    if not content:
        return {}
    try:
        parsed = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise InvalidResponse(f"{what}: the answer is not JSON: {exc}", status) from None
    if not isinstance(parsed, dict):
        raise InvalidResponse(f"{what}: expected a JSON object, got {type(parsed).__name__}", status)
    return parsed


def decode_answer(request: httpx.Request, response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a 2xx ``response`` (its content must have been read).

    Raises:
        ApiError: the subclass of :mod:`app.client.errors` the answer's ``Status`` reason or HTTP
            code names (``NotFound``, ``Conflict``, ``TooManyRequests`` with ``retry_after``, ...).
        InvalidResponse: a 2xx answer that is not a JSON object.
    """
    status = response.status_code
    if 200 <= status < 300:
        return decode_object(f"{request.method} {request.url.path}", status, response.content)
    raise error_from_response(status, response.content, response.headers.get("Retry-After"))


def connection_failed(request: httpx.Request, exc: httpx.HTTPError) -> ConnectionFailed:
    """The :class:`ConnectionFailed` for a request that got no (complete) answer: refused, reset, DNS or
    TLS failure, timeout, or a broken stream. The message names the method, the path and the cause."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return ConnectionFailed(f"{request.method} {request.url.path}: {detail}", 0)
