"""The application factory: ``create_app(source, config)``.

Nothing is created at import time. The factory builds the snapshot cache and the framework
(invalid plugin args fail here, before serving); the lifespan starts the source and the service's
loops (assumed-pod expiry, the plugins' background work, the background tasks, the Lease follower),
each supervised by the one :class:`~app.sources.loops.LoopSupervisor` of the service (restarted after a
failure, and named by ``/readyz`` while down), and stops them on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import gc
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from app.cache.snapshot import DEFAULT_ASSUMED_POD_TTL, ClusterCache
from app.framework.config import SchedulerConfig, default_config
from app.framework.handle import Handle
from app.framework.interfaces import BackgroundPlugin
from app.framework.registry import Registry
from app.framework.runtime import Framework
from app.plugins.registry import default_registry
from app.server import extender_routes, health_routes, inspect_routes, snapshot_routes, ui_routes
from app.server.bodylimit import install_body_limit
from app.server.clientauth import ClientAuth, ClientAuthMiddleware
from app.server.extender import ExtenderService
from app.server.extender_routes import VERBS, InlineVerbs, VerbFastPath
from app.server.inspectauth import InspectionAccess, InspectionGuard, certificate_access
from app.server.metrics import ServiceMetrics
from app.server.state import ServiceState
from app.server.webhook_routes import install_webhooks
from app.server.wire import error_response
from app.sources.base import Source
from app.sources.leaderlease import LeaseFollower
from app.sources.loops import LoopSupervisor
from webhooks.registry import all_webhooks
from webhooks.webhook import WebhookContext

log = logging.getLogger(__name__)

#: A service-lifetime task started with the app (e.g. the embedded manager controllers): it gets
#: the service state and runs until cancelled, supervised (:mod:`app.sources.loops`) under the name
#: :func:`loop_name` gives it; after a failure it is called again.
BackgroundTask = Callable[[ServiceState], Coroutine[Any, Any, None]]


def loop_name(task: BackgroundTask) -> str:
    """The supervised loop name of a background task: its ``__name__`` with dashes (``run_embedded_controllers``
    -> ``run-embedded-controllers``); ``background`` for a nameless callable."""
    return str(getattr(task, "__name__", "background")).strip("_<>").replace("_", "-") or "background"


#: Seconds between sweeps of expired assumed pods.
EXPIRY_SWEEP_SECONDS = 1.0

#: Default request body limit in bytes (256 MiB). The largest body the service is sent is
#: kube-scheduler's ExtenderArgs with ``nodeCacheCapable: false``: a full NodeList. A captured v1.26
#: kind node is 1.9 KB and a production node with ~50 cached images and managedFields about 20 KB,
#: so 5,000 nodes come to roughly 10-100 MB; 256 MiB leaves more than twice the worst of that while
#: refusing a runaway or hostile body before it is read into memory.
DEFAULT_MAX_REQUEST_BODY_BYTES = 256 * 1024 * 1024

#: Allocations between two young-generation collections once the first load is in (CPython's
#: default is 700). Each scheduled pod allocates thousands of short-lived objects (decoded request
#: bodies, watch events), nearly all freed by reference counting; at 700 the collector ran several
#: times per pod for nothing. 20,000 measured ~5 % less CPU per pod (bench/cycle.py, 500 nodes).
GC_YOUNG_THRESHOLD = 20_000

#: What one process serves (``koord scheduler --role``). Every role serves health and metrics; ``all`` is the
#: single-process default.
#: - ``extender``: the kube-scheduler extender verbs (/filter /prioritize /preempt /bind), the plugins'
#:   background work (e.g. the ElasticQuota status writer) and inspection (``/apis/v1/...``, ``/ui``); no
#:   webhook routes.
#: - ``webhooks``: the admission webhooks only, no inspection (its port is open to the network for the API
#:   server; nothing needs the cluster's state there). It binds nothing and runs no background plugin or
#:   controller, so any number of replicas can serve behind one Service without writing anything.
ROLES = ("all", "extender", "webhooks")


class UnknownRole(ValueError):
    """``role`` is not one of :data:`ROLES`; the message lists the allowed ones."""

    def __init__(self, role: str) -> None:
        super().__init__(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")


def serves_extender(role: str) -> bool:
    """Whether a process of ``role`` serves the extender verbs and runs the plugins' background work."""
    return role in ("all", "extender")


def serves_inspection(role: str) -> bool:
    """Whether a process of ``role`` serves inspection (``/apis/v1/...``) and the ``/ui`` page."""
    return role in ("all", "extender")


def serves_webhooks(role: str) -> bool:
    """Whether a process of ``role`` serves the admission webhooks."""
    return role in ("all", "webhooks")


def build_state(
    source: Source,
    config: SchedulerConfig | None = None,
    *,
    registry: Registry | None = None,
    cache: ClusterCache | None = None,
    assumed_pod_ttl: float = DEFAULT_ASSUMED_POD_TTL,
    leading: Callable[[], bool] | None = None,
) -> ServiceState:
    """Wire cache, framework, extender logic and metrics for ``source``.

    Raises:
        ConfigError: a plugin's args are invalid.
    """
    cache = cache or ClusterCache(assumed_pod_ttl=assumed_pod_ttl)
    registry = registry or default_registry()
    handle = Handle(cache, client=source, synced=source.ready, leading=leading)
    framework = Framework(config or default_config(registry.names()), registry, handle)
    extender = ExtenderService(cache, framework, source)
    metrics = ServiceMetrics(cache, lambda: source, extender.rejections, framework.plugins, extender.ahead_outcomes)
    loops = LoopSupervisor()
    source.loops = loops  # the source's loops (file poll, reflectors) run under the service's supervisor
    return ServiceState(cache, framework, source, extender, metrics, loops)


def create_app(
    source: Source,
    config: SchedulerConfig | None = None,
    *,
    registry: Registry | None = None,
    cache: ClusterCache | None = None,
    assumed_pod_ttl: float = DEFAULT_ASSUMED_POD_TTL,
    background: list[BackgroundTask] | None = None,
    max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_BYTES,
    client_auth: ClientAuth | None = None,
    role: str = "all",
    leader: LeaseFollower | None = None,
    inspection: InspectionAccess | None = None,
) -> FastAPI:
    """Build the FastAPI app serving the extender, webhooks, inspection, health and metrics endpoints.

    Args:
        source: where cluster objects come from and bindings go.
        config: enabled plugins and their args (default: every plugin of ``registry``, in its order).
        registry: plugin factories (default: the in-tree plugins).
        cache: an existing cache (tests); a new one otherwise.
        assumed_pod_ttl: seconds an unconfirmed assumed pod is kept after binding.
        background: extra tasks run for the app's lifetime (each gets the service state).
        max_request_body_bytes: larger request bodies are refused with HTTP 413 and a JSON
            ``{"message": ...}`` naming the limit, before more than the limit is read.
        client_auth: who may call the extender verbs and the webhooks (client certificates, checked by
            :class:`~app.server.clientauth.ClientAuthMiddleware`); None lets anyone call them. The
            server must verify client certificates against the CA and use
            :class:`~app.server.clientauth.TLSScopeProtocol`.
        role: which routes and background work this process has (:data:`ROLES`).
        leader: the kube-scheduler Lease to follow; background plugins write only while it says we
            lead (polled for the app's lifetime). None: this replica always leads.
        inspection: who may read the cluster's state (``/apis/v1/...``, ``/ui``, ``/metrics``;
            :mod:`app.server.inspectauth`). None: with ``client_auth``, a client certificate of the CA whose CN
            is in its ``inspection_names`` (empty: any); without, open.

    Raises:
        ConfigError: a plugin's args are invalid.
        UnknownRole: ``role`` is not one of :data:`ROLES`.
    """
    if role not in ROLES:
        raise UnknownRole(role)
    state = build_state(
        source,
        config,
        registry=registry,
        cache=cache,
        assumed_pod_ttl=assumed_pod_ttl,
        leading=leader.leading if leader is not None else None,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await source.start(state.cache)
        loops = state.loops
        tasks = [
            loops.spawn("assumed-pod-expiry", lambda: _sweep_expired(state.cache)),
            loops.spawn("gc-freeze-after-load", lambda: freeze_after_load(source), once=True),
        ]
        if serves_extender(role):
            tasks += [
                loops.spawn(f"plugin-{p.name}", p.run_background)
                for p in state.framework.plugins
                if isinstance(p, BackgroundPlugin)
            ]
        for task in background or []:
            base = name = loop_name(task)
            n = 1
            while name in loops.loops:  # two tasks of one name: the second is <name>-2
                n += 1
                name = f"{base}-{n}"
            tasks.append(loops.spawn(name, functools.partial(task, state)))
        if leader is not None:
            tasks.append(loops.spawn("leader-lease", leader.run))
        log.info(
            "serving role %s from %s with plugins %s",
            role,
            source.description,
            [p.name for p in state.framework.plugins],
        )
        try:
            yield
        finally:
            await loops.cancel(tasks)
            await source.stop()

    app = ServiceApp(
        title="Koordinator-Py scheduler extender",
        description="kube-scheduler extender (filter/prioritize/preempt/bind) with Koordinator semantics.",
        version="0.1.0",
        lifespan=lifespan,
        # FastAPI's /docs and /redoc load their scripts from a CDN, which air-gapped clusters cannot reach:
        # both are off. /openapi.json stays (plain JSON); /ui is the page, served from the package.
        docs_url=None,
        redoc_url=None,
    )
    install_body_limit(app, max_request_body_bytes)
    app.state.service = state

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_: Request, exc: RequestValidationError) -> Response:
        err = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in err.get("loc", ()))
        return error_response(f"{loc}: {err.get('msg', 'invalid request')}", 400)

    if serves_extender(role):
        app.include_router(extender_routes.router)
    if serves_inspection(role):
        app.include_router(inspect_routes.router)
        app.include_router(snapshot_routes.router)
        app.include_router(ui_routes.router)
        inspect_routes.install_plugin_routes(app, state)
    app.include_router(health_routes.router)
    app.state.role = role
    app.state.webhook_context = WebhookContext(state.cache, source)
    hooks = all_webhooks()
    if serves_webhooks(role):
        install_webhooks(app, hooks, app.state.webhook_context)
    rules = client_auth.rules(VERBS, [hook.path for hook in hooks]) if client_auth is not None else None
    if rules is not None:
        app.add_middleware(ClientAuthMiddleware, rules=rules)
    if inspection is None and client_auth is not None:
        inspection = certificate_access(client_auth.inspection_names)
    if inspection is not None:
        app.add_middleware(InspectionGuard, access=inspection, metrics_only=not serves_inspection(role))
    if serves_extender(role):
        front: ASGIApp = VerbFastPath(app.stack_call, state=state, max_body_size=max_request_body_bytes)
        app.verb_front = ClientAuthMiddleware(front, rules=rules) if rules is not None else front
        app.inline_verbs = InlineVerbs(state, max_request_body_bytes, rules)
    return app


class ServiceApp(FastAPI):
    """The service's FastAPI application, whose extender verbs skip FastAPI's middleware stack.

    ``POST /filter``, ``/prioritize``, ``/preempt`` and ``/bind`` (the paths of
    :data:`~app.server.extender_routes.VERBS`) go straight to :attr:`verb_front`, the client-certificate
    check (when configured) in front of :class:`~app.server.extender_routes.VerbFastPath`; every other
    request, and the lifespan, takes the usual way (:meth:`stack_call`). kube-scheduler calls the
    verbs three times per pod, and the middleware layers (server errors, telemetry, two body limits)
    cost tens of microseconds of CPU per call for nothing the fast path does not do itself (issue 13).
    """

    #: The verbs' ASGI app, set by :func:`create_app` for roles that serve the extender; None: no verbs.
    verb_front: ASGIApp | None = None
    #: The verbs :class:`~app.server.httpprotocol.ServiceProtocol` answers without an ASGI cycle, set with
    #: :attr:`verb_front`; None: none.
    inline_verbs: InlineVerbs | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a verb call through :attr:`verb_front`, anything else through :meth:`stack_call`."""
        front = self.verb_front
        if front is not None and scope["type"] == "http" and scope["path"] in VERBS:
            await front(scope, receive, send)
            return
        await self.stack_call(scope, receive, send)

    async def stack_call(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's own handling of a request: the middleware stack, then the routes."""
        await super().__call__(scope, receive, send)


async def freeze_after_load(source: Source) -> None:
    """Once the first full load is in, move every object to the GC's permanent generation, raise
    the young generation's threshold to :data:`GC_YOUNG_THRESHOLD` and trim the heap.

    The snapshot holds millions of long-lived objects; without this, full collections walk them
    all and pause request handling (seen as ~0.9 s stalls with 5,000 full Nodes). Frozen objects
    are still freed by reference counting when the cache drops them.
    """
    while not source.ready():
        await asyncio.sleep(0.1)
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
    release_free_heap()
    log.debug("initial load complete: %d objects moved to the permanent GC generation", gc.get_freeze_count())


def release_free_heap() -> bool:
    """Hand the C heap's free pages back to the OS (glibc ``malloc_trim(0)``); False where unavailable.

    The first full load decodes every LIST page (and their managedFields, dropped at once) before
    the cache keeps the parts it needs: hundreds of MB freed but still resident in glibc's heap,
    counted in RSS until reused. Trimming once after the load returns them.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return False


async def _sweep_expired(cache: ClusterCache) -> None:
    while True:
        await asyncio.sleep(EXPIRY_SWEEP_SECONDS)
        cache.cleanup_expired()
