"""Lean keep-alive HTTP/1.1 clients of the in-process service: an httpx transport and a bare JSON poster.

httpx's default transport (httpcore + h11) costs about 0.3 ms of CPU per request, and the client
shares the interpreter (one core) with the in-process server, so over ~30,000 verb calls it is a
large share of a run. This transport keeps httpx's client API and sends each request over one
persistent ``http.client`` connection to the local server instead (reconnecting once if the
server closed it). Plain HTTP to one host only.
"""

from __future__ import annotations

import http.client

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
    """JSON ``POST`` requests over one persistent HTTP/1.1 connection to ``host:port`` (``http.client``).

    The verb loop posts ~30,000 bodies per run on the same core as the server; httpx's request and
    URL models cost about a quarter of the client's CPU there, so the loop talks to the standard
    library's connection directly: a complete HTTP/1.1 exchange with the real server, the answer read
    by its ``Content-Length`` or chunked coding, and nothing else between.

    Args:
        host, port: the server.
        timeout: socket timeout in seconds.
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._headers = {"Content-Type": "application/json"}

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``POST path`` with the JSON ``body``; (HTTP status, response body).

        Reconnects once when the server closed the kept-alive connection.

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row or the answer is not HTTP/1.1.
        """
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request("POST", path, body=body, headers=self._headers)
                answer = self._conn.getresponse()
                content = answer.read()
            except ConnectionRefusedError as exc:
                self.close()
                raise httpx.ConnectError(str(exc)) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt == 2:
                    raise httpx.ReadError(f"POST {path}: {type(exc).__name__}: {exc}") from exc
                continue
            if answer.will_close:
                self.close()
            return answer.status, content
        raise httpx.ReadError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
