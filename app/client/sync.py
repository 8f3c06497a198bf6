"""The synchronous Kubernetes API client (``httpx.Client``), for the node agent and command-line tools.

Same requests, answers and errors as :class:`app.client.aio.AsyncClient` (both build on
:mod:`app.client.wire`), without watches: the agent polls.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx
import kubernetes.client

from app.client import bodies
from app.client.config import connection_settings, load_configuration
from app.client.errors import ConnectionFailed, Gone
from app.client.pager import DEFAULT_PAGE_SIZE, ListResult, Pager
from app.client.wire import (
    JSON,
    MERGE_PATCH,
    REQUEST_TIMEOUT,
    Params,
    build_request,
    connection_failed,
    decode_answer,
    http_options,
)

__all__ = ["Client"]


class Client:
    """A synchronous client of one API server with one connection pool.

    Paths are absolute API paths (``/api/v1/namespaces/ns/pods/p``); bodies and answers are JSON
    objects as dicts. Every method raises the typed errors of :mod:`app.client.errors`: the class a
    non-2xx answer names (``NotFound``, ``Conflict``, ``AlreadyExists``, ``TooManyRequests``, ...),
    :class:`~app.client.errors.InvalidResponse` for a 2xx answer that is not a JSON object, and
    :class:`~app.client.errors.ConnectionFailed` when no answer came. Nothing is retried here. Follows
    client-go's ``rest.RESTClient`` like :class:`app.client.aio.AsyncClient`.

    Args:
        configuration: where the server is and how to authenticate (:func:`app.client.config.load_configuration`).
        max_connections: size of the connection pool.
        timeout: read timeout of each request, seconds (connecting: 5 s).

    Raises:
        kubernetes.config.ConfigException: the configuration's URL or TLS files are unusable.
        ValueError: ``max_connections`` < 1 or ``timeout`` <= 0.
    """

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        *,
        max_connections: int = 4,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.configuration = configuration
        self.settings = connection_settings(configuration)
        self.timeout = float(timeout)
        self._http = httpx.Client(**http_options(self.settings, max_connections, self.timeout))

    @classmethod
    def from_config(
        cls, kubeconfig: str | None = None, *, in_cluster: bool = False, context: str | None = None, **kwargs: Any
    ) -> Client:
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

    def close(self) -> None:
        """Close the connection pool. Safe to call twice."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def request(
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
            resp = self._http.send(req)
        except httpx.HTTPError as exc:
            raise connection_failed(req, exc) from exc
        return decode_answer(req, resp)

    def get(self, path: str, params: Params | None = None) -> dict[str, Any]:
        """GET one object (or one unpaginated list).

        Raises:
            NotFound: no such object. Otherwise as :meth:`request`.
        """
        return self.request("GET", path, params=params)

    def list(self, path: str, *, params: Params | None = None, limit: int = DEFAULT_PAGE_SIZE) -> ListResult:
        """LIST a collection page by page (``limit``/``continue``, client-go's pager); a continue token
        that expired (410) restarts the list once without pagination.

        Raises:
            NotFound, Forbidden: the collection does not exist (CRD not installed) or RBAC refuses it.
            InvalidResponse: a page is not a list. Otherwise as :meth:`request`.
        """
        pager = Pager(limit)
        while (page := pager.next_params()) is not None:
            try:
                body = self.request("GET", path, params={**(params or {}), **page})
            except Gone:
                if not pager.restart_if_expired():
                    raise
                continue
            pager.add_page(body)
        return pager.result

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection ``path``; returns the created object.

        Raises:
            AlreadyExists: an object of that name exists. Otherwise as :meth:`request`.
        """
        return self.request("POST", path, body=body)

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT (replace) the object at ``path`` (or its ``/status``); returns the stored object.

        Raises:
            Conflict: ``metadata.resourceVersion`` is stale. NotFound: no such object. Otherwise as :meth:`request`.
        """
        return self.request("PUT", path, body=body)

    def merge_patch(self, path: str, patch: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        """PATCH the object at ``path`` (``path/subresource`` when given) with a JSON merge patch (RFC 7386).

        Raises:
            NotFound: no such object. Otherwise as :meth:`request`.
        """
        return self.request(
            "PATCH", f"{path}/{subresource}" if subresource else path, body=patch, content_type=MERGE_PATCH
        )

    def delete(self, path: str) -> dict[str, Any]:
        """DELETE the object at ``path``; returns the answer (the object or a ``Status``).

        Raises:
            NotFound: no such object. Otherwise as :meth:`request`.
        """
        return self.request("DELETE", path)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST the ``Binding`` of pod ``namespace/name`` to ``node`` with the uid precondition
        (:func:`app.client.bodies.binding`).

        Raises:
            Conflict: the pod is already bound or was recreated. NotFound: no such pod.
            ConnectionFailed: no answer (the message names the pod and the node). Otherwise as :meth:`request`.
        """
        path, body = bodies.binding(namespace, name, uid, node)
        try:
            self.request("POST", path, body=body)
        except ConnectionFailed as exc:
            raise ConnectionFailed(f"binding pod {namespace}/{name} to {node} failed: {exc}") from exc

    def evict(self, namespace: str, name: str, uid: str) -> None:
        """POST the policy/v1 ``Eviction`` of pod ``namespace/name`` with the uid precondition
        (:func:`app.client.bodies.eviction`).

        Raises:
            TooManyRequests: a PodDisruptionBudget blocks it (``retry_after`` when the server gave one).
            NotFound: no such pod. Conflict: the uid does not match. Otherwise as :meth:`request`.
        """
        path, body = bodies.eviction(namespace, name, uid)
        self.request("POST", path, body=body)
