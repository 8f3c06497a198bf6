"""Keep-alive HTTP/1.1 clients of the in-process service over real TCP, answers parsed by httptools (llhttp,
the parser uvicorn itself runs on).

The client shares the interpreter (one core, one GIL) with the in-process server, so over ~30,000 verb
calls per run every microsecond of client CPU and every thread switch counts:

- :class:`AsyncPoster`: the verb loop's client, a coroutine on the server's own event loop: no thread
  switch and no GIL hand-over per call (a client thread cost two per call, ~0.1 ms each on the
  two-core machine). Each request goes out in one write.
- :class:`HttpPoster`: the same exchange from another thread over a blocking socket, under
  :class:`KeepAliveTransport` for the httpx client of everything else (start-up, inspection).

httpx's default transport (httpcore + h11) cost about 0.3 ms of CPU per request; ``http.client`` about
half that, mostly parsing the answer's headers through the ``email`` package, and it wrote the request
head and its body in two sends, each waking the server. Plain HTTP to one host only.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
from typing import cast

import httptools
import httpx

#: Bytes asked of each ``recv`` (a prioritize answer over a thousand nodes is ~40 KB).
RECV_BYTES = 1 << 16


class _Answer:
    """httptools callbacks collecting one answer: its headers, whether the connection stays open (llhttp
    knows it only until the message completes), its body chunks, whether it is complete."""

    __slots__ = ("body", "done", "headers", "keep_alive", "parser", "status")

    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []
        self.done = False
        self.keep_alive = False
        self.status = 0
        self.parser: httptools.HttpResponseParser | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        if self.parser is not None:
            self.keep_alive = self.parser.should_keep_alive()
            self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.done = True


class HttpPoster:
    """Requests over one persistent HTTP/1.1 connection to ``host:port``.

    The verb loop posts ~30,000 JSON bodies per run on the same core as the server, so the loop talks
    to a socket directly: each request (head and body) in one ``sendall``, the answer read by its
    ``Content-Length`` or chunked coding (httptools), and nothing else between. An answer that ends with
    the connection instead (neither length nor chunks) is not supported: uvicorn always sends one of
    the two.

    Args:
        host, port: the server.
        timeout: socket timeout in seconds.
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._heads: dict[str, bytes] = {}

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _exchange(self, request: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send ``request`` and read one answer; (status, headers, body). Closes the connection when the
        server asked to.

        Raises:
            OSError: the socket failed (``http.client.RemoteDisconnected``: closed before any answer).
            http.client.IncompleteRead: the connection closed in the middle of the answer.
            httptools.HttpParserError: the answer is not HTTP/1.x.
        """
        if self._sock is None:
            self._sock = self._connect()
        sock = self._sock
        sock.sendall(request)
        answer = _Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        received = 0
        try:
            while not answer.done:
                data = sock.recv(RECV_BYTES)
                if not data:
                    if received == 0:
                        raise http.client.RemoteDisconnected("Remote end closed connection without response")
                    raise http.client.IncompleteRead(b"".join(answer.body))
                received += len(data)
                parser.feed_data(data)
        finally:
            answer.parser = None  # no reference cycle: the answer is freed at once, not by the GC
        if not answer.keep_alive:
            self.close()
        return answer.status, answer.headers, b"".join(answer.body)

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """``method path`` with ``body`` and ``headers``; (HTTP status, answer headers, answer body).

        Reconnects once when the server closed the kept-alive connection.

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row or the answer is not HTTP/1.1.
        """
        head = _request_head(self.host, self.port, method, path, headers, None if body is None else len(body))
        return self._send(method, path, head + body if body else head)

    def _send(self, method: str, path: str, request: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        for attempt in (1, 2):
            try:
                return self._exchange(request)
            except ConnectionRefusedError as exc:
                self.close()
                raise httpx.ConnectError(str(exc)) from exc
            except (OSError, http.client.HTTPException, httptools.HttpParserError) as exc:
                self.close()
                if attempt == 2:
                    raise httpx.ReadError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        raise httpx.ReadError("unreachable")  # pragma: no cover

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``POST path`` with the JSON ``body``; (HTTP status, response body). Raises as :meth:`send`."""
        status, _, content = self._send("POST", path, _json_post(self._heads, self.host, self.port, path, body))
        return status, content

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


_JSON = {"Content-Type": "application/json"}


def _request_head(host: str, port: int, method: str, path: str, headers: dict[str, str], length: int | None) -> bytes:
    """The request line and headers (``Host`` and ``Content-Length`` added unless given), CRLF-ended."""
    names = {k.lower() for k in headers}
    lines = [f"{method} {path} HTTP/1.1"]
    if "host" not in names:
        lines.append(f"Host: {host}:{port}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if length is not None and "content-length" not in names:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _json_post(heads: dict[str, bytes], host: str, port: int, path: str, body: bytes) -> bytes:
    """The bytes of ``POST path`` with the JSON ``body`` to ``host:port``; the head without its length is
    built once per path and kept in ``heads``."""
    start = heads.get(path)
    if start is None:
        start = heads[path] = _request_head(host, port, "POST", path, _JSON, None)[:-2]  # without the blank line
    return b"%sContent-Length: %d\r\n\r\n%s" % (start, len(body), body)


class _Connection(asyncio.Protocol):
    """One connection of :class:`AsyncPoster`: one request at a time, its answer fed to httptools."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.answer: _Answer | None = None
        self.waiter: asyncio.Future[_Answer] | None = None
        self.received = 0
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def data_received(self, data: bytes) -> None:
        answer, waiter = self.answer, self.waiter
        if answer is None or waiter is None or answer.parser is None:
            return  # nothing asked: a stray byte after an answer is dropped with the connection later
        self.received += len(data)
        try:
            answer.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(exc)
            return
        if answer.done:
            self._finish(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.answer is not None:
            if self.received == 0:
                self._finish(http.client.RemoteDisconnected("Remote end closed connection without response"))
            else:
                self._finish(http.client.IncompleteRead(b"".join(self.answer.body)))

    def _finish(self, error: BaseException | None) -> None:
        answer, waiter = self.answer, self.waiter
        self.answer = self.waiter = None
        if answer is None or waiter is None:
            return
        answer.parser = None  # no reference cycle
        if waiter.done():
            return
        if error is None:
            waiter.set_result(answer)
        else:
            waiter.set_exception(error)

    async def exchange(self, request: bytes) -> _Answer:
        """Write ``request`` and wait for its whole answer.

        Raises:
            http.client.RemoteDisconnected / IncompleteRead: the connection closed before / during the answer.
            httptools.HttpParserError: the answer is not HTTP/1.x.
            ConnectionError: the connection is closed.
        """
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        answer = _Answer()
        answer.parser = httptools.HttpResponseParser(answer)
        self.answer, self.received = answer, 0
        waiter = self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await waiter


class AsyncPoster:
    """JSON POSTs over one persistent HTTP/1.1 connection, from a coroutine on the server's own event loop.

    The in-process server and a client thread share one GIL: every call hands it over twice (about
    0.1 ms each on the two-core machine), and every ``service.call`` into the loop once more. A
    client running as a coroutine on the server's loop talks to it over the same real TCP connection
    and HTTP/1.1 without a thread switch. Each request goes out in one write; the answer is parsed
    by httptools (Content-Length or chunked). One request at a time per poster; reconnects once when
    the server closed the kept-alive connection.

    Args:
        host, port: the server.
        timeout: seconds one request may take (connect, send and answer).
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._conn: _Connection | None = None
        self._heads: dict[str, bytes] = {}

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        transport, conn = await loop.create_connection(_Connection, self.host, self.port)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``POST path`` with the JSON ``body``; (HTTP status, response body).

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row, the answer is not HTTP/1.1, or it
                took longer than ``timeout``.
        """
        request = _json_post(self._heads, self.host, self.port, path, body)
        for attempt in (1, 2):
            try:
                async with asyncio.timeout(self.timeout):
                    if self._conn is None or self._conn.closed:
                        self._conn = await self._connect()
                    answer = await self._conn.exchange(request)
            except ConnectionRefusedError as exc:
                self.close()
                raise httpx.ConnectError(str(exc)) from exc
            except (OSError, http.client.HTTPException, httptools.HttpParserError, TimeoutError) as exc:
                self.close()
                if attempt == 2 or isinstance(exc, TimeoutError):
                    raise httpx.ReadError(f"POST {path}: {type(exc).__name__}: {exc}") from exc
                continue
            if not answer.keep_alive:
                self.close()
            return answer.status, b"".join(answer.body)
        raise httpx.ReadError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._conn is not None:
            if self._conn.transport is not None:
                self._conn.transport.close()
            self._conn = None


class KeepAliveTransport(httpx.BaseTransport):
    """An httpx transport sending every request over one :class:`HttpPoster` connection to ``host:port``.

    Args:
        host, port: the server.
        timeout: socket timeout in seconds.
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self._poster = HttpPoster(host, port, timeout)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and read the whole answer.

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row.
        """
        headers = {k.decode(): v.decode() for k, v in request.headers.raw if k.lower() != b"host"}
        try:
            status, answer_headers, content = self._poster.send(
                request.method, request.url.raw_path.decode(), request.read(), headers
            )
        except httpx.ConnectError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except httpx.ReadError as exc:
            raise httpx.ReadError(str(exc), request=request) from exc
        return httpx.Response(status, headers=answer_headers, content=content, request=request)

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        self._poster.close()
