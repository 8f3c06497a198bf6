"""The request body limit: bodies over ``max_request_body_bytes`` are answered HTTP 413 with
``{"message": ...}`` naming the limit and the flag that sets it.

Counting the bytes is starlette's :class:`RequestBodyLimitMiddleware` (it refuses an announced
Content-Length over the limit and stops a chunked body as soon as the bytes read pass it, before
the rest is buffered). Two things are ours: an announced oversize body is answered here, before
the route runs (starlette would replace any answer with a plain-text one), and the 413 raised
while a route reads a streamed body is answered in the same JSON shape as every other error.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson
from fastapi import FastAPI, Request, Response
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.wire import error_response


def too_large_message(limit: int) -> str:
    """The 413 message: ``request body exceeds the limit of <limit> bytes (--max-request-body-bytes)``."""
    return f"request body exceeds the limit of {limit} bytes (--max-request-body-bytes)"


def too_large_body(limit: int) -> bytes:
    """The 413 answer's JSON body: ``{"message": too_large_message(limit)}``, as :func:`error_response` encodes it."""
    return orjson.dumps({"message": too_large_message(limit)})


def announced_over(headers: Iterable[tuple[bytes, bytes]], limit: int) -> bool:
    """Whether the request's ``Content-Length`` (in ASGI's raw headers, names lower-case) announces more than
    ``limit`` bytes; False when none is announced (a chunked body is counted as it is read)."""
    return any(name == b"content-length" and value.isdigit() and int(value) > limit for name, value in headers)


class BodyLimitMiddleware:
    """ASGI middleware refusing request bodies over ``max_body_size`` bytes with a JSON 413.

    Args:
        app: the wrapped application.
        max_body_size: the limit in bytes (> 0).
    """

    def __init__(self, app: ASGIApp, max_body_size: int) -> None:
        self.max_body_size = max_body_size
        self.app = RequestBodyLimitMiddleware(app, max_body_size=max_body_size)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 413 at once for an announced oversize body; otherwise count the bytes as they are read."""
        if scope["type"] == "http" and announced_over(scope["headers"], self.max_body_size):
            await error_response(too_large_message(self.max_body_size), 413)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def install_body_limit(app: FastAPI, max_body_size: int) -> None:
    """Limit every route of ``app`` (routers, webhooks and plugin routes alike) to ``max_body_size`` bytes.

    Raises:
        ValueError: ``max_body_size`` is not positive.
    """
    if max_body_size <= 0:
        raise ValueError(f"max_body_size must be positive, got {max_body_size}")
    app.add_middleware(BodyLimitMiddleware, max_body_size=max_body_size)

    @app.exception_handler(413)
    async def _too_large(_: Request, __: Exception) -> Response:
        return error_response(too_large_message(max_body_size), 413)
