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

Every request goes through one :class:`app.client.aio.AsyncClient` (one connection pool). The
reflectors are asyncio tasks on the loop that called :meth:`KubernetesSource.start`, so the sink
is only ever touched on that loop; writes and binds are awaited on it directly. Objects stay
JSON-shaped dicts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from app.api.jsonbytes import decode_object, encode_object
from app.api.kinds import KINDS, KindInfo
from app.client.aio import AsyncClient
from app.client.config import load_configuration
from app.client.errors import ApiError, Conflict, Forbidden, Gone, NotFound, error_from_status
from app.client.watch import WatchEvent
from app.sources.base import WATCH_NAMESPACES, WATCHED_KINDS, Source, object_to_store, updated_object, write_kind
from app.sources.events import EVENT_TYPES, Event, EventSink

__all__ = ["KubernetesSource", "probe"]

log = logging.getLogger("app.sources.kubernetes")

#: A watch that ends without a single line sooner than this (seconds) counts as suspiciously
#: short; the reflector waits ``backoff_initial`` before re-opening it (avoids a hot loop).
SHORT_WATCH_SECONDS = 1.0

#: A watch stream that stayed open this long (seconds) resets the reflector's backoff.
HEALTHY_WATCH_SECONDS = 10.0

#: Connections of the pool beyond one per watched kind: LIST pages, binds and other writes.
WRITE_CONNECTIONS = 8


class _WatchError(Exception):
    """A watch ``ERROR`` event other than 410: back off and watch again from the last resourceVersion."""


async def probe(kubeconfig: str | None = None, *, in_cluster: bool = False, timeout: float = 2.0) -> bool:
    """Whether a Kubernetes API server is configured and answers ``GET /version`` in time.

    Used by the CLI to fall back to the embedded (file) source when no cluster is reachable.
    The configuration is resolved like :func:`app.client.config.load_configuration`.

    Args:
        kubeconfig: kubeconfig path, or ``None`` for the default location / in-cluster.
        in_cluster: use the in-cluster service account.
        timeout: overall budget in seconds (connect and read), about 2 s by default.

    Returns:
        True if the server answered 2xx within ``timeout``; False on any failure (no
        configuration, unreachable, TLS error, non-2xx, timeout). Never raises.
    """
    try:
        client = AsyncClient(load_configuration(kubeconfig, in_cluster=in_cluster), max_connections=1, timeout=timeout)
    except Exception as exc:  # ConfigException, OSError, bad TLS files: probing must never raise
        log.debug("no usable API server configuration: %s", exc)
        return False
    try:
        await asyncio.wait_for(client.get("/version"), timeout + 0.5)
        return True
    except Exception as exc:  # ApiError, TimeoutError: probing must never raise
        log.debug("API server probe failed: %s", exc)
        return False
    finally:
        await client.aclose()


class _Reflector:
    """List-then-watch loop for one kind, run as an asyncio task (client-go ``Reflector``)."""

    def __init__(self, source: KubernetesSource, info: KindInfo) -> None:
        self.source = source
        self.info = info
        self.path = info.collection_path(WATCH_NAMESPACES.get(info.kind))
        self.rv: str | None = None
        self.failures = 0  # consecutive errors, drives the backoff
        self.expired_streak = 0  # consecutive 410s without a delivered event in between
        self.missing_status: int | None = None  # set while the kind answers 404/403
        self.task: asyncio.Task[None] | None = None

    # -- helpers --------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.info.kind

    def stopped(self) -> bool:
        return self.source._stopped

    async def backoff(self) -> None:
        """Sleep for the next exponential backoff step with jitter (cancelled by :meth:`KubernetesSource.stop`)."""
        src = self.source
        self.failures += 1
        delay = min(src._backoff_max, src._backoff_initial * (2 ** (self.failures - 1)))
        delay = min(src._backoff_max, delay * (1.0 + 0.25 * random.random()))
        await asyncio.sleep(delay)

    def fill(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Add ``kind`` and ``apiVersion`` when the server left them out (list items do), and drop
        ``metadata.managedFields``.

        managedFields (server-side apply bookkeeping, often the largest part of a Pod or Node) is
        read by nothing in the service: the cache, the plugins and the webhooks use labels,
        annotations, ownerReferences and the rest of metadata, which stay. Dropping it on arrival
        is what a client-go informer's ``TransformFunc`` is for (``SetTransform``).
        """
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        if "kind" not in obj:
            obj["kind"] = self.info.kind
        if "apiVersion" not in obj:
            obj["apiVersion"] = self.info.api_version
        return obj

    def fill_encoded(self, obj: dict[str, Any]) -> bytes:
        """:meth:`fill`, then the object as compact JSON bytes: what a LIST keeps of each item until
        the cache takes the whole list. Decoded, 100,000 pods held at once took ~350 MB whose heap
        pages stayed with the process after the cache had taken them; encoded, they take a fifth,
        and the cache decodes them one at a time (:func:`_decoded`)."""
        return encode_object(self.fill(obj))

    # -- main loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """LIST, then WATCH until the source stops, relisting on 410/404/403 and re-watching after API errors
        (with backoff). Run under the source's supervisor (``reflector-<Kind>``): an unexpected exception
        ends the run, and the next run starts with a LIST."""
        need_list = True
        while not self.stopped():
            try:
                if need_list:
                    if not await self.list_once():
                        continue
                    need_list = False
                if self.stopped():
                    break
                await self.watch_once()
            except Gone:
                if self.stopped():
                    break
                log.info("watch of %s: resourceVersion %s too old (410), relisting", self.kind, self.rv)
                self.source._restarts += 1
                need_list = True
                self.expired_streak += 1
                if self.expired_streak > 1:  # 410 right after a relist: don't hammer the server
                    await self.backoff()
            except (NotFound, Forbidden) as exc:
                if self.stopped():
                    break
                log.info("watch of %s answered HTTP %d, relisting", self.kind, exc.status)
                self.source._restarts += 1
                need_list = True
                await self.backoff()
            except (ApiError, _WatchError) as exc:  # an answer or a stream we cannot use: watch again
                if self.stopped():
                    break
                log.warning("watch of %s failed (%s), retrying from resourceVersion %s", self.kind, exc, self.rv)
                self.source._restarts += 1
                await self.backoff()
            # anything else is a bug: it ends this run, and the supervisor (app.sources.loops) logs it, counts
            # it, and runs the reflector again after a backoff, from a fresh LIST
        log.debug("reflector for %s stopped", self.kind)

    async def list_once(self) -> bool:
        """LIST every page of the collection and deliver it; False if it must be retried."""
        src = self.source
        try:
            result = await src._client.list(self.path, limit=src.list_page_size, transform=self.fill_encoded)
        except (NotFound, Forbidden) as exc:
            if self.missing_status != exc.status:
                log.warning(
                    "cannot list %s (%s): HTTP %d (%s); treating it as empty and retrying every %gs",
                    self.kind,
                    self.info.collection_path(),
                    exc.status,
                    exc,
                    src._missing_retry,
                )
                self.missing_status = exc.status
                src._deliver_replace(self.kind, [])  # listed-empty: readiness proceeds
            else:
                log.debug("listing %s still answers HTTP %d", self.kind, exc.status)
            await asyncio.sleep(src._missing_retry)
            return False
        except ApiError as exc:  # 5xx, no answer, a page that is not a list (anything else: the supervisor's)
            if self.stopped():
                return False
            log.warning("listing %s failed: %s", self.kind, exc)
            src._restarts += 1
            await self.backoff()
            return False
        if self.missing_status is not None:
            log.info("%s can be listed again", self.kind)
            self.missing_status = None
        self.rv = result.resource_version
        self.failures = 0
        items: list[bytes] = result.items  # each filled and encoded as its page arrived
        log.debug("listed %d %s at resourceVersion %s", len(items), self.kind, self.rv)
        src._deliver_replace(self.kind, _decoded(items))
        return True

    async def watch_once(self) -> None:
        """Open one watch from ``self.rv`` and apply its events until it ends.

        Returns normally when the stream ends cleanly.

        Raises:
            Gone: HTTP 410 or an ``ERROR`` event with code 410 (relist).
            NotFound, Forbidden: the watch answered 404/403 (relist after a backoff).
            _WatchError: any other ``ERROR`` event.
            ApiError: other answers, undecodable lines, connection failures.
        """
        src = self.source
        started = time.monotonic()
        lines = 0
        events = src._client.watch(self.path, resource_version=self.rv, timeout_seconds=src._watch_timeout)
        async with contextlib.aclosing(events):
            async for event in events:
                if self.stopped():
                    return
                lines += 1
                self.handle(event)
        if self.stopped():
            return
        if time.monotonic() - started >= HEALTHY_WATCH_SECONDS:
            self.failures = 0
        if lines == 0 and time.monotonic() - started < SHORT_WATCH_SECONDS:
            log.debug("watch of %s ended immediately; waiting before re-watching", self.kind)
            await asyncio.sleep(src._backoff_initial)

    def handle(self, event: WatchEvent) -> None:
        """Apply one watch event.

        Raises:
            Gone: an ``ERROR`` event with code 410.
            _WatchError: any other ``ERROR`` event.
        """
        obj = event.object
        if event.type == "ERROR":
            err = error_from_status(obj)
            if err.status == 410:
                raise err
            raise _WatchError(f"HTTP {err.status}: {obj.get('message') or obj.get('reason') or 'watch error'}")
        meta = obj.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if event.type == "BOOKMARK":
            if rv:
                self.rv = str(rv)
            return
        event_type = EVENT_TYPES.get(event.type)
        if event_type is None:
            log.warning("watch of %s: ignoring event of unknown type %r", self.kind, event.type)
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
    relist on 410; back off on connection errors and 5xx. Each kind runs as an asyncio task on
    the loop that called :meth:`start`; the sink is called on that loop only.

    Args:
        kinds: kinds to watch (keys of :data:`app.api.kinds.KINDS`), default
            :data:`~app.sources.base.WATCHED_KINDS` plus ConfigMap (listed and watched only in the
            namespace :data:`~app.sources.base.WATCH_NAMESPACES` names).
        kubeconfig: kubeconfig path (``None``: default location, see
            :func:`app.client.config.load_configuration`).
        in_cluster: use the pod's service account instead of a kubeconfig.
        client: a ready :class:`~app.client.aio.AsyncClient`; when given, ``kubeconfig`` and
            ``in_cluster`` are ignored and :meth:`stop` leaves it open (its owner closes it).
            Otherwise the source builds one with a pool of one connection per kind plus
            :data:`WRITE_CONNECTIONS`.
        watch_timeout_seconds: server-side ``timeoutSeconds`` of each watch request.
        backoff_initial: first retry delay in seconds after a connection error or 5xx.
        backoff_max: upper bound of the exponential retry delay, in seconds.
        missing_kind_retry_seconds: how often a kind answering 404/403 is listed again.

    Raises:
        ValueError: a kind is not in :data:`app.api.kinds.KINDS`.
        kubernetes.config.ConfigException: no usable client configuration (when ``client`` is not given).
        OSError: the kubeconfig could not be read.
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
        client: AsyncClient | None = None,
        watch_timeout_seconds: int = 300,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        missing_kind_retry_seconds: float = 60.0,
    ) -> None:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown kinds: {', '.join(unknown)}")
        self._kinds: tuple[str, ...] = tuple(dict.fromkeys(kinds))
        self._owns_client = client is None
        if client is None:
            cfg = load_configuration(kubeconfig, in_cluster=in_cluster)
            client = AsyncClient(cfg, max_connections=len(self._kinds) + WRITE_CONNECTIONS)
        self._client: AsyncClient = client
        self._watch_timeout = int(watch_timeout_seconds)
        self._backoff_initial = float(backoff_initial)
        self._backoff_max = float(backoff_max)
        self._missing_retry = float(missing_kind_retry_seconds)
        self._stopped = False
        self._started = False
        self._restarts = 0
        self._synced: set[str] = set()
        self._sink: EventSink | None = None
        self._reflectors: list[_Reflector] = []

    @property
    def client(self) -> AsyncClient:
        """The API client every list, watch and write goes through."""
        return self._client

    @property
    def description(self) -> str:
        """``kubernetes:<host>`` (the API server URL from the configuration)."""
        return f"kubernetes:{self._client.host}"

    async def start(self, sink: EventSink) -> None:
        """Start one reflector task per kind on the running loop.

        Returns immediately; data arrives asynchronously (see :meth:`ready`).

        Raises:
            RuntimeError: the source was already started.
        """
        if self._started:
            raise RuntimeError("KubernetesSource already started")
        self._started = True
        self._sink = sink
        self._reflectors = [_Reflector(self, KINDS[k]) for k in self._kinds]
        for r in self._reflectors:
            r.task = self.loops.spawn(f"reflector-{r.kind}", r.run)
        log.info("watching %d kinds on %s", len(self._kinds), self._client.host)

    async def stop(self, timeout: float = 1.5) -> None:
        """Stop every reflector; returns within about ``timeout`` seconds. Safe to call twice.

        Cancels the reflector tasks (an open watch stream's connection is closed at once), waits
        for them at most ``timeout`` seconds, then closes the client if the source built it.
        Nothing reaches the sink after this returns.
        """
        self._stopped = True
        tasks = [r.task for r in self._reflectors if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            if pending:
                log.debug("reflector tasks still finishing after stop: %s", ", ".join(t.get_name() for t in pending))
        if self._owns_client:
            await self._client.aclose()

    def ready(self) -> bool:
        """True once every kind delivered its first list (404/403 kinds count as empty lists)."""
        return len(self._synced) == len(self._kinds)

    def watch_restarts(self) -> int:
        """Relists and re-watches caused by errors, 410s or dropped streams since start."""
        return self._restarts

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST a ``Binding`` of pod ``namespace/name`` (uid ``uid``) to node ``node``.

        The uid precondition makes the API server refuse the binding if the pod was recreated.

        Raises:
            Conflict: the pod is already bound (``pod x is already assigned to node "y"``) or was recreated.
            NotFound: no such pod (``pods "x" not found``).
            ConnectionFailed: no answer (the message names the pod and the node).
            ApiError: any other refusal; the message is the Status ``message``.
        """
        await self._client.bind(namespace, name, uid, node)

    # -- writes ----------------------------------------------------------------------------------

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
            NotFound: unknown kind or object.
            ApiError: any other refusal, or :class:`~app.client.errors.ConnectionFailed` when no answer came.
        """
        return await self._client.merge_patch(self._object_path(kind, name, namespace), patch, subresource=subresource)

    async def create_or_update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """POST the object; on 409 (exists) GET it and PUT its labels, annotations and spec with the
        current resourceVersion (optimistic concurrency: a conflict is raised, not retried).

        Raises:
            BadRequest: unknown kind or no ``metadata.name``.
            Conflict: the object changed between the GET and the PUT.
            ApiError: any other refusal, or :class:`~app.client.errors.ConnectionFailed` when no answer came.
        """
        info, meta = object_to_store(obj)
        namespace = meta.get("namespace") or ("default" if info.namespaced else None)
        body = {**obj, "apiVersion": info.api_version}
        try:
            return await self._client.create(info.collection_path(namespace), body)
        except Conflict:  # AlreadyExists, or a 409 without a reason
            pass
        path = self._object_path(info.kind, str(meta["name"]), namespace)
        current = await self._client.get(path)
        return await self._client.put(path, updated_object(current, obj))

    async def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        """DELETE the object (foreground garbage collection is left to the API server's default).

        Raises:
            NotFound: unknown kind or object.
            ApiError: any other refusal, or :class:`~app.client.errors.ConnectionFailed` when no answer came.
        """
        await self._client.delete(self._object_path(kind, name, namespace))

    async def evict(self, namespace: str, name: str, uid: str, reason: str) -> None:
        """POST a policy/v1 ``Eviction`` to ``pods/{name}/eviction`` with a uid precondition.

        Raises:
            TooManyRequests: a PodDisruptionBudget blocks it.
            NotFound: the pod is gone.
            ApiError: any other refusal, or :class:`~app.client.errors.ConnectionFailed` when no answer came.
        """
        log.info("evicting pod %s/%s: %s", namespace, name, reason)
        await self._client.evict(namespace, name, uid)

    # -- called by the reflectors, on the loop ---------------------------------------------------

    def _deliver_replace(self, kind: str, items: Iterable[dict[str, Any]]) -> None:
        if self._stopped or self._sink is None:
            return
        try:
            self._sink.replace(kind, items)
        except Exception:  # the sink's bug must not end the reflector; the next relist tries again
            log.exception("the cache refused the list of %s", kind)
            return
        self._synced.add(kind)

    def _deliver_event(self, event: Event) -> None:
        if self._stopped or self._sink is None:
            return
        try:
            self._sink.apply(event)
        except Exception:  # a bad object is rejected alone: the stream goes on
            meta = event.obj.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            log.exception("the cache refused the %s event of %s %s", event.type.value, event.kind, name)


def _decoded(items: list[bytes]) -> Iterator[dict[str, Any]]:
    """The LIST's encoded items decoded one at a time, each dropped from ``items`` as it is handed
    out, so that only the object the cache is taking exists decoded."""
    for i, data in enumerate(items):
        items[i] = b""
        yield decode_object(data)
