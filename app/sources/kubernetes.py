"""A :class:`~app.sources.base.Source` backed by a real Kubernetes API server.

Each watched kind gets a *reflector* that follows client-go's ``Reflector`` / ``ListWatch``
semantics:

1. LIST the collection cluster-wide (paginated with ``limit``/``continue``, like client-go's
   pager) and hand the full result to the sink with ``sink.replace(kind, items)``; remember the
   list's ``metadata.resourceVersion``.
2. WATCH from that resourceVersion (``watch=true&allowWatchBookmarks=true&timeoutSeconds=N``).
   ``ADDED`` / ``MODIFIED`` / ``DELETED`` become ``sink.apply(Event(...))``; ``BOOKMARK`` only
   advances the remembered resourceVersion.
3. A watch that ends normally (the server's ``timeoutSeconds`` elapsed) is re-opened from the
   last resourceVersion. An ``ERROR`` event or HTTP answer with code 410 (Gone, "too old resource
   version") triggers a relist. Connection errors and 5xx answers back off exponentially (with
   jitter) and then watch again from the last resourceVersion.

A kind whose LIST answers 404 (its CRD is not installed) or 403 (RBAC does not allow it) is
delivered as an empty list, so it does not block readiness, and is listed again every
``missing_kind_retry_seconds`` in the background.

The ``kubernetes`` client is synchronous, so every reflector runs in its own daemon thread and
hands each ``replace``/``apply`` to the event loop captured in :meth:`KubernetesSource.start`
with ``loop.call_soon_threadsafe``: the sink is only ever touched on the loop thread. Bodies and
watch lines are parsed with :mod:`orjson`; objects stay JSON-shaped dicts (the client's model
deserialisation is not used).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import kubernetes.client
import kubernetes.config
import orjson
from kubernetes.config.config_exception import ConfigException

from app.api.kinds import KINDS, KindInfo
from app.sources.base import (
    WATCH_NAMESPACES,
    WATCHED_KINDS,
    BindError,
    Source,
    WriteError,
    object_to_store,
    updated_object,
    write_kind,
)
from app.sources.events import Event, EventSink, EventType

__all__ = ["KubernetesSource", "load_configuration", "probe"]

log = logging.getLogger("app.sources.kubernetes")

#: Connect timeout (seconds) for every request.
CONNECT_TIMEOUT = 5.0
#: Read timeout (seconds) for LIST pages and the bind POST.
REQUEST_TIMEOUT = 60.0
#: Extra read timeout (seconds) granted to a watch beyond its server-side ``timeoutSeconds``.
WATCH_READ_SLACK = 30.0
#: A watch that ends without a single line sooner than this (seconds) counts as suspiciously
#: short; the reflector waits ``backoff_initial`` before re-opening it (avoids a hot loop).
SHORT_WATCH_SECONDS = 1.0

#: A watch stream that stayed open this long (seconds) resets the reflector's backoff.
HEALTHY_WATCH_SECONDS = 10.0

_AUTH = ["BearerToken"]


class _Expired(Exception):
    """The resourceVersion is too old (HTTP 410 Gone); the reflector must relist."""


class _Missing(Exception):
    """The collection answered 404 or 403; ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _HTTPStatusError(Exception):
    """A non-2xx answer that is neither 410, 404 nor 403 (5xx, 401, 400, ...)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def load_configuration(kubeconfig: str | None = None, *, in_cluster: bool = False) -> kubernetes.client.Configuration:
    """Build a client configuration the way ``kubectl`` would.

    Args:
        kubeconfig: path of a kubeconfig file. ``None`` means the default location
            (``$KUBECONFIG`` or ``~/.kube/config``), falling back to the in-cluster service
            account when that cannot be loaded and ``KUBERNETES_SERVICE_HOST`` is set.
        in_cluster: use the pod's service account (token and CA under
            ``/var/run/secrets/kubernetes.io/serviceaccount``) and ignore ``kubeconfig``.

    Returns:
        A fresh :class:`kubernetes.client.Configuration` (the global default is not touched).

    Raises:
        kubernetes.config.ConfigException: no usable configuration was found.
        OSError: the kubeconfig file could not be read.
    """
    cfg = kubernetes.client.Configuration()
    if in_cluster:
        kubernetes.config.load_incluster_config(client_configuration=cfg)
        return cfg
    if kubeconfig is not None:
        kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)
        return cfg
    try:
        kubernetes.config.load_kube_config(client_configuration=cfg, persist_config=False)
    except (ConfigException, OSError):
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=cfg)
    return cfg


def _request(
    api: kubernetes.client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, str]] | None = None,
    path_params: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
    timeout: float | tuple[float, float] = (CONNECT_TIMEOUT, REQUEST_TIMEOUT),
    content_type: str = "application/json",
) -> Any:
    """Send one request through ``api`` (bearer-token auth) and return the raw urllib3 response.

    The response is not preloaded: the caller reads (``.data``) or streams it and must close it.
    Non-2xx answers are returned, not raised. Connection errors propagate as urllib3 / OS
    exceptions or :class:`ApiException` (status 0, e.g. TLS errors).
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    m, url, hdrs, ser_body, post = api.param_serialize(
        method,
        path,
        path_params=path_params,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=_AUTH,
    )
    rest = api.call_api(m, url, header_params=hdrs, body=ser_body, post_params=post, _request_timeout=timeout)
    return rest.response


def _status_message(status: int, data: bytes) -> str:
    """The ``message`` of a ``Status`` body, or a short rendering of whatever came back."""
    try:
        parsed = orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"])
    text = data[:200].decode("utf-8", "replace").strip() if data else ""
    return text or f"HTTP {status}"


def _close(resp: Any) -> None:
    """Close a urllib3 response, never raising."""
    with contextlib.suppress(Exception):
        resp.close()


async def probe(kubeconfig: str | None = None, *, in_cluster: bool = False, timeout: float = 2.0) -> bool:
    """Whether a Kubernetes API server is configured and answers ``GET /version`` in time.

    Used by the CLI to fall back to the embedded (file) source when no cluster is reachable.
    The configuration is resolved like :func:`load_configuration`.

    Args:
        kubeconfig: kubeconfig path, or ``None`` for the default location / in-cluster.
        in_cluster: use the in-cluster service account.
        timeout: overall budget in seconds (connect and read), about 2 s by default.

    Returns:
        True if the server answered 2xx within ``timeout``; False on any failure (no
        configuration, unreachable, TLS error, non-2xx, timeout). Never raises.
    """

    def _check() -> bool:
        cfg = load_configuration(kubeconfig, in_cluster=in_cluster)
        cfg.retries = False
        api = kubernetes.client.ApiClient(cfg)
        try:
            resp = _request(api, "GET", "/version", timeout=(timeout, timeout))
            try:
                return 200 <= int(resp.status) < 300
            finally:
                _close(resp)
        finally:
            with contextlib.suppress(Exception):
                api.rest_client.close()

    try:
        return await asyncio.wait_for(asyncio.to_thread(_check), timeout + 0.5)
    except Exception as exc:  # probing must never raise
        log.debug("API server probe failed: %s", exc)
        return False


class _Reflector:
    """List-then-watch loop for one kind, run in a daemon thread (client-go ``Reflector``)."""

    def __init__(self, source: KubernetesSource, info: KindInfo) -> None:
        self.source = source
        self.info = info
        self.rv: str | None = None
        self.failures = 0  # consecutive errors, drives the backoff
        self.expired_streak = 0  # consecutive 410s without a delivered event in between
        self.thread = threading.Thread(target=self.run, name=f"reflector-{info.kind}", daemon=True)
        self.response: Any = None  # the in-flight streamed response, for stop()
        self.missing_status: int | None = None  # set while the kind answers 404/403

    # -- helpers --------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.info.kind

    def stopped(self) -> bool:
        return self.source._stop_event.is_set()

    def backoff(self) -> None:
        """Sleep (interruptibly) for the next exponential backoff step with jitter."""
        src = self.source
        self.failures += 1
        delay = min(src._backoff_max, src._backoff_initial * (2 ** (self.failures - 1)))
        delay = min(src._backoff_max, delay * (1.0 + 0.25 * random.random()))
        src._stop_event.wait(delay)

    def fill(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Add ``kind`` and ``apiVersion`` when the server left them out (list items do)."""
        if "kind" not in obj:
            obj["kind"] = self.info.kind
        if "apiVersion" not in obj:
            obj["apiVersion"] = self.info.api_version
        return obj

    def set_response(self, resp: Any) -> None:
        with self.source._lock:
            self.response = resp
        if self.stopped():  # stop() ran before we registered: don't block on this one
            with contextlib.suppress(Exception):
                resp.shutdown()

    def clear_response(self) -> None:
        with self.source._lock:
            resp, self.response = self.response, None
        if resp is not None:
            _close(resp)

    # -- main loop ------------------------------------------------------------------------

    def run(self) -> None:
        need_list = True
        while not self.stopped():
            try:
                if need_list:
                    if not self.list_once():
                        continue
                    need_list = False
                if self.stopped():
                    break
                self.watch_once()
            except _Expired:
                if self.stopped():
                    break
                log.info("watch of %s: resourceVersion %s too old (410), relisting", self.kind, self.rv)
                self.source._count_restart()
                need_list = True
                self.expired_streak += 1
                if self.expired_streak > 1:  # 410 right after a relist: don't hammer the server
                    self.backoff()
            except _Missing as exc:
                if self.stopped():
                    break
                log.info("watch of %s answered HTTP %d, relisting", self.kind, exc.status)
                self.source._count_restart()
                need_list = True
                self.backoff()
            except Exception as exc:
                if self.stopped():
                    break
                log.warning("watch of %s failed (%s), retrying from resourceVersion %s", self.kind, exc, self.rv)
                self.source._count_restart()
                self.backoff()
        self.clear_response()
        log.debug("reflector for %s stopped", self.kind)

    def list_once(self) -> bool:
        """LIST every page of the collection and deliver it; False if it must be retried."""
        try:
            items, rv = self.list_all()
        except _Missing as exc:
            if self.missing_status != exc.status:
                log.warning(
                    "cannot list %s (%s): HTTP %d (%s); treating it as empty and retrying every %gs",
                    self.kind,
                    self.info.collection_path(),
                    exc.status,
                    exc,
                    self.source._missing_retry,
                )
                self.missing_status = exc.status
                self.source._deliver_replace(self.kind, [])  # listed-empty: readiness proceeds
            else:
                log.debug("listing %s still answers HTTP %d", self.kind, exc.status)
            self.source._stop_event.wait(self.source._missing_retry)
            return False
        except Exception as exc:
            if self.stopped():
                return False
            log.warning("listing %s failed: %s", self.kind, exc)
            self.source._count_restart()
            self.backoff()
            return False
        if self.missing_status is not None:
            log.info("%s can be listed again", self.kind)
            self.missing_status = None
        self.rv = rv
        self.failures = 0
        log.debug("listed %d %s at resourceVersion %s", len(items), self.kind, rv)
        self.source._deliver_replace(self.kind, items)
        return True

    def list_all(self) -> tuple[list[dict[str, Any]], str | None]:
        """All items of the collection and the list's resourceVersion (following ``continue``)."""
        api = self.source._api
        path = self.info.collection_path(WATCH_NAMESPACES.get(self.kind))
        items: list[dict[str, Any]] = []
        cont: str | None = None
        paginate = self.source.list_page_size > 0
        while True:
            query: list[tuple[str, str]] = []
            if paginate:
                query.append(("limit", str(self.source.list_page_size)))
            if cont:
                query.append(("continue", cont))
            resp = _request(api, "GET", path, query=query)
            try:
                data = resp.data
                status = int(resp.status)
            finally:
                _close(resp)
            if status in (403, 404):
                raise _Missing(status, _status_message(status, data))
            if status == 410 and cont:
                # The continue token expired: fall back to one unpaginated list (like client-go).
                log.info("continue token for %s expired, listing without pagination", self.kind)
                items, cont, paginate = [], None, False
                continue
            if not 200 <= status < 300:
                raise _HTTPStatusError(status, _status_message(status, data))
            body = orjson.loads(data)
            items.extend(self.fill(o) for o in body.get("items") or [])
            meta = body.get("metadata") or {}
            cont = meta.get("continue") or None
            if not cont:
                rv = meta.get("resourceVersion")
                return items, (str(rv) if rv else None)

    def watch_once(self) -> None:
        """Open one watch from ``self.rv`` and apply its events until it ends.

        Returns normally when the stream ends cleanly. Raises :class:`_Expired` on 410,
        :class:`_Missing` on 404/403 and any other exception on errors.
        """
        src = self.source
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(src._watch_timeout))]
        if self.rv:
            query.insert(1, ("resourceVersion", self.rv))
        started = time.monotonic()
        resp = _request(
            src._api,
            "GET",
            self.info.collection_path(WATCH_NAMESPACES.get(self.kind)),
            query=query,
            timeout=(CONNECT_TIMEOUT, src._watch_timeout + WATCH_READ_SLACK),
        )
        self.set_response(resp)
        lines = 0
        try:
            status = int(resp.status)
            if status == 410:
                raise _Expired()
            if status in (403, 404):
                raise _Missing(status, _status_message(status, resp.data))
            if not 200 <= status < 300:
                raise _HTTPStatusError(status, _status_message(status, resp.data))
            for line in self.iter_lines(resp):
                if self.stopped():
                    return
                lines += 1
                self.handle_line(line)
        finally:
            self.clear_response()
        if self.stopped():
            return
        if time.monotonic() - started >= HEALTHY_WATCH_SECONDS:
            self.failures = 0
        if lines == 0 and time.monotonic() - started < SHORT_WATCH_SECONDS:
            log.debug("watch of %s ended immediately; waiting before re-watching", self.kind)
            src._stop_event.wait(src._backoff_initial)

    @staticmethod
    def iter_lines(resp: Any) -> Iterator[bytes]:
        """Newline-delimited lines of a streamed response, as they arrive."""
        chunks: Iterator[bytes]
        if getattr(resp, "chunked", False):
            chunks = resp.stream(amt=None, decode_content=True)
        else:
            chunks = iter(lambda: resp.read1(65536), b"")
        buf = b""
        for chunk in chunks:
            if not chunk:
                continue
            buf += chunk
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                line, buf = buf[:nl].strip(), buf[nl + 1 :]
                if line:
                    yield line
        if buf.strip():
            yield buf.strip()

    def handle_line(self, line: bytes) -> None:
        """Apply one watch event line."""
        ev = orjson.loads(line)
        etype = ev.get("type")
        obj = ev.get("object") or {}
        if etype == "ERROR":
            code = obj.get("code")
            msg = obj.get("message") or obj.get("reason") or "watch error"
            if code == 410:
                raise _Expired()
            raise _HTTPStatusError(int(code or 0), str(msg))
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if etype == "BOOKMARK":
            if rv:
                self.rv = str(rv)
            return
        try:
            event_type = EventType(etype)
        except ValueError:
            log.warning("watch of %s: ignoring event of unknown type %r", self.kind, etype)
            return
        self.source._deliver_event(Event(self.kind, event_type, self.fill(obj)))
        if rv:
            self.rv = str(rv)
        self.failures = 0
        self.expired_streak = 0


class KubernetesSource(Source):
    """Lists and watches kinds on a Kubernetes API server and binds pods through it.

    Follows client-go's ``Reflector`` / ``ListWatch`` semantics per kind (see the module
    docstring): list, ``replace``; watch from the list's resourceVersion, ``apply`` each event;
    relist on 410; back off on connection errors and 5xx. Each kind runs in its own daemon
    thread; every sink call is marshalled onto the event loop captured by :meth:`start`.

    Args:
        kinds: kinds to watch (keys of :data:`app.api.kinds.KINDS`), default
            :data:`~app.sources.base.WATCHED_KINDS` plus ConfigMap (listed and watched only in the
            namespace :data:`~app.sources.base.WATCH_NAMESPACES` names).
        kubeconfig: kubeconfig path (``None``: default location, see :func:`load_configuration`).
        in_cluster: use the pod's service account instead of a kubeconfig.
        api_client: a ready :class:`kubernetes.client.ApiClient`; when given, ``kubeconfig`` and
            ``in_cluster`` are ignored.
        watch_timeout_seconds: server-side ``timeoutSeconds`` of each watch request.
        backoff_initial: first retry delay in seconds after a connection error or 5xx.
        backoff_max: upper bound of the exponential retry delay, in seconds.
        missing_kind_retry_seconds: how often a kind answering 404/403 is listed again.

    Raises:
        ValueError: a kind is not in :data:`app.api.kinds.KINDS`.
        kubernetes.config.ConfigException: no usable client configuration (when ``api_client``
            is not given).
    """

    owner_gc = True  # the API server garbage-collects owned objects (NodeSLOs of deleted Nodes)

    #: ``limit`` of each LIST page (client-go's pager uses 500); 0 disables pagination.
    list_page_size: int = 500

    def __init__(
        self,
        kinds: Sequence[str] = (*WATCHED_KINDS, "ConfigMap"),
        *,
        kubeconfig: str | None = None,
        in_cluster: bool = False,
        api_client: kubernetes.client.ApiClient | None = None,
        watch_timeout_seconds: int = 300,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        missing_kind_retry_seconds: float = 60.0,
    ) -> None:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown kinds: {', '.join(unknown)}")
        self._kinds: tuple[str, ...] = tuple(dict.fromkeys(kinds))
        self._owns_client = api_client is None
        if api_client is None:
            cfg = load_configuration(kubeconfig, in_cluster=in_cluster)
            # One long-lived connection per watched kind plus a few for LIST pages and binds.
            cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, len(self._kinds) + 4)
            api_client = kubernetes.client.ApiClient(cfg)
        self._api: kubernetes.client.ApiClient = api_client
        self._watch_timeout = int(watch_timeout_seconds)
        self._backoff_initial = float(backoff_initial)
        self._backoff_max = float(backoff_max)
        self._missing_retry = float(missing_kind_retry_seconds)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._restarts = 0
        self._synced: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sink: EventSink | None = None
        self._reflectors: list[_Reflector] = []

    @property
    def description(self) -> str:
        """``kubernetes:<host>`` (the API server URL from the configuration)."""
        return f"kubernetes:{self._api.configuration.host}"

    async def start(self, sink: EventSink) -> None:
        """Capture the running loop and start one reflector thread per kind.

        Returns immediately; data arrives asynchronously (see :meth:`ready`).

        Raises:
            RuntimeError: the source was already started.
        """
        if self._loop is not None:
            raise RuntimeError("KubernetesSource already started")
        self._loop = asyncio.get_running_loop()
        self._sink = sink
        self._reflectors = [_Reflector(self, KINDS[k]) for k in self._kinds]
        for r in self._reflectors:
            r.thread.start()
        log.info("watching %d kinds on %s", len(self._kinds), self._api.configuration.host)

    async def stop(self, timeout: float = 1.5) -> None:
        """Stop every reflector; returns within about ``timeout`` seconds. Safe to call twice.

        Sets the stop flag, shuts down the sockets of open watch streams so blocked reads
        return, and waits for the threads at most ``timeout`` seconds in total (they are daemon
        threads; a straggler stuck in a connect or LIST just exits later without touching the
        sink).
        """
        self._stop_event.set()
        with self._lock:
            responses = [r.response for r in self._reflectors if r.response is not None]
        for resp in responses:
            with contextlib.suppress(Exception):
                resp.shutdown()
        threads = [r.thread for r in self._reflectors if r.thread.is_alive()]
        if threads:
            deadline = time.monotonic() + timeout

            def _join() -> None:
                for t in threads:
                    t.join(max(0.0, deadline - time.monotonic()))

            await asyncio.to_thread(_join)
            alive = [t.name for t in threads if t.is_alive()]
            if alive:
                log.debug("reflector threads still finishing after stop: %s", ", ".join(alive))
                return
        if self._owns_client:
            with contextlib.suppress(Exception):
                self._api.rest_client.close()

    def ready(self) -> bool:
        """True once every kind delivered its first list (404/403 kinds count as empty lists)."""
        return len(self._synced) == len(self._kinds)

    def watch_restarts(self) -> int:
        """Relists and re-watches caused by errors, 410s or dropped streams since start."""
        return self._restarts

    async def bind(self, namespace: str, name: str, uid: str, node: str, pod: dict[str, Any] | None = None) -> None:
        """POST a ``Binding`` of pod ``namespace/name`` (uid ``uid``) to node ``node``.

        The uid precondition makes the API server refuse the binding if the pod was recreated.
        ``pod`` (the cached object, if known) is not needed: the API server owns the pod.

        Raises:
            BindError: the API answered non-2xx (the message is the Status ``message``, e.g.
                ``pods "x" not found`` or ``pod x is already assigned to node "y"``) or the
                request failed to connect / time out.
        """
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }

        path = "/api/v1/namespaces/{namespace}/pods/{name}/binding"
        try:
            status, data = await self._send("POST", path, body, path_params={"namespace": namespace, "name": name})
        except Exception as exc:  # urllib3/OS errors, ApiException (TLS), timeouts
            raise BindError(f"binding pod {namespace}/{name} to {node} failed: {exc}") from exc
        if not 200 <= status < 300:
            raise BindError(_status_message(status, data))

    # -- writes ----------------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        content_type: str = "application/json",
        path_params: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """One request in a worker thread: (HTTP status, body bytes); the response is always closed.

        Raises:
            Exception: whatever the client raised (urllib3/OS errors, ApiException for TLS, timeouts).
        """

        def _do() -> tuple[int, bytes]:
            resp = _request(self._api, method, path, path_params=path_params, body=body, content_type=content_type)
            try:
                return int(resp.status), resp.data
            finally:
                _close(resp)

        return await asyncio.to_thread(_do)

    async def _call(self, method: str, path: str, body: dict[str, Any] | None, content_type: str) -> dict[str, Any]:
        """Send one write; return the parsed answer.

        Raises:
            WriteError: non-2xx (with the Status message and code) or no answer.
        """
        try:
            status, data = await self._send(method, path, body, content_type=content_type)
        except Exception as exc:  # urllib3/OS errors, ApiException (TLS), timeouts
            raise WriteError(f"{method} {path} failed: {exc}") from exc
        if not 200 <= status < 300:
            raise WriteError(_status_message(status, data), status)
        parsed = orjson.loads(data) if data else {}
        return parsed if isinstance(parsed, dict) else {}

    @staticmethod
    def _object_path(kind: str, name: str, namespace: str | None) -> str:
        info = write_kind(kind)
        return f"{info.collection_path(namespace or 'default' if info.namespaced else None)}/{name}"

    async def patch(
        self,
        kind: str,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PATCH with ``application/merge-patch+json`` (on ``/status`` when ``subresource`` says so).

        Raises:
            WriteError: the API answered non-2xx or did not answer.
        """
        path = self._object_path(kind, name, namespace)
        if subresource:
            path = f"{path}/{subresource}"
        return await self._call("PATCH", path, patch, "application/merge-patch+json")

    async def create_or_update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """POST the object; on 409 (exists) GET it and PUT its labels, annotations and spec with the
        current resourceVersion (optimistic concurrency: a conflict is raised, not retried).

        Raises:
            WriteError: unknown kind, or the API refused the write.
        """
        info, meta = object_to_store(obj)
        namespace = meta.get("namespace") or ("default" if info.namespaced else None)
        body = {**obj, "apiVersion": info.api_version}
        try:
            return await self._call("POST", info.collection_path(namespace), body, "application/json")
        except WriteError as exc:
            if exc.status != 409:
                raise
        path = self._object_path(info.kind, str(meta["name"]), namespace)
        current = await self._call("GET", path, None, "application/json")
        return await self._call("PUT", path, updated_object(current, obj), "application/json")

    async def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        """DELETE the object (foreground garbage collection is left to the API server's default).

        Raises:
            WriteError: unknown kind or object (status 404), or any other refusal.
        """
        await self._call("DELETE", self._object_path(kind, name, namespace), None, "application/json")

    async def evict(self, namespace: str, name: str, uid: str, reason: str) -> None:
        """POST a policy/v1 ``Eviction`` to ``pods/{name}/eviction`` with a uid precondition.

        Raises:
            WriteError: 429 (a PodDisruptionBudget blocks it), 404, or any other refusal.
        """
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}} if uid else {},
        }
        log.info("evicting pod %s/%s: %s", namespace, name, reason)
        await self._call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body, "application/json")

    # -- called from reflector threads ---------------------------------------------------------

    def _count_restart(self) -> None:
        with self._lock:
            self._restarts += 1

    def _post(self, fn: Any, *args: Any) -> None:
        loop = self._loop
        if loop is None or self._stop_event.is_set():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nothing left to deliver to
            self._stop_event.set()

    def _deliver_replace(self, kind: str, items: list[dict[str, Any]]) -> None:
        self._post(self._apply_replace, kind, items)

    def _deliver_event(self, event: Event) -> None:
        self._post(self._apply_event, event)

    # -- run on the loop thread ------------------------------------------------------------------

    def _apply_replace(self, kind: str, items: list[dict[str, Any]]) -> None:
        if self._stop_event.is_set() or self._sink is None:
            return
        self._sink.replace(kind, items)
        self._synced.add(kind)

    def _apply_event(self, event: Event) -> None:
        if self._stop_event.is_set() or self._sink is None:
            return
        self._sink.apply(event)
