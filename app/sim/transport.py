"""Keep-alive HTTP/1.1 clients of the in-process service, both over the standard library's ``http.client``.

httpx's default transport (httpcore + h11) costs about 0.3 ms of CPU per request, and the client
shares the interpreter (one core) with the in-process server, so over ~30,000 verb calls it is a
large share of a run. :class:`HttpPoster` sends each request over one persistent ``http.client``
connection to the local server (reconnecting once if the server closed it); the verb loop posts
through it directly, and :class:`KeepAliveTransport` puts it under an httpx client for everything
else. Plain HTTP to one host only.
"""

from __future__ import annotations

import http.client
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import httpx


class HttpPoster:
    """Requests over one persistent HTTP/1.1 connection to ``host:port`` (``http.client``).

    The verb loop posts ~30,000 JSON bodies per run on the same core as the server; httpx's request
    and URL models cost about a quarter of the client's CPU there, so the loop talks to the standard
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

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """``method path`` with ``body`` and ``headers``; (HTTP status, answer headers, answer body).

        Reconnects once when the server closed the kept-alive connection.

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row or the answer is not HTTP/1.1.
        """
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=body, headers=headers)
                answer = self._conn.getresponse()
                content = answer.read()
            except ConnectionRefusedError as exc:
                self.close()
                raise httpx.ConnectError(str(exc)) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt == 2:
                    raise httpx.ReadError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
                continue
            if answer.will_close:
                self.close()
            return answer.status, answer.getheaders(), content
        raise httpx.ReadError("unreachable")  # pragma: no cover

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``POST path`` with the JSON ``body``; (HTTP status, response body). Raises as :meth:`send`."""
        status, _, content = self.send("POST", path, body, _JSON)
        return status, content

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


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
