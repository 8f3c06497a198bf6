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
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
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


def method_kinds() -> dict[str, tuple[bool, bool]]:
    """``/runtime.v1.<Service>/<Method>`` -> (client streaming, server streaming) of every CRI v1 method."""
    out: dict[str, tuple[bool, bool]] = {}
    for service in cri.DESCRIPTOR.services_by_name.values():
        for m in service.methods:
            out[f"/{service.full_name}/{m.name}"] = (m.client_streaming, m.server_streaming)
    return out


def _forward_metadata(ctx: grpc.ServicerContext) -> list[tuple[str, str | bytes]]:
    return [(k, v) for k, v in ctx.invocation_metadata() if not k.startswith(":") and not k.startswith(_HOP_KEYS)]


def _abort_with(ctx: grpc.ServicerContext, exc: grpc.RpcError) -> None:
    """Answer with the backend's status (code, details, trailing metadata); raises."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    if trailing:
        ctx.set_trailing_metadata(trailing)
    ctx.abort(code, details or "")


class CRIProxy(grpc.GenericRpcHandler):
    """The proxy: a generic handler over a channel to the backend (upstream ``RuntimeManagerCriServer``).

    Args:
        backend: channel to the backend runtime.
        dispatcher: the hook dispatcher.
        options: the flags (hook-server skip label).
        store: the memory of sandboxes and containers (a fresh one by default).
    """

    def __init__(
        self, backend: grpc.Channel, dispatcher: HookDispatcher, options: Options, store: Store | None = None
    ) -> None:
        self.backend = backend
        self.dispatcher = dispatcher
        self.options = options
        self.store = store or Store()
        self.kinds = method_kinds()
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        self._unary: dict[str, grpc.UnaryUnaryMultiCallable] = {}

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
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: self.intercept(name, req, ctx))
        if not client_stream and not server_stream:
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: self._forward_unary(method, req, ctx))
        if not client_stream:
            stub_us = self.backend.unary_stream(method)
            return grpc.unary_stream_rpc_method_handler(
                lambda req, ctx: self._relay(stub_us(req, **self._kw(ctx)), ctx)
            )
        stub_ss = self.backend.stream_stream(method)
        return grpc.stream_stream_rpc_method_handler(lambda reqs, ctx: self._relay(stub_ss(reqs, **self._kw(ctx)), ctx))

    @staticmethod
    def _kw(ctx: grpc.ServicerContext) -> dict[str, Any]:
        # A call without a deadline (kubelet's ImageFsInfo, for one) reports ~2^63 s remaining; passed on as
        # a timeout that overflows into an instant DEADLINE_EXCEEDED, so it is passed on as no deadline.
        remaining = ctx.time_remaining()
        timeout = None if remaining is None or remaining > NO_DEADLINE_SECONDS else remaining
        return {"timeout": timeout, "metadata": _forward_metadata(ctx)}

    def _forward_unary(self, method: str, request: bytes, ctx: grpc.ServicerContext) -> bytes:
        stub = self._unary.get(method)
        if stub is None:
            stub = self._unary[method] = self.backend.unary_unary(method)
        try:
            response, call = stub.with_call(request, **self._kw(ctx))
        except grpc.RpcError as exc:
            _abort_with(ctx, exc)
            raise  # not reached: abort raises
        initial = call.initial_metadata()
        if initial:
            ctx.send_initial_metadata(initial)
        trailing = call.trailing_metadata()
        if trailing:
            ctx.set_trailing_metadata(trailing)
        return bytes(response)

    @staticmethod
    def _relay(call: Any, ctx: grpc.ServicerContext) -> Iterator[bytes]:
        ctx.add_callback(call.cancel)
        try:
            yield from call
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.CANCELLED and not ctx.is_active():
                return
            _abort_with(ctx, exc)

    # -- interception --------------------------------------------------------------------------------
    def intercept(self, path: RuntimeRequestPath, raw: bytes, ctx: grpc.ServicerContext) -> bytes:
        """Pre-hook, merge, backend call, checkpoint, post-hook (``InterceptRuntimeRequest``)."""
        request_type, response_type, pod_level = INTERCEPTED[path]
        method = RUNTIME_SERVICE + path.value
        try:
            request = request_type.FromString(raw)
        except DecodeError as exc:
            log.warning("%s: request does not decode (%s); forwarded unchanged without hooks", path, exc)
            return self._forward_unary(method, raw, ctx)
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
            result = self.dispatcher.dispatch(path, HookStage.PRE, executor.hook_request())
            if result.error is not None:
                log.warning(
                    "%s %s: hook server failed, request sent unchanged: %s", executor.meta_info(), path, result.error
                )
                if result.policy == FailurePolicy.FAIL:
                    ctx.abort(grpc.StatusCode.UNKNOWN, f"hook server err: {result.error}")
            elif result.response is not None:
                original = request_type.FromString(raw)
                executor.update_request(result.response, request)
                if request != original:
                    forward = request.SerializeToString(deterministic=True)
        try:
            answer = self._forward_unary(method, forward, ctx)
        finally:
            # forgotten after StopPodSandbox / StopContainer whatever the backend answered (upstream's defer)
            executor.delete_checkpoint(request)
        try:
            executor.checkpoint(response_type.FromString(answer))
        except DecodeError as exc:
            log.warning("%s %s: answer does not decode (%s); not remembered", executor.meta_info(), path, exc)
        log.debug("%s call containerd %s success", executor.meta_info(), path)
        if operation == CallHookOperation.SHOULD_CALL:
            post = self.dispatcher.dispatch(path, HookStage.POST, executor.hook_request())
            if post.error is not None:
                log.warning("%s %s: post hook failed: %s", executor.meta_info(), path, post.error)
        return answer

    def fail_over(self, timeout: float = 5.0) -> bool:
        """Fill the store from the backend's sandboxes and containers (``failOver``); False (logged) when the
        backend did not answer."""
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
            pods = list_pods(cri.ListPodSandboxRequest(), timeout=timeout)
            containers = list_containers(cri.ListContainersRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            log.warning("backend did not list its sandboxes and containers (%s); serving anyway", exc.code())
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


def backend_channel(endpoint: str) -> grpc.Channel:
    """An insecure channel to a unix socket path (or a ``unix:`` target) with kubelet's 16 MiB message limit and a
    reconnect backoff of at most 1 s: after containerd restarts, calls must reach it again at once, not after
    gRPC's default backoff of up to 120 s (each call meanwhile fails UNAVAILABLE without trying)."""
    target = endpoint if endpoint.startswith("unix:") else f"unix://{endpoint}"
    return grpc.insecure_channel(
        target,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ],
    )


class RuntimeProxyServer:
    """koord runtime-proxy: the gRPC server on the proxy socket, its backend channel and the dispatcher.

    Args:
        options: the flags.
        dispatcher: the hook dispatcher (built from ``options`` by default).

    Raises (``start``): OSError when the socket cannot be created.
    """

    def __init__(self, options: Options, dispatcher: HookDispatcher | None = None) -> None:
        self.options = options
        self.backend = backend_channel(options.remote_runtime_service_endpoint)
        self.dispatcher = dispatcher or HookDispatcher(
            HookConfigManager(options.runtime_hooks_config_path), options.hook_timeout
        )
        self.proxy = CRIProxy(self.backend, self.dispatcher, options)
        self.server: grpc.Server | None = None
        self._stopping = threading.Event()

    def start(self, fail_over_timeout: float = 5.0, retry_every: float = 2.0) -> None:
        """Fill the store from the backend (retried every ``retry_every`` seconds in the background while the
        backend does not answer), remove a stale socket, listen (the socket's dir 0755 as upstream)."""
        if not self.proxy.fail_over(fail_over_timeout):

            def retry() -> None:
                while not self._stopping.wait(retry_every):
                    if self.proxy.fail_over(fail_over_timeout):
                        return

            threading.Thread(target=retry, name="failover", daemon=True).start()
        sock = Path(self.options.runtime_proxy_endpoint)
        sock.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.options.workers, thread_name_prefix="cri"),
            handlers=[self.proxy],
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        if server.add_insecure_port(f"unix://{sock}") == 0:
            raise OSError(f"cannot listen on {sock}")
        server.start()
        self.server = server
        log.info(
            "koord runtime-proxy on %s, backend %s (%s), hook servers from %s",
            sock,
            self.options.remote_runtime_service_endpoint,
            self.options.backend_runtime_mode,
            self.options.runtime_hooks_config_path,
        )

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving (running calls get ``grace`` seconds) and close the channels."""
        self._stopping.set()
        if self.server is not None:
            self.server.stop(grace).wait()
            self.server = None
        self.dispatcher.close()
        self.backend.close()
