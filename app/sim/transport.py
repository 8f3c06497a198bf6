"""Keep-alive HTTP/1.1 clients of the in-process service over real TCP, both from well-kept libraries.

The client shares the interpreter (one core, one GIL) with the in-process server, so over ~30,000 verb
calls per run every thread switch and every microsecond of client CPU counts:

- :class:`AsyncPoster`: the verb loop's client, aiohttp on the server's own event loop: no thread
  switch and no GIL hand-over per call (a client thread cost two per call, ~0.1 ms each on the
  two-core machine). aiohttp writes each request in one write and parses answers with its C parser.
- :class:`HttpPoster`: blocking requests over the standard library's ``http.client``, under
  :class:`KeepAliveTransport` for the httpx client of everything else (start-up, inspection).

httpx's default transport (httpcore + h11) costs about 0.3 ms of CPU per request. A hand-written
HTTP/1.1 client (one write, httptools parsing) was ~0.2 ms per call cheaper than aiohttp here, about
6 s of a FragmentationAware run: not kept, a well-kept library over our own HTTP code, as for the
service's own API client (``app/client/lane.py``). Plain HTTP to one host only.
"""

from __future__ import annotations

import asyncio
import http.client

import aiohttp
import httpx
from yarl import URL


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
#: aiohttp's timeouts all off (its default has a total of 300 s): :class:`AsyncPoster` keeps its own.
_NO_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None)


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


class AsyncPoster:
    """JSON POSTs over one persistent HTTP/1.1 connection (aiohttp), from a coroutine on the server's own loop.

    One request at a time; when the server closed the kept-alive connection, the request is sent once
    more on a new one (aiohttp itself never re-sends a POST). Close it with :meth:`aclose`.

    The ``timeout`` is kept by one watchdog timer per poster rather than by aiohttp's per-request timeout
    (a timer handle armed and cancelled on every call, ~30,000 per run): the watchdog fires at the
    deadline of the request in flight when it was armed, and re-arms itself for the deadline of the
    request in flight then, if any; a request past its deadline is cancelled and reported as a
    ``TimeoutError``. A busy poster thus arms about one timer per ``timeout`` seconds, and no request
    runs longer than ``timeout`` unanswered.

    Args:
        host, port: the server.
        timeout: seconds one request may take (connect, send and answer, both attempts).
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self._base = f"http://{host}:{port}"
        self._urls: dict[str, URL] = {}  # per path, parsed once (aiohttp takes a URL as it is)
        self._seconds = timeout
        self._session: aiohttp.ClientSession | None = None
        self._inflight: asyncio.Task[object] | None = None  # the task posting now
        self._deadline = 0.0  # loop time by which the request in flight must be answered
        self._expired = False  # the watchdog cancelled the request in flight
        self._watch: asyncio.TimerHandle | None = None
        self._watch_loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # what every request shares is the session's (headers; no aiohttp timeout: the watchdog's)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1),
                cookie_jar=aiohttp.DummyCookieJar(),
                headers=_JSON,
                skip_auto_headers=("Accept-Encoding", "User-Agent"),
                auto_decompress=False,
                timeout=_NO_TIMEOUT,
            )
        return self._session

    def _url(self, path: str) -> URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = URL(self._base + path)
        return url

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """Arm the watchdog for the request in flight unless it is armed on ``loop`` already."""
        if self._watch is None or self._watch_loop is not loop:
            self._watch = loop.call_at(self._deadline, self._check, loop)
            self._watch_loop = loop

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        """The watchdog: cancel the request in flight past its deadline, else re-arm for its deadline."""
        self._watch = None
        task = self._inflight
        if task is None:
            return  # nothing in flight: the next request arms it again
        if loop.time() >= self._deadline:
            self._expired = True
            task.cancel()
        else:
            self._arm(loop)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``POST path`` with the JSON ``body``; (HTTP status, response body).

        Raises:
            httpx.ConnectError: the server cannot be reached.
            httpx.ReadError: the connection broke twice in a row, the answer is not HTTP/1.1, or it
                took longer than ``timeout``.
        """
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        self._inflight, self._expired = task, False
        self._deadline = loop.time() + self._seconds
        self._arm(loop)
        try:
            for attempt in (1, 2):
                try:
                    async with self._client().post(self._url(path), data=body, allow_redirects=False) as answer:
                        return answer.status, await answer.read()
                except aiohttp.ClientConnectorError as exc:
                    raise httpx.ConnectError(str(exc)) from exc
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    if attempt == 2 or isinstance(exc, TimeoutError):
                        raise httpx.ReadError(f"POST {path}: {type(exc).__name__}: {exc}") from exc
            raise httpx.ReadError("unreachable")  # pragma: no cover
        except asyncio.CancelledError:
            # the watchdog's cancel (and no other pending): a timeout; any other cancel goes on
            if self._expired and task is not None and task.uncancel() == 0:
                raise httpx.ReadError(f"POST {path}: TimeoutError: no answer within {self._seconds} s") from None
            raise
        finally:
            self._inflight = None

    async def aclose(self) -> None:
        """Close the connection and stop the watchdog (a later request reconnects and re-arms it)."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._session is not None:
            await self._session.close()
            self._session = None
