"""Keep-alive HTTP/1.1 clients of the in-process service: a socket of the standard library, answers
parsed by httptools (llhttp, the parser uvicorn itself runs on).

The client shares the interpreter (one core, one GIL) with the in-process server, so over ~30,000 verb
calls per run every microsecond of client CPU and every extra wake-up of the server counts. httpx's
default transport (httpcore + h11) cost about 0.3 ms of CPU per request; ``http.client`` about half
that, mostly parsing the answer's headers through the ``email`` package, and it writes the request
head and its body in two ``send`` calls, each waking the server's event loop.
:class:`HttpPoster` writes each request in one ``sendall`` over one persistent connection (reconnecting
once if the server closed it) and feeds the answer to ``httptools.HttpResponseParser`` (Content-Length
or chunked); the verb loop posts through it directly, and :class:`KeepAliveTransport` puts it under an
httpx client for everything else. Plain HTTP to one host only.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import httptools
import httpx

#: Bytes asked of each ``recv`` (a prioritize answer over a thousand nodes is ~40 KB).
RECV_BYTES = 1 << 16


class _Answer:
    """httptools callbacks collecting one answer: its headers, whether the connection stays open (llhttp
    knows it only until the message completes), its body chunks, whether it is complete."""

    __slots__ = ("body", "done", "headers", "keep_alive", "parser")

    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []
        self.done = False
        self.keep_alive = False
        self.parser: httptools.HttpResponseParser | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        if self.parser is not None:
            self.keep_alive = self.parser.should_keep_alive()

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

    def _head(self, method: str, path: str, headers: dict[str, str], length: int | None) -> bytes:
        """The request line and headers (``Host`` and ``Content-Length`` added unless given), CRLF-ended."""
        names = {k.lower() for k in headers}
        lines = [f"{method} {path} HTTP/1.1"]
        if "host" not in names:
            lines.append(f"Host: {self.host}:{self.port}")
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if length is not None and "content-length" not in names:
            lines.append(f"Content-Length: {length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

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
        return parser.get_status_code(), answer.headers, b"".join(answer.body)

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """``method path`` with ``body`` and ``headers``; (HTTP status, answer headers, answer body).

        Reconnects once when the server closed the kept-alive connection.

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row or the answer is not HTTP/1.1.
        """
        head = self._head(method, path, headers, None if body is None else len(body))
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
        head = self._heads.get(path)
        if head is None:
            head = self._heads[path] = self._head("POST", path, _JSON, None)[:-2]  # without the blank line
        request = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        status, _, content = self._send("POST", path, request)
        return status, content

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


_JSON = {"Content-Type": "application/json"}


class PosterPool:
    """POSTs that must be in flight together (a gang's ``/bind`` calls, each held open at Permit until the
    whole gang is there): a thread pool whose every thread owns its own :class:`HttpPoster` connection.

    Only runs with gangs create one; the verb loop's own :class:`HttpPoster` is untouched.

    Args:
        host, port: the server.
        workers: requests that may be in flight at once (threads, each with one connection).
        timeout: socket timeout in seconds (above the longest wait an answer may take).
    """

    def __init__(self, host: str, port: int, workers: int, timeout: float = 60.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="koord-sim-post")
        self._local = threading.local()
        self._posters: list[HttpPoster] = []
        self._lock = threading.Lock()

    def _poster(self) -> HttpPoster:
        poster: HttpPoster | None = getattr(self._local, "poster", None)
        if poster is None:
            poster = self._local.poster = HttpPoster(self.host, self.port, self.timeout)
            with self._lock:
                self._posters.append(poster)
        return poster

    def _post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        status, content = self._poster().post(path, body)
        return status, content, time.perf_counter()

    def submit(self, path: str, body: bytes) -> Future[tuple[int, bytes, float]]:
        """``POST path`` with the JSON ``body`` on a pool thread; the future's result is (HTTP status,
        response body, ``time.perf_counter()`` when the answer was read). The future raises as
        :meth:`HttpPoster.send`."""
        return self._pool.submit(self._post, path, body)

    def close(self) -> None:
        """Wait for the requests in flight, stop the threads and close their connections."""
        self._pool.shutdown(wait=True)
        with self._lock:
            for poster in self._posters:
                poster.close()
            self._posters.clear()


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
