"""A lean HTTP/1.1 client for the small JSON writes on the scheduling path (the pod Binding).

httpx (with httpcore and h11 under it) costs about a millisecond of CPU per request in this
service; a bind is one small POST and one small answer, sent once per scheduled pod, so that cost
was most of a pod's scheduling cost (issue 13). :class:`H1Pool` sends such a request on a kept-alive
asyncio stream connection (TLS through the same :class:`ssl.SSLContext` as httpx) with the same
headers and credentials (:class:`~app.client.config.ConfigurationAuth` is asked per request, so
rotated tokens are picked up exactly as before). Answers are read with ``Content-Length``, chunked
transfer coding, or until the server closes.

Nothing is retried: a request on a kept-alive connection that the server closed meanwhile fails
with :class:`~app.client.errors.ConnectionFailed` like any other lost answer (a Binding must not be
sent twice), but a connection the server already closed is noticed and dropped before it is used.
A request that is cancelled closes its connection. Not for proxies (the caller uses httpx when the
configuration names one).

Follows Go's net/http ``Transport`` as client-go uses it: idle connections per host, reused in LIFO
order, at most ``max_idle`` kept.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from app.client.config import ConnectionSettings
from app.client.errors import ConnectionFailed
from app.client.wire import CONNECT_TIMEOUT, JSON, USER_AGENT

__all__ = ["H1Answer", "H1Pool", "H1Stream", "read_body", "read_head"]

#: Largest answer head (status line and headers) accepted, bytes.
MAX_HEAD_BYTES = 64 * 1024


class H1Answer:
    """One answer: ``status`` (HTTP code), ``headers`` (lower-case names), ``content`` (the body, bytes)."""

    __slots__ = ("content", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], content: bytes) -> None:
        self.status = status
        self.headers = headers
        self.content = content


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class H1Pool:
    """Kept-alive HTTP/1.1 connections to the API server of ``settings``.

    Args:
        settings: server URL, TLS context, TLS server name and credentials
            (:func:`app.client.config.connection_settings`); ``settings.proxy`` must be None.
        max_idle: idle connections kept for reuse; more concurrent requests open more connections.

    Raises:
        ValueError: ``settings`` names a proxy.
    """

    def __init__(self, settings: ConnectionSettings, *, max_idle: int = 8) -> None:
        if settings.proxy:
            raise ValueError("H1Pool does not speak to proxies")
        url = urlsplit(settings.base_url)
        self.settings = settings
        self.tls = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        default_port = self.port == (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default_port else f"{host}:{self.port}"
        self.max_idle = max_idle
        self._idle: list[_Conn] = []
        self._closed = False

    async def _connect(self) -> _Conn:
        ctx: ssl.SSLContext | None = None
        if self.tls:
            verify = self.settings.verify
            ctx = verify if isinstance(verify, ssl.SSLContext) else ssl.create_default_context()
        server_hostname = (self.settings.sni_hostname or self.host) if ctx is not None else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                self.host, self.port, ssl=ctx, server_hostname=server_hostname, limit=MAX_HEAD_BYTES
            ),
            CONNECT_TIMEOUT,
        )
        return _Conn(reader, writer)

    def _take(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    def _give_back(self, conn: _Conn) -> None:
        if self._closed or len(self._idle) >= self.max_idle or not conn.usable():
            conn.close()
        else:
            self._idle.append(conn)

    async def request(
        self, method: str, path: str, body: bytes | None, *, content_type: str = JSON, timeout: float = 60.0
    ) -> H1Answer:
        """Send ``method path`` with ``body`` and return the whole answer (any status).

        Args:
            method: ``POST``, ``PUT``, ``PATCH``, ``GET`` or ``DELETE``.
            path: absolute API path, query string included if any.
            body: request body (sent with ``content_type`` and ``Content-Length``), or None.
            timeout: seconds for connecting, sending and reading the whole answer.

        Raises:
            ConnectionFailed: no complete answer (refused, reset, TLS failure, timeout, a malformed
                answer); the message names the method, the path and the cause.
        """
        if self._closed:
            raise ConnectionFailed(f"{method} {path}: the client is closed", 0)
        head = [
            f"{method} {self.prefix}{path} HTTP/1.1",
            f"Host: {self.host_header}",
            f"Accept: {JSON}",
            f"User-Agent: {USER_AGENT}",
        ]
        auth = self.settings.auth.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if auth:
            head.append(f"Authorization: {auth}")
        if body is not None:
            head.append(f"Content-Type: {content_type}")
            head.append(f"Content-Length: {len(body)}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
        conn: _Conn | None = None
        done = False
        try:
            async with asyncio.timeout(timeout):
                conn = self._take() or await self._connect()
                conn.writer.write(data)
                answer, keep = await self._read(conn.reader, method)
            done = keep
            return answer
        except TimeoutError as exc:  # before OSError: TimeoutError is one
            raise ConnectionFailed(f"{method} {path}: timed out after {timeout:g} s", 0) from exc
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise ConnectionFailed(f"{method} {path}: {type(exc).__name__}: {exc}", 0) from exc
        finally:
            if conn is not None:
                if done:
                    self._give_back(conn)
                else:
                    conn.close()

    @staticmethod
    async def _read(reader: asyncio.StreamReader, method: str) -> tuple[H1Answer, bool]:
        """Read one answer; also whether the connection may be reused.

        Raises:
            ValueError: a malformed status line, header or chunk size.
            asyncio.IncompleteReadError: the server closed before the answer was complete.
        """
        status, headers, keep = await read_head(reader)
        if method == "HEAD" or status in (204, 304):
            return H1Answer(status, headers, b""), keep
        body = b"".join([piece async for piece in read_body(reader, headers, None)])
        return H1Answer(status, headers, body), keep and _delimited(headers)

    async def open_stream(self, method: str, path: str, *, timeout: float) -> H1Stream:
        """Send ``method path`` (no body) on a new connection of its own and read the answer's head.

        For long answers read as they arrive (watches): the connection is never pooled, and
        :meth:`H1Stream.close` closes it. ``timeout`` bounds connecting and reading the head, and
        then each read of the body.

        Raises:
            ConnectionFailed: no answer head (refused, reset, TLS failure, timeout, malformed).
        """
        head = [
            f"{method} {self.prefix}{path} HTTP/1.1",
            f"Host: {self.host_header}",
            f"Accept: {JSON}",
            f"User-Agent: {USER_AGENT}",
        ]
        auth = self.settings.auth.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if auth:
            head.append(f"Authorization: {auth}")
        what = f"{method} {path.partition('?')[0]}"
        conn: _Conn | None = None
        try:
            async with asyncio.timeout(timeout):
                conn = await self._connect()
                conn.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                status, headers, _ = await read_head(conn.reader)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, TimeoutError):
                raise ConnectionFailed(f"{what}: timed out after {timeout:g} s", 0) from exc
            if isinstance(exc, (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)):
                raise ConnectionFailed(f"{what}: {type(exc).__name__}: {exc}", 0) from exc
            raise
        return H1Stream(conn, status, headers, timeout, what)

    async def aclose(self) -> None:
        """Close the idle connections; requests after this fail. Safe to call twice."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bool]:
    """Read an answer's status line and headers (skipping 1xx answers): (status, headers with
    lower-case names, whether HTTP/1.1 keep-alive allows reusing the connection).

    Raises:
        ValueError: a malformed status line or header.
        asyncio.IncompleteReadError: the server closed first.
        asyncio.LimitOverrunError: the head is longer than :data:`MAX_HEAD_BYTES`.
    """
    while True:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw[:-4].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(rest[:3])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"malformed header line {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        if not 100 <= status < 200 or status == 101:
            keep = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
            return status, headers, keep


def _delimited(headers: dict[str, str]) -> bool:
    """Whether the body's end is known without the server closing (chunked or Content-Length)."""
    return "chunked" in headers.get("transfer-encoding", "").lower() or "content-length" in headers


async def read_body(
    reader: asyncio.StreamReader, headers: dict[str, str], timeout: float | None
) -> AsyncIterator[bytes]:
    """The body's pieces as they arrive: chunked transfer coding decoded, else ``Content-Length``
    bytes, else everything until the server closes. ``timeout`` (seconds) bounds each read.

    Raises:
        ValueError: a malformed chunk size.
        asyncio.IncompleteReadError: the server closed before the body's end.
        TimeoutError: one read took longer than ``timeout``.
    """
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            async with asyncio.timeout(timeout):
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                        pass
                    return
                piece = await reader.readexactly(size + 2)
            yield piece[:-2]
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            async with asyncio.timeout(timeout):
                piece = await reader.read(min(left, 1 << 20))
            if not piece:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(piece)
            yield piece
    else:
        while True:
            async with asyncio.timeout(timeout):
                piece = await reader.read(1 << 20)
            if not piece:
                return
            yield piece


class H1Stream:
    """An answer read as it arrives, on a connection of its own (:meth:`H1Pool.open_stream`).

    Attributes:
        status: the HTTP status.
        headers: the answer's headers, lower-case names.
    """

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str], timeout: float, what: str) -> None:
        self._conn = conn
        self.status = status
        self.headers = headers
        self._timeout = timeout
        self._what = what

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive (see :func:`read_body`).

        Raises:
            ConnectionFailed: the stream broke (closed before its end, malformed) or one read stalled
                past the timeout; the message names the method and path.
        """
        try:
            async for piece in read_body(self._conn.reader, self.headers, self._timeout):
                yield piece
        except TimeoutError as exc:
            raise ConnectionFailed(f"{self._what}: no data for {self._timeout:g} s", 0) from exc
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise ConnectionFailed(f"{self._what}: {type(exc).__name__}: {exc}", 0) from exc

    async def read_all(self) -> bytes:
        """The whole body.

        Raises:
            ConnectionFailed: as :meth:`pieces`.
        """
        return b"".join([piece async for piece in self.pieces()])

    def close(self) -> None:
        """Close the connection (the server sees the client hang up). Safe to call twice."""
        self._conn.close()
