"""Lean keep-alive HTTP/1.1 clients of the in-process service: an httpx transport and a bare JSON poster.

httpx's default transport (httpcore + h11) costs about 0.3 ms of CPU per request, and the client
shares the interpreter (one core) with the in-process server, so over ~30,000 verb calls it is a
large share of a run. This transport keeps httpx's client API and sends each request over one
persistent ``http.client`` connection to the local server instead (reconnecting once if the
server closed it). Plain HTTP to one host only.
"""

from __future__ import annotations

import http.client
import socket

import httpx


class KeepAliveTransport(httpx.BaseTransport):
    """One persistent connection to ``host:port``.

    Args:
        host, port: the server.
        timeout: socket timeout in seconds.
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self._conn

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and read the whole answer.

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row.
        """
        body = request.read()
        headers = {k.decode(): v.decode() for k, v in request.headers.raw if k.lower() not in (b"host",)}
        path = request.url.raw_path.decode()
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(request.method, path, body=body, headers=headers)
                answer = conn.getresponse()
                content = answer.read()
            except ConnectionRefusedError as exc:
                self.close()
                raise httpx.ConnectError(str(exc), request=request) from exc
            except (http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt == 2:
                    raise httpx.ReadError(str(exc), request=request) from exc
                continue
            return httpx.Response(answer.status, headers=answer.getheaders(), content=content, request=request)
        raise httpx.ReadError("unreachable", request=request)  # pragma: no cover

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class HttpPoster:
    """JSON ``POST`` requests over one persistent HTTP/1.1 socket to ``host:port``, with nothing between.

    The verb loop posts ~30,000 bodies per run; even :class:`KeepAliveTransport` under httpx costs
    about 0.4 ms of client CPU per call (httpx's request and URL models, ``http.client``'s header
    parsing through the ``email`` package), on the same core as the server. This writes the request
    bytes itself and reads the answer by its ``Content-Length`` (or chunked encoding): still a
    complete HTTP/1.1 exchange with the real server, a fraction of the client work.

    Args:
        host, port: the server.
        timeout: socket timeout in seconds.
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""
        self._head = f"Host: {host}:{port}\r\nContent-Type: application/json\r\nContent-Length: ".encode()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``POST path`` with the JSON ``body``; (HTTP status, response body).

        Reconnects once when the server closed the kept-alive connection.

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row or the answer is not HTTP/1.1.
        """
        request = b"POST " + path.encode() + b" HTTP/1.1\r\n" + self._head + str(len(body)).encode() + b"\r\n\r\n"
        for attempt in (1, 2):
            try:
                sock = self._connect()
                sock.sendall(request + body)
                return self._read_response()
            except ConnectionRefusedError as exc:
                self.close()
                raise httpx.ConnectError(str(exc)) from exc
            except (OSError, _BrokenAnswer) as exc:
                self.close()
                if attempt == 2:
                    raise httpx.ReadError(f"POST {path}: {exc}") from exc
        raise httpx.ReadError("unreachable")  # pragma: no cover

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._buf = b""
        return self._sock

    def _fill(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(262144)
        if not chunk:
            raise _BrokenAnswer("connection closed by the server")
        self._buf += chunk

    def _read_until(self, marker: bytes) -> bytes:
        while (end := self._buf.find(marker)) < 0:
            self._fill()
        out, self._buf = self._buf[:end], self._buf[end + len(marker) :]
        return out

    def _read_exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _read_response(self) -> tuple[int, bytes]:
        head = self._read_until(b"\r\n\r\n").split(b"\r\n")
        status_line = head[0].split(b" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1.") or not status_line[1].isdigit():
            raise _BrokenAnswer(f"not an HTTP/1.1 status line: {head[0][:80]!r}")
        headers: dict[bytes, bytes] = {}
        for line in head[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if b"content-length" in headers:
            content = self._read_exactly(int(headers[b"content-length"]))
        elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts: list[bytes] = []
            while size := int(self._read_until(b"\r\n").split(b";")[0], 16):
                parts.append(self._read_exactly(size))
                self._read_exactly(2)
            self._read_until(b"\r\n")  # no trailers are sent
            content = b"".join(parts)
        else:
            raise _BrokenAnswer("an answer without Content-Length or chunked encoding")
        if headers.get(b"connection", b"").lower() == b"close":
            self.close()
        return int(status_line[1]), content

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buf = b""


class _BrokenAnswer(Exception):
    """The server's answer is cut or not HTTP/1.1."""
