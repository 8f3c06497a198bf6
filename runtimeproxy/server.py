"""The CRI server of koord runtime-proxy (upstream ``pkg/runtimeproxy/server/cri/criserver.go``).

Every call on the proxy socket is forwarded to the backend runtime as raw bytes by generic handlers (as
upstream's ``grpc-proxy`` TransparentHandler): the request and the answer are never decoded, so what kubelet
and containerd exchange is byte-identical, for methods this proto does not know as well (they are
forwarded as bidirectional streams, which carry unary and streaming calls alike). Metadata, deadline, status
code and details travel both ways.

Six calls are intercepted (:meth:`CRIProxy.intercept`, upstream ``InterceptRuntimeRequest``): RunPodSandbox,
StopPodSandbox, CreateContainer, StartContainer, UpdateContainerResources and StopContainer. The request is
decoded, the hook server's pre-hook called and its answer merged (:mod:`runtimeproxy.resexecutor`); only when the
merge changed the request is it encoded again, else the original bytes go on. Then the backend is called, the
sandbox / container remembered, and the post-hook called. A hook server that is down, slow or wrong leaves the
request unchanged (logged, counted), unless its registration says ``failure-policy: Fail``.

At start the store is filled from the backend's ListPodSandbox / ListContainers (``failOver``); a backend that
does not answer yet is logged and asked again every 2 s in the background, and the proxy serves meanwhile (calls
fail with the backend's UNAVAILABLE until it is up; kubelet retries).

Everything runs on one asyncio event loop (``grpc.aio``): the server, the backend channel and the hook server
channels (:mod:`runtimeproxy.dispatcher`). The synchronous ``grpc.server`` it replaces handed every call from
gRPC's poller thread to a worker thread, whose blocking backend call woke it again from the channel: on a node
where kubelet polls ListPodSandbox / ListContainers every second, those thread switches were most of the proxy's
idle cpu (1.18 % of a core beside a real kubelet with 20 pods). :class:`RuntimeProxyServer` runs on the caller's
loop (``koord runtime-proxy``: the main thread's) or, through ``start`` / ``stop``, on a loop in a thread of its
own (tests, the bench).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NoReturn

import grpc
import grpc.aio
from google.protobuf.message import DecodeError

from app.api.runtime.config import FailurePolicy, HookStage, RuntimeRequestPath
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from runtimeproxy.config import HookConfigManager
from runtimeproxy.cri.v1 import api_pb2 as cri
from runtimeproxy.dispatcher import HookDispatcher
from runtimeproxy.options import MAX_MESSAGE_BYTES, Options
from runtimeproxy.resexecutor import (
    CallHookOperation,
    ContainerResourceExecutor,
    ExecutorError,
    PodResourceExecutor,
    sandbox_hook_request,
)
from runtimeproxy.store import Store

#: A deadline further away than this (ten years) is a call without one (see :meth:`CRIProxy._kw`).
NO_DEADLINE_SECONDS = 10 * 365 * 24 * 3600.0

log = logging.getLogger("runtimeproxy")

RUNTIME_SERVICE = "/runtime.v1.RuntimeService/"

#: Intercepted methods: (request type, response type, executor is the pod one).
INTERCEPTED: dict[str, tuple[Any, Any, bool]] = {
    RuntimeRequestPath.RUN_POD_SANDBOX: (cri.RunPodSandboxRequest, cri.RunPodSandboxResponse, True),
    RuntimeRequestPath.STOP_POD_SANDBOX: (cri.StopPodSandboxRequest, cri.StopPodSandboxResponse, True),
    RuntimeRequestPath.CREATE_CONTAINER: (cri.CreateContainerRequest, cri.CreateContainerResponse, False),
    RuntimeRequestPath.START_CONTAINER: (cri.StartContainerRequest, cri.StartContainerResponse, False),
    RuntimeRequestPath.UPDATE_CONTAINER_RESOURCES: (
        cri.UpdateContainerResourcesRequest,
        cri.UpdateContainerResourcesResponse,
        False,
    ),
    RuntimeRequestPath.STOP_CONTAINER: (cri.StopContainerRequest, cri.StopContainerResponse, False),
}

#: Metadata keys not forwarded (set by each hop's own gRPC library).
_HOP_KEYS = ("user-agent", "content-type", "te", "grpc-")

#: Channel options toward the backend: kubelet's 16 MiB message limit, and a reconnect backoff of at most 1 s.
_BACKEND_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def method_kinds() -> dict[str, tuple[bool, bool]]:
    """``/runtime.v1.<Service>/<Method>`` -> (client streaming, server streaming) of every CRI v1 method."""
    out: dict[str, tuple[bool, bool]] = {}
    for service in cri.DESCRIPTOR.services_by_name.values():
        for m in service.methods:
            out[f"/{service.full_name}/{m.name}"] = (m.client_streaming, m.server_streaming)
    return out


def _forward_metadata(ctx: grpc.aio.ServicerContext[Any, Any]) -> list[tuple[str, str | bytes]]:
    return [(k, v) for k, v in ctx.invocation_metadata() or () if not k.startswith(":") and not k.startswith(_HOP_KEYS)]


async def _abort_with(ctx: grpc.aio.ServicerContext[Any, Any], exc: grpc.RpcError) -> NoReturn:
    """Answer with the backend's status (code, details, trailing metadata); raises (``AbortError``)."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    await ctx.abort(code, details or "", tuple(trailing) if trailing else ())
    raise AssertionError("not reached: abort raises")  # pragma: no cover


class CRIProxy(grpc.GenericRpcHandler):
    """The proxy: a generic handler over an asyncio channel to the backend (upstream ``RuntimeManagerCriServer``).

    Its handlers are coroutines (unary) and async generators (streams) for ``grpc.aio.server``; build it on
    the loop that serves it.

    Args:
        backend: ``grpc.aio`` channel to the backend runtime.
        dispatcher: the hook dispatcher.
        options: the flags (hook-server skip label).
        store: the memory of sandboxes and containers (a fresh one by default).
    """

    def __init__(
        self, backend: grpc.aio.Channel, dispatcher: HookDispatcher, options: Options, store: Store | None = None
    ) -> None:
        self.backend = backend
        self.dispatcher = dispatcher
        self.options = options
        self.store = store or Store()
        self.kinds = method_kinds()
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        self._unary: dict[str, grpc.aio.UnaryUnaryMultiCallable[Any, Any]] = {}
        self._debug = log.isEnabledFor(logging.DEBUG)

    # -- generic pass-through ----------------------------------------------------------------------
    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        """The handler of a method: intercepted, unary, server-streaming or (unknown methods) bidirectional."""
        method: str = handler_call_details.method
        handler = self._handlers.get(method)
        if handler is None:
            handler = self._make_handler(method)
            self._handlers[method] = handler
        return handler

    def _make_handler(self, method: str) -> grpc.RpcMethodHandler:
        client_stream, server_stream = self.kinds.get(method, (True, True))
        if method.startswith(RUNTIME_SERVICE) and method[len(RUNTIME_SERVICE) :] in INTERCEPTED:
            name = RuntimeRequestPath(method[len(RUNTIME_SERVICE) :])

            async def intercepted(req: bytes, ctx: grpc.aio.ServicerContext[Any, Any]) -> bytes:
                return await self.intercept(name, req, ctx)

            return grpc.unary_unary_rpc_method_handler(intercepted)
        if not client_stream and not server_stream:

            async def unary(req: bytes, ctx: grpc.aio.ServicerContext[Any, Any]) -> bytes:
                return await self._forward_unary(method, req, ctx)

            return grpc.unary_unary_rpc_method_handler(unary)
        # (grpc.aio runs a handler on its loop only when it is a coroutine or async generator function; any
        # other callable would go to a thread pool, with blocking request iterators)
        if not client_stream:
            stub_us = self.backend.unary_stream(method)

            async def server_streaming(req: bytes, ctx: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
                async for message in self._relay(stub_us(req, **self._kw(ctx)), ctx):
                    yield message

            return grpc.unary_stream_rpc_method_handler(server_streaming)
        stub_ss = self.backend.stream_stream(method)

        async def bidi(reqs: AsyncIterator[bytes], ctx: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
            async for message in self._relay(stub_ss(reqs, **self._kw(ctx)), ctx):
                yield message

        return grpc.stream_stream_rpc_method_handler(bidi)

    @staticmethod
    def _kw(ctx: grpc.aio.ServicerContext[Any, Any]) -> dict[str, Any]:
        # A call without a deadline (kubelet's ImageFsInfo, for one) reports ~2^63 s remaining; passed on as
        # a timeout that overflows into an instant DEADLINE_EXCEEDED, so it is passed on as no deadline.
        remaining = ctx.time_remaining()
        timeout = None if remaining is None or remaining > NO_DEADLINE_SECONDS else remaining
        return {"timeout": timeout, "metadata": _forward_metadata(ctx)}

    async def _forward_unary(self, method: str, request: bytes, ctx: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        stub = self._unary.get(method)
        if stub is None:
            stub = self._unary[method] = self.backend.unary_unary(method)
        call = stub(request, **self._kw(ctx))
        try:
            response = await call
            initial = await call.initial_metadata()
            trailing = await call.trailing_metadata()
        except grpc.RpcError as exc:
            await _abort_with(ctx, exc)
        if initial:
            await ctx.send_initial_metadata(tuple(initial))
        if trailing:
            ctx.set_trailing_metadata(tuple(trailing))
        return bytes(response)

    @staticmethod
    async def _relay(call: Any, ctx: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        # the backend call is cancelled when kubelet goes away (this generator is closed or cancelled)
        try:
            async for message in call:
                yield message
        except grpc.RpcError as exc:
            await _abort_with(ctx, exc)
        finally:
            call.cancel()

    # -- interception --------------------------------------------------------------------------------
    async def intercept(self, path: RuntimeRequestPath, raw: bytes, ctx: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        """Pre-hook, merge, backend call, checkpoint, post-hook (``InterceptRuntimeRequest``)."""
        request_type, response_type, pod_level = INTERCEPTED[path]
        method = RUNTIME_SERVICE + path.value
        try:
            request = request_type.FromString(raw)
        except DecodeError as exc:
            log.warning("%s: request does not decode (%s); forwarded unchanged without hooks", path, exc)
            return await self._forward_unary(method, raw, ctx)
        executor: PodResourceExecutor | ContainerResourceExecutor
        skip = (self.options.runtime_hook_server_key, self.options.runtime_hook_server_val)
        executor = PodResourceExecutor(self.store, *skip) if pod_level else ContainerResourceExecutor(self.store, *skip)
        try:
            operation: CallHookOperation | None = executor.parse_request(path, request)
        except ExecutorError as exc:
            # routine: kubelet repeats StopContainer / StopPodSandbox, and the first one forgot the id
            log.debug("%s: %s; no hook called", path, exc)
            operation = None
        forward = raw
        if operation == CallHookOperation.SHOULD_CALL:
            result = await self.dispatcher.dispatch(path, HookStage.PRE, executor.hook_request())
            if result.error is not None:
                log.warning(
                    "%s %s: hook server failed, request sent unchanged: %s", executor.meta_info(), path, result.error
                )
                if result.policy == FailurePolicy.FAIL:
                    await ctx.abort(grpc.StatusCode.UNKNOWN, f"hook server err: {result.error}")
            elif result.response is not None:
                original = request_type.FromString(raw)
                executor.update_request(result.response, request)
                if request != original:
                    forward = request.SerializeToString(deterministic=True)
        try:
            answer = await self._forward_unary(method, forward, ctx)
        finally:
            # forgotten after StopPodSandbox / StopContainer whatever the backend answered (upstream's defer)
            executor.delete_checkpoint(request)
        try:
            executor.checkpoint(response_type.FromString(answer))
        except DecodeError as exc:
            log.warning("%s %s: answer does not decode (%s); not remembered", executor.meta_info(), path, exc)
        if self._debug:
            log.debug("%s call containerd %s success", executor.meta_info(), path)
        if operation == CallHookOperation.SHOULD_CALL:
            post = await self.dispatcher.dispatch(path, HookStage.POST, executor.hook_request())
            if post.error is not None:
                log.warning("%s %s: post hook failed: %s", executor.meta_info(), path, post.error)
        return answer

    async def fail_over(self, timeout: float = 5.0) -> bool:
        """Fill the store from the backend's sandboxes and containers (``failOver``); False (logged) when the
        backend did not answer within ``timeout`` seconds per list."""
        list_pods = self.backend.unary_unary(
            RUNTIME_SERVICE + "ListPodSandbox",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=cri.ListPodSandboxResponse.FromString,
        )
        list_containers = self.backend.unary_unary(
            RUNTIME_SERVICE + "ListContainers",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=cri.ListContainersResponse.FromString,
        )
        try:
            pods = await list_pods(cri.ListPodSandboxRequest(), timeout=timeout)
            containers = await list_containers(cri.ListContainersRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            log.warning("backend did not list its sandboxes and containers (%s); serving anyway", code)
            return False
        for p in pods.items:
            cfg = cri.PodSandboxConfig(metadata=p.metadata, labels=p.labels, annotations=p.annotations)
            self.store.write_pod(p.id, sandbox_hook_request(cfg, p.runtime_handler))
        for c in containers.containers:
            pod = self.store.pod(c.pod_sandbox_id)
            if pod is None:
                log.info("container %s: sandbox %s unknown; not remembered", c.id, c.pod_sandbox_id)
                continue
            info = hookapi.ContainerResourceHookRequest(
                pod_meta=pod.pod_meta,
                container_meta=hookapi.ContainerMetadata(name=c.metadata.name, attempt=c.metadata.attempt, id=c.id),
                container_annotations=dict(c.annotations),
                pod_annotations=dict(pod.annotations),
                pod_labels=dict(pod.labels),
                pod_cgroup_parent=pod.cgroup_parent,
            )
            self.store.write_container(c.id, info)
        sizes = self.store.sizes()
        log.info("failover: %d sandboxes and %d containers remembered from the backend", *sizes)
        return True


def unix_target(endpoint: str) -> str:
    """A unix socket path (or a ``unix:`` target) as a gRPC target."""
    return endpoint if endpoint.startswith("unix:") else f"unix://{endpoint}"


def backend_channel(endpoint: str) -> grpc.aio.Channel:
    """An insecure ``grpc.aio`` channel (bound to the running loop) to a unix socket path (or a ``unix:`` target)
    with kubelet's 16 MiB message limit and a reconnect backoff of at most 1 s: after containerd restarts, calls
    must reach it again at once, not after gRPC's default backoff of up to 120 s (each call meanwhile fails
    UNAVAILABLE without trying)."""
    return grpc.aio.insecure_channel(unix_target(endpoint), options=_BACKEND_OPTIONS)


class RuntimeProxyServer:
    """koord runtime-proxy: the ``grpc.aio`` server on the proxy socket, its backend channel and the dispatcher.

    On a running loop: ``await start_async()`` ... ``await stop_async()`` (``koord runtime-proxy``). From
    synchronous code: ``start()`` ... ``stop()``, which run the same on a loop in a thread of its own.

    Args:
        options: the flags.
        dispatcher: the hook dispatcher (built from ``options`` by default).

    Attributes:
        store: the sandboxes and containers remembered (filled at start, then by the intercepted calls).
        proxy: the handler (None before start).

    Raises (``start`` / ``start_async``): OSError when the socket cannot be created.
    """

    def __init__(self, options: Options, dispatcher: HookDispatcher | None = None) -> None:
        self.options = options
        self.dispatcher = dispatcher or HookDispatcher(
            HookConfigManager(options.runtime_hooks_config_path), options.hook_timeout
        )
        self.store = Store()
        self.proxy: CRIProxy | None = None
        self.server: grpc.aio.Server | None = None
        self._backend: grpc.aio.Channel | None = None
        self._retry: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def start_async(self, fail_over_timeout: float = 5.0, retry_every: float = 2.0) -> None:
        """On the running loop: fill the store from the backend (retried every ``retry_every`` seconds in the
        background while the backend does not answer), remove a stale socket, listen (the socket's dir 0755 as
        upstream)."""
        self._backend = backend_channel(self.options.remote_runtime_service_endpoint)
        proxy = self.proxy = CRIProxy(self._backend, self.dispatcher, self.options, self.store)
        if not await proxy.fail_over(fail_over_timeout):

            async def retry() -> None:
                while True:
                    await asyncio.sleep(retry_every)
                    if await proxy.fail_over(fail_over_timeout):
                        return

            self._retry = asyncio.get_running_loop().create_task(retry(), name="failover")
        sock = Path(self.options.runtime_proxy_endpoint)
        sock.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
        server = grpc.aio.server(
            handlers=[proxy],
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        if server.add_insecure_port(f"unix://{sock}") == 0:
            raise OSError(f"cannot listen on {sock}")
        await server.start()
        self.server = server
        log.info(
            "koord runtime-proxy on %s, backend %s (%s), hook servers from %s",
            sock,
            self.options.remote_runtime_service_endpoint,
            self.options.backend_runtime_mode,
            self.options.runtime_hooks_config_path,
        )

    async def stop_async(self, grace: float | None = 1.0) -> None:
        """On the serving loop: stop serving (running calls get ``grace`` seconds), stop the fail-over retries
        and close the channels."""
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry
            self._retry = None
        if self.server is not None:
            await self.server.stop(grace)
            self.server = None
        await self.dispatcher.close()
        if self._backend is not None:
            await self._backend.close()
            self._backend = None

    def start(self, fail_over_timeout: float = 5.0, retry_every: float = 2.0) -> None:
        """:meth:`start_async` on a new event loop in a daemon thread (``koord-runtime-proxy-loop``); returns once
        serving. Raises what ``start_async`` raises (the thread is then stopped)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="koord-runtime-proxy-loop", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            asyncio.run_coroutine_threadsafe(self.start_async(fail_over_timeout, retry_every), loop).result()
        except BaseException:
            self._close_loop()
            raise

    def stop(self, grace: float | None = 1.0) -> None:
        """:meth:`stop_async` on the loop ``start`` made, then end that loop and its thread."""
        if self._loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.stop_async(grace), self._loop).result()
        finally:
            self._close_loop()

    def _close_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop, self._thread = None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
