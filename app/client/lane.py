"""The API client's lane for the scheduling path: the pod Binding and the watch streams.

httpx (with httpcore and h11 under it) costs about a millisecond of CPU per request and per stream
chunk in this service (issue 13); aiohttp, a well-kept async HTTP client with a C parser, does the
same for about a third of that, and carries the watch streams. A bind is one small POST sent once per
scheduled pod: it goes over :class:`app.client.keepalive.KeptAlive`, kept-alive connections whose
answers httptools parses, at a third of aiohttp's CPU again (issue 47). Everything else stays on
httpx (:class:`app.client.aio.AsyncClient`).

The requests are those httpx sends: the same URL (the server's path prefix kept), ``Accept`` and
``User-Agent``, the credentials of :class:`~app.client.config.ConfigurationAuth` asked per request
(rotated tokens are picked up), the same :class:`ssl.SSLContext` and TLS server name. Nothing is
retried, so a Binding is sent once. Not for proxies (the caller keeps httpx when the configuration
names one).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import aiohttp
import httptools
from yarl import URL

from app.client.config import ConnectionSettings
from app.client.errors import ConnectionFailed
from app.client.keepalive import KeptAlive
from app.client.wire import CONNECT_TIMEOUT, JSON, USER_AGENT

__all__ = ["Answer", "Lane", "Stream"]

#: What aiohttp raises for a request that got no complete answer.
_NO_ANSWER = (aiohttp.ClientError, OSError, TimeoutError, ValueError)
#: What :class:`~app.client.keepalive.KeptAlive` raises for one (``OSError`` covers TLS and the cut-short answer).
_NO_ONESHOT_ANSWER = (OSError, TimeoutError, httptools.HttpParserError)


class Answer:
    """One answer: ``status`` (HTTP code), ``headers`` (lower-case names), ``content`` (the body, bytes)."""

    __slots__ = ("content", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], content: bytes) -> None:
        self.status = status
        self.headers = headers
        self.content = content


def _headers(response: aiohttp.ClientResponse) -> dict[str, str]:
    return {name.lower(): value for name, value in response.headers.items()}


def _failure(what: str, exc: BaseException, timeout: float | None) -> ConnectionFailed:
    if isinstance(exc, TimeoutError):
        return ConnectionFailed(f"{what}: timed out after {timeout:g} s", 0)
    return ConnectionFailed(f"{what}: {type(exc).__name__}: {exc}", 0)


class Stream:
    """A long answer read as it arrives (a watch), on a connection of its own.

    Attributes:
        status: the HTTP code.
        headers: the answer's headers, lower-case names.
    """

    def __init__(self, response: aiohttp.ClientResponse, what: str, read_timeout: float) -> None:
        self._response = response
        self._what = what
        self._read_timeout = read_timeout
        self.status = response.status
        self.headers = _headers(response)

    async def read_all(self) -> bytes:
        """The whole remaining body.

        Raises:
            ConnectionFailed: the answer broke off or a read stalled past the read timeout.
        """
        try:
            return await self._response.read()
        except _NO_ANSWER as exc:
            raise _failure(self._what, exc, self._read_timeout) from exc

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive (chunked transfer coding decoded).

        Raises:
            ConnectionFailed: the stream broke (no final chunk) or one read stalled past the read timeout.
        """
        try:
            async for piece in self._response.content.iter_any():
                yield piece
        except _NO_ANSWER as exc:
            raise _failure(self._what, exc, self._read_timeout) from exc

    def close(self) -> None:
        """Close the stream and its connection (never reused: the body may be unread)."""
        self._response.close()


class Lane:
    """Kept-alive connections to the API server of ``settings``, for binds and watches.

    Args:
        settings: server URL, TLS context, TLS server name and credentials
            (:func:`app.client.config.connection_settings`); ``settings.proxy`` must be None.
        max_idle: connections kept alive for reuse (requests beyond it open more).

    Raises:
        ValueError: ``settings`` names a proxy.
    """

    def __init__(self, settings: ConnectionSettings, *, max_idle: int = 8) -> None:
        if settings.proxy:
            raise ValueError("the lane does not speak to proxies")
        self.settings = settings
        self.max_idle = max_idle
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._tls = settings.base_url.startswith("https://")
        url = urlsplit(settings.base_url)
        self._prefix = url.path.rstrip("/")
        self._host_header = url.netloc
        self._address = (url.hostname or "", url.port or (443 if self._tls else 80))
        self._fixed_headers = (f"Accept: {JSON}", f"User-Agent: {USER_AGENT}")
        self._kept: KeptAlive | None = None

    def _client(self) -> aiohttp.ClientSession:
        # created on first use, inside the event loop that serves (aiohttp binds a session to its loop)
        if self._session is None or self._session.closed:
            verify = self.settings.verify  # an SSLContext for https (CA, client certificate, hostname check)
            tls: ssl.SSLContext | bool = verify if self._tls and isinstance(verify, ssl.SSLContext) else False
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ssl=tls)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"Accept": JSON, "User-Agent": USER_AGENT},
                skip_auto_headers=("Accept-Encoding",),
                auto_decompress=False,
                # client-go keeps no cookies; a jar filters every request's and stores every answer's (~10 % of a bind)
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    def _oneshot(self) -> KeptAlive:
        if self._kept is None:
            verify = self.settings.verify
            tls = verify if self._tls and isinstance(verify, ssl.SSLContext) else None
            host, port = self._address
            self._kept = KeptAlive(host, port, tls, self.settings.sni_hostname, max_idle=self.max_idle)
        return self._kept

    def _url(self, path: str) -> URL:
        return URL(f"{self.settings.base_url}{path}", encoded=True)

    def _bearer(self) -> str | None:
        """The ``Authorization`` value asked per request (a rotated token is picked up), or None."""
        return self.settings.auth.configuration.get_api_key_with_prefix("BearerToken", alias="authorization") or None

    def _auth(self, headers: dict[str, str]) -> dict[str, str]:
        auth = self._bearer()
        if auth:
            headers["Authorization"] = auth
        return headers

    async def request(
        self, method: str, path: str, body: bytes | None, *, content_type: str = JSON, timeout: float = 60.0
    ) -> Answer:
        """Send ``method path`` with ``body`` and return the whole answer (any status), over the kept-alive
        connections of :class:`~app.client.keepalive.KeptAlive` (httptools, not aiohttp: a third of the CPU).

        Args:
            method: ``POST``, ``PUT``, ``PATCH``, ``GET`` or ``DELETE``.
            path: absolute API path, query string (already encoded) included if any.
            body: request body (sent with ``content_type``), or None.
            timeout: seconds for connecting, sending and reading the whole answer.

        Raises:
            ConnectionFailed: no complete answer (refused, reset, TLS failure, timeout, a malformed
                answer, a path holding a space or a line break); the message names the method, the path and
                the cause.
        """
        what = f"{method} {path}"
        if self._closed:
            raise ConnectionFailed(f"{what}: the client is closed", 0)
        if not path.startswith("/") or any(c in path for c in " \r\n"):
            raise ConnectionFailed(f"{what!r}: the path must be absolute and hold no space or line break", 0)
        head = [f"{method} {self._prefix}{path} HTTP/1.1", f"Host: {self._host_header}", *self._fixed_headers]
        auth = self._bearer()
        if auth:
            head.append(f"Authorization: {auth}")
        if body is not None:
            head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
        elif method in ("POST", "PUT", "PATCH"):
            head.append("Content-Length: 0")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
        try:
            async with asyncio.timeout(timeout):
                status, headers, content = await self._oneshot().request(data, connect_timeout=CONNECT_TIMEOUT)
        except _NO_ONESHOT_ANSWER as exc:
            raise _failure(what, exc, timeout) from exc
        return Answer(status, headers, content)

    async def open_stream(self, method: str, path: str, *, timeout: float) -> Stream:
        """Send ``method path`` (no body) and read the answer's head; the body is read from the
        :class:`Stream`. ``timeout`` bounds connecting and reading the head, then each read of the body.

        Raises:
            ConnectionFailed: no answer head (refused, reset, TLS failure, timeout, malformed).
        """
        what = f"{method} {path.partition('?')[0]}"
        if self._closed:
            raise ConnectionFailed(f"{what}: the client is closed", 0)
        try:
            response = await self._client().request(
                method,
                self._url(path),
                headers=self._auth({}),
                timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT, sock_read=timeout),
                server_hostname=self.settings.sni_hostname,
                allow_redirects=False,
            )
        except _NO_ANSWER as exc:
            raise _failure(what, exc, timeout) from exc
        return Stream(response, what, timeout)

    async def aclose(self) -> None:
        """Close every connection; requests after this fail. Safe to call twice."""
        self._closed = True
        if self._kept is not None:
            self._kept.close()
        if self._session is not None and not self._session.closed:
            await self._session.close()
            await asyncio.sleep(0)  # let the transports' close callbacks run
