"""One-shot HTTP/1.1 requests over kept-alive connections, answers parsed by httptools: the lane's Binding POST.

A bind is one small POST per scheduled pod. Through aiohttp it cost 0.58-0.64 ms of CPU per request on the rig's
API server; written on an asyncio protocol whose answers httptools parses (the C parser, llhttp, that uvicorn
serves the verbs with), the same TLS, the same request, 0.19-0.22 ms (``docs/performance.md``, round 21). The
watch streams stay on aiohttp (:class:`app.client.lane.Stream`).

What it does, and no more: a request is written whole (head and body in one write), its answer read whole
(``Content-Length`` or chunked, as httptools decodes them); a connection carries one request at a time and goes
back to the pool when the answer allows it (HTTP/1.1 keep-alive, no ``Connection: close``), at most ``max_idle``
kept. Nothing is retried: a Binding is sent once. A connection whose request failed, timed out or was
cancelled is closed, never reused. No proxies, no redirects, no compression, no 1xx answers (none are asked for).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import cast

import httptools

__all__ = ["AnswerCutShort", "KeptAlive", "RawAnswer"]

#: One answer: (HTTP status, headers with lower-case names, body).
RawAnswer = tuple[int, dict[str, str], bytes]


class AnswerCutShort(ConnectionError):
    """The server closed the connection before the answer was complete."""


class _Connection(asyncio.Protocol):
    """One connection; at most one request in flight (:attr:`waiting`)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiting: asyncio.Future[RawAnswer] | None = None
        self.reusable = False
        self.lost = False
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's or uvloop's (whose TLS transport is no asyncio.Transport subclass): both write and close
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.reusable = False
        self._fail(exc or AnswerCutShort("the server closed the connection before the answer was complete"))

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        answer = (self.parser.get_status_code(), self._headers, b"".join(self._body))
        self.reusable = self.parser.should_keep_alive()
        self._headers, self._body = {}, []
        waiting, self.waiting = self.waiting, None
        if waiting is not None and not waiting.done():
            waiting.set_result(answer)
        else:  # an answer nobody asked for: the connection is out of step
            self.reusable = False
            self.close()

    # -- helpers
    def _fail(self, exc: BaseException) -> None:
        waiting, self.waiting = self.waiting, None
        if waiting is not None and not waiting.done():
            waiting.set_exception(exc)

    def usable(self) -> bool:
        return self.reusable and not self.lost and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.close()


class KeptAlive:
    """HTTP/1.1 requests to one server over kept-alive connections (see the module docstring).

    Args:
        host, port: the server's address.
        ssl_context: TLS (certificate checks, client certificate), or None for plain HTTP.
        server_hostname: the TLS server name to send and check (None: ``host``); ignored without TLS.
        max_idle: connections kept open between requests; a request finding none idle opens one.
    """

    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        *,
        max_idle: int = 8,
    ) -> None:
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self.server_hostname = (server_hostname or host) if ssl_context is not None else None
        self.max_idle = max_idle
        self._idle: deque[_Connection] = deque()
        self._open: set[_Connection] = set()
        self._closed = False

    async def _connect(self, connect_timeout: float) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(connect_timeout):
            _, conn = await loop.create_connection(
                _Connection, self.host, self.port, ssl=self.ssl_context, server_hostname=self.server_hostname
            )
        return conn

    async def request(self, data: bytes, *, connect_timeout: float) -> RawAnswer:
        """Write ``data`` (a whole request: head and body) and return its answer.

        The caller bounds the whole exchange (``asyncio.timeout``); on a timeout or a cancellation the connection is
        closed. ``connect_timeout`` bounds opening a new connection (TCP and TLS).

        Raises:
            OSError: the connection could not be opened (refused, unreachable; :class:`ssl.SSLError` for TLS, a
                certificate refused included) or broke (:class:`AnswerCutShort`: closed before the answer was whole).
            httptools.HttpParserError: the answer is not HTTP/1.x.
            TimeoutError: opening a connection took longer than ``connect_timeout``.
            ConnectionError: the pool is closed.
        """
        if self._closed:
            raise ConnectionError("the client is closed")
        conn = None
        while self._idle:
            candidate = self._idle.pop()
            if candidate.usable():
                conn = candidate
                break
            self._open.discard(candidate)
            candidate.close()
        if conn is None:
            conn = await self._connect(connect_timeout)
            self._open.add(conn)
        assert conn.transport is not None
        waiting: asyncio.Future[RawAnswer] = asyncio.get_running_loop().create_future()
        conn.waiting = waiting
        conn.reusable = False
        try:
            conn.transport.write(data)
            answer = await waiting
        except BaseException:  # failed, timed out or cancelled: the connection's state is unknown
            conn.waiting = None
            self._open.discard(conn)
            conn.close()
            raise
        if conn.usable() and len(self._idle) < self.max_idle and not self._closed:
            self._idle.append(conn)
        else:
            self._open.discard(conn)
            conn.close()
        return answer

    def close(self) -> None:
        """Close every connection; requests after this fail. Safe to call twice."""
        self._closed = True
        self._idle.clear()
        for conn in self._open:
            conn.close()
        self._open.clear()
