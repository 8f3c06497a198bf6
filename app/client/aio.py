"""The asynchronous Kubernetes API client (``httpx.AsyncClient``), for the scheduler service and the manager.

Everything is awaited on the event loop with no worker-thread hop. Lists and writes share one httpx
connection pool; the two calls the scheduler makes per pod, the Binding and the watch streams, go over
aiohttp through :mod:`app.client.lane` (kept-alive connections for binds, one connection
per watch), unless the configuration names a proxy. Same requests, answers and errors as
:class:`app.client.sync.Client` (both build on :mod:`app.client.wire`), plus :meth:`AsyncClient.watch`.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from types import TracebackType
from typing import Any
from urllib.parse import urlencode

import httpx
import kubernetes.client
import orjson

from app.client import bodies
from app.client.config import connection_settings, load_configuration
from app.client.errors import ConnectionFailed, Gone, error_from_response
from app.client.lane import Lane
from app.client.pager import DEFAULT_PAGE_SIZE, ListResult, Pager
from app.client.reviews import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    AccessDecision,
    Attributes,
    TokenDecision,
    UserInfo,
    access_decision,
    subject_access_review,
    token_decision,
    token_review,
)
from app.client.watch import WatchEvent, decode_stream, watch_params
from app.client.wire import (
    JSON,
    MERGE_PATCH,
    REQUEST_TIMEOUT,
    WATCH_READ_SLACK,
    Params,
    build_request,
    connection_failed,
    decode_answer,
    decode_object,
    http_options,
)

__all__ = ["AsyncClient"]

# httpcore asks ``import sniffio`` for the running async library on every lock, event and
# cancellation shield it makes (several per request). Without sniffio installed that import fails
# each time after a search of sys.path (~0.1 ms per request). A ``None`` entry in sys.modules
# makes the failing import immediate; httpcore then assumes asyncio, as it does anyway.
if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # type: ignore[assignment]


class AsyncClient:
    """An asynchronous client of one API server with one connection pool.

    Paths are absolute API paths (``/api/v1/namespaces/ns/pods/p``); bodies and answers are JSON
    objects as dicts. Every method raises the typed errors of :mod:`app.client.errors`: the class a
    non-2xx answer names (``NotFound``, ``Conflict``, ``AlreadyExists``, ``TooManyRequests``, ...),
    :class:`~app.client.errors.InvalidResponse` for a 2xx answer that is not a JSON object, and
    :class:`~app.client.errors.ConnectionFailed` when no answer came. Nothing is retried here (the
    reflectors of :class:`app.sources.kubernetes.KubernetesSource` back off and retry). Follows
    client-go's ``rest.RESTClient``: one transport (connection pool) per configuration, the answer's
    ``Status`` turned into apimachinery's typed error (``rest.Result.Error``).

    Args:
        configuration: where the server is and how to authenticate (:func:`app.client.config.load_configuration`).
        max_connections: size of the connection pool: one per concurrent watch plus room for writes.
            A request that finds the pool full waits for a free connection (up to its timeout).
        timeout: read timeout of each request except watches, seconds (connecting: 5 s).

    Raises:
        kubernetes.config.ConfigException: the configuration's URL or TLS files are unusable.
        ValueError: ``max_connections`` < 1 or ``timeout`` <= 0.
    """

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        *,
        max_connections: int = 10,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.configuration = configuration
        self.settings = connection_settings(configuration)
        self.timeout = float(timeout)
        self.max_connections = max_connections
        self._http = httpx.AsyncClient(**http_options(self.settings, max_connections, self.timeout))
        # Binds and watch streams go over aiohttp (app/client/lane.py: a third of httpx's CPU per
        # request and per chunk); through a proxy they stay on httpx.
        self._lane = Lane(self.settings, max_idle=max_connections) if not self.settings.proxy else None

    @classmethod
    def from_config(
        cls, kubeconfig: str | None = None, *, in_cluster: bool = False, context: str | None = None, **kwargs: Any
    ) -> AsyncClient:
        """A client for the configuration :func:`~app.client.config.load_configuration` finds (kubeconfig
        ``context``, or in-cluster); ``kwargs`` go to the constructor.

        Raises:
            kubernetes.config.ConfigException: no usable configuration.
            OSError: the kubeconfig could not be read.
        """
        return cls(load_configuration(kubeconfig, in_cluster=in_cluster, context=context), **kwargs)

    @property
    def host(self) -> str:
        """The server URL (``https://host:6443``)."""
        return self.settings.base_url

    async def aclose(self) -> None:
        """Close the connection pool (open watch streams end). Safe to call twice."""
        if self._lane is not None:
            await self._lane.aclose()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the answer's JSON object (``{}`` for an empty 2xx answer).

        Args:
            method: ``GET``, ``POST``, ``PUT``, ``PATCH`` or ``DELETE``.
            path: absolute API path.
            params: query parameters.
            body: JSON-encodable body, sent as ``content_type``; None sends none.
            timeout: read timeout in seconds for this request (default: the client's).

        Raises:
            ApiError: the typed error of a non-2xx answer (see the class docstring).
            InvalidResponse: a 2xx answer that is not a JSON object.
            ConnectionFailed: no answer (refused, reset, TLS failure, timeout).
            ValueError: ``path`` is not absolute.
        """
        req = build_request(
            self._http,
            self.settings,
            method,
            path,
            params=params,
            body=body,
            content_type=content_type,
            read_timeout=timeout or self.timeout,
        )
        try:
            resp = await self._http.send(req)
        except httpx.HTTPError as exc:
            raise connection_failed(req, exc) from exc
        return decode_answer(req, resp)

    async def get(self, path: str, params: Params | None = None) -> dict[str, Any]:
        """GET one object (or one unpaginated list).

        Raises:
            NotFound: no such object. Otherwise as :meth:`request`.
        """
        return await self.request("GET", path, params=params)

    async def list(
        self,
        path: str,
        *,
        params: Params | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        transform: Callable[[dict[str, Any]], Any] | None = None,
    ) -> ListResult:
        """LIST a collection page by page (``limit``/``continue``, client-go's pager); a continue token
        that expired (410) restarts the list once without pagination.

        ``transform`` is called on each item (an object) as its page arrives, before the next page is
        asked for (client-go's informer ``TransformFunc``), and what it returns is kept in the item's
        place: what it drops, or the whole decoded page when it returns a compact form, is freed page
        by page instead of after the whole list.

        Raises:
            NotFound, Forbidden: the collection does not exist (CRD not installed) or RBAC refuses it.
            InvalidResponse: a page is not a list. Otherwise as :meth:`request`.
        """
        pager = Pager(limit)
        while (page := pager.next_params()) is not None:
            try:
                body = await self.request("GET", path, params={**(params or {}), **page})
            except Gone:
                if not pager.restart_if_expired():
                    raise
                continue
            start = len(pager.result.items)
            pager.add_page(body)
            if transform is not None:
                items = pager.result.items
                for i in range(start, len(items)):
                    items[i] = transform(items[i])
        return pager.result

    async def watch(
        self,
        path: str,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        params: Params | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """WATCH the collection ``path`` from ``resource_version`` with bookmarks; yield each event as it arrives.

        The stream ends when the server closes it (after ``timeout_seconds``). ``ERROR`` events are
        yielded as they come (their object is a ``Status``; see :func:`app.client.errors.error_from_status`).
        Close the iterator (``contextlib.aclosing``) or cancel the task to end the stream early: its
        connection is closed at once.

        Raises:
            Gone: the resourceVersion is too old (HTTP 410 before the stream starts).
            NotFound, Forbidden: the collection does not exist or RBAC refuses it.
            InvalidResponse: a line of the stream cannot be decoded.
            ConnectionFailed: no answer, or the stream broke (no final chunk) or stalled past
                ``timeout_seconds`` + 30 s. Otherwise as :meth:`request`.
        """
        query = watch_params(resource_version, timeout_seconds, dict(params or {}))
        if self._lane is not None:
            async for event in self._watch_lane(path, query, timeout_seconds + WATCH_READ_SLACK):
                yield event
            return
        req = build_request(
            self._http,
            self.settings,
            "GET",
            path,
            params=query,
            read_timeout=timeout_seconds + WATCH_READ_SLACK,
        )
        try:
            resp = await self._http.send(req, stream=True)
        except httpx.HTTPError as exc:
            raise connection_failed(req, exc) from exc
        try:
            if not 200 <= resp.status_code < 300:
                try:
                    content = await resp.aread()
                except httpx.HTTPError:
                    content = b""
                raise error_from_response(resp.status_code, content, resp.headers.get("Retry-After"))
            # Lines are split on the raw bytes and each is decoded once by orjson (no str round trip).
            async for event in decode_stream(_chunks(resp, req)):
                yield event
        finally:
            await resp.aclose()

    async def _watch_lane(
        self, path: str, query: dict[str, str], read_timeout: float
    ) -> AsyncGenerator[WatchEvent, None]:
        """:meth:`watch` over the lane (a connection of its own, closed at the end)."""
        if not path.startswith("/"):
            raise ValueError(f"API path must be absolute, got {path!r}")
        assert self._lane is not None
        stream = await self._lane.open_stream("GET", f"{path}?{urlencode(query)}", timeout=read_timeout)
        try:
            if not 200 <= stream.status < 300:
                try:
                    content = await stream.read_all()
                except ConnectionFailed:
                    content = b""
                raise error_from_response(stream.status, content, stream.headers.get("retry-after"))
            async for event in decode_stream(stream.pieces()):
                yield event
        finally:
            stream.close()

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection ``path``; returns the created object.

        Raises:
            AlreadyExists: an object of that name exists. Otherwise as :meth:`request`.
        """
        return await self.request("POST", path, body=body)

    async def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT (replace) the object at ``path`` (or its ``/status``); returns the stored object.

        Raises:
            Conflict: ``metadata.resourceVersion`` is stale. NotFound: no such object. Otherwise as :meth:`request`.
        """
        return await self.request("PUT", path, body=body)

    async def merge_patch(self, path: str, patch: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        """PATCH the object at ``path`` (``path/subresource`` when given) with a JSON merge patch (RFC 7386).

        Raises:
            NotFound: no such object. Otherwise as :meth:`request`.
        """
        target = f"{path}/{subresource}" if subresource else path
        return await self.request("PATCH", target, body=patch, content_type=MERGE_PATCH)

    async def delete(self, path: str) -> dict[str, Any]:
        """DELETE the object at ``path``; returns the answer (the object or a ``Status``).

        Raises:
            NotFound: no such object. Otherwise as :meth:`request`.
        """
        return await self.request("DELETE", path)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST the ``Binding`` of pod ``namespace/name`` to ``node`` with the uid precondition
        (:func:`app.client.bodies.binding`).

        Raises:
            Conflict: the pod is already bound or was recreated. NotFound: no such pod.
            ConnectionFailed: no answer (the message names the pod and the node). Otherwise as :meth:`request`.
        """
        path, body = bodies.binding(namespace, name, uid, node)
        try:
            if self._lane is None:
                await self.request("POST", path, body=body)
                return
            answer = await self._lane.request("POST", path, orjson.dumps(body), timeout=self.timeout)
        except ConnectionFailed as exc:
            raise ConnectionFailed(f"binding pod {namespace}/{name} to {node} failed: {exc}") from exc
        if not 200 <= answer.status < 300:
            raise error_from_response(answer.status, answer.content, answer.headers.get("retry-after"))
        decode_object(f"POST {path}", answer.status, answer.content)

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        """POST the policy/v1 ``Eviction`` of pod ``namespace/name`` with the uid precondition
        (:func:`app.client.bodies.eviction`).

        Raises:
            TooManyRequests: a PodDisruptionBudget blocks it (``retry_after`` when the server gave one).
            NotFound: no such pod. Conflict: the uid does not match. Otherwise as :meth:`request`.
        """
        path, body = bodies.eviction(namespace, name, uid)
        await self.request("POST", path, body=body)

    async def review_token(self, token: str, *, timeout: float | None = None) -> TokenDecision:
        """Create a ``TokenReview`` of ``token`` (:mod:`app.client.reviews`) and return its decision, as
        k8s.io/apiserver's delegating authenticator asks (``authentication.k8s.io/v1``, no audiences).

        Args:
            timeout: read timeout in seconds (default: the client's); the delegating authenticator's is 10 s.

        Raises:
            Forbidden: this client may not create tokenreviews (RBAC: ``system:auth-delegator``).
            Otherwise as :meth:`request`.
        """
        return token_decision(await self.request("POST", TOKEN_REVIEWS, body=token_review(token), timeout=timeout))

    async def review_access(
        self, user: UserInfo, attributes: Attributes, *, timeout: float | None = None
    ) -> AccessDecision:
        """Create a ``SubjectAccessReview`` of ``user`` doing ``attributes`` (:mod:`app.client.reviews`) and
        return its decision, as k8s.io/apiserver's delegating authorizer asks (``authorization.k8s.io/v1``).

        Raises:
            Forbidden: this client may not create subjectaccessreviews (RBAC: ``system:auth-delegator``).
            Otherwise as :meth:`request`.
        """
        body = subject_access_review(user, attributes)
        return access_decision(await self.request("POST", SUBJECT_ACCESS_REVIEWS, body=body, timeout=timeout))


async def _chunks(resp: httpx.Response, req: httpx.Request) -> AsyncIterator[bytes]:
    """The body of a streamed httpx answer as it arrives; a broken stream is ``ConnectionFailed``."""
    chunks = resp.aiter_bytes()
    while True:
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        except httpx.HTTPError as exc:
            raise connection_failed(req, exc) from exc
        yield chunk
