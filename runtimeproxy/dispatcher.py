"""Send hook requests to the registered hook servers (upstream ``pkg/runtimeproxy/dispatcher`` and ``client``).

For a CRI call and a stage, the first registration (:mod:`runtimeproxy.config`) that serves a matching hook is
called over its unix socket, with ``timeout`` seconds (upstream has no timeout of its own; here a slow hook server
cannot hold a pod start for longer). The answer, or the error with the registration's failure policy, goes back
to the server, which decides (:meth:`runtimeproxy.server.CRIProxy.intercept`). Every call is counted in
``koord_runtime_proxy_hook_requests_total{hook, result}`` (result ``success`` or the gRPC code of the failure,
e.g. ``UNAVAILABLE`` when the agent is down, ``DEADLINE_EXCEEDED`` when it is slow).

The hook server channels are ``grpc.aio`` channels on the proxy's event loop (:mod:`runtimeproxy.server`):
:meth:`HookDispatcher.dispatch` and :meth:`HookDispatcher.close` are coroutines to await on that loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from prometheus_client import CollectorRegistry, Counter

from app.api.runtime.config import FailurePolicy, HookStage, RuntimeHookType, RuntimeRequestPath
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from runtimeproxy.config import HookConfigManager
from runtimeproxy.options import MAX_MESSAGE_BYTES

log = logging.getLogger("runtimeproxy.dispatcher")

SERVICE = "/runtime.v1alpha1.RuntimeHookService/"

#: Response type of each hook (the request is a PodSandboxHookRequest or a ContainerResourceHookRequest).
RESPONSE_TYPES: dict[RuntimeHookType, Any] = {
    RuntimeHookType.PRE_RUN_POD_SANDBOX: hookapi.PodSandboxHookResponse,
    RuntimeHookType.POST_STOP_POD_SANDBOX: hookapi.PodSandboxHookResponse,
    RuntimeHookType.PRE_CREATE_CONTAINER: hookapi.ContainerResourceHookResponse,
    RuntimeHookType.PRE_START_CONTAINER: hookapi.ContainerResourceHookResponse,
    RuntimeHookType.POST_START_CONTAINER: hookapi.ContainerResourceHookResponse,
    RuntimeHookType.PRE_UPDATE_CONTAINER_RESOURCES: hookapi.ContainerResourceHookResponse,
    RuntimeHookType.POST_STOP_CONTAINER: hookapi.ContainerResourceHookResponse,
}


@dataclass(slots=True)
class DispatchResult:
    """The outcome of one dispatch.

    Attributes:
        response: the hook server's answer (None: no server registered for this hook, or the call failed).
        error: why the call failed (None: it did not).
        policy: the failure policy of the registration called (``""`` when none was called).
        hook: the hook called (None: none).
    """

    response: Any = None
    error: str | None = None
    policy: FailurePolicy = FailurePolicy.NONE
    hook: RuntimeHookType | None = None


class HookDispatcher:
    """Dispatches hook requests (``RuntimeHookDispatcher``).

    Args:
        configs: the registrations.
        timeout: seconds per hook call.
        registry: where the request counter lives (a fresh registry by default).
    """

    def __init__(self, configs: HookConfigManager, timeout: float, registry: CollectorRegistry | None = None) -> None:
        self.configs = configs
        self.timeout = timeout
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "koord_runtime_proxy_hook_requests",
            "Hook calls of koord runtime-proxy by hook and result (success, or the gRPC code of the failure).",
            ["hook", "result"],
            registry=self.registry,
        )
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[str, RuntimeHookType], grpc.aio.UnaryUnaryMultiCallable[Any, Any]] = {}

    def _stub(self, endpoint: str, hook: RuntimeHookType) -> grpc.aio.UnaryUnaryMultiCallable[Any, Any]:
        """The call of ``hook`` at ``endpoint``, on a channel made once per endpoint (on the running loop)."""
        stub = self._stubs.get((endpoint, hook))
        if stub is not None:
            return stub
        ch = self._channels.get(endpoint)
        if ch is None:
            target = endpoint if endpoint.startswith("unix:") else f"unix://{endpoint}"
            ch = self._channels[endpoint] = grpc.aio.insecure_channel(
                target,
                options=[
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                    # a hook server that restarts must be found again at once, not after a backoff
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1000),
                ],
            )
        stub = self._stubs[(endpoint, hook)] = ch.unary_unary(
            SERVICE + hook.rpc,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=RESPONSE_TYPES[hook].FromString,
        )
        return stub

    async def dispatch(self, path: RuntimeRequestPath, stage: HookStage, request: Any) -> DispatchResult:
        """Call the first registered hook server serving ``path`` at ``stage`` (``Dispatch``); never raises."""
        for config in self.configs.all_hooks():
            hook = config.hook_for(path, stage)
            if hook is None:
                continue
            call = self._stub(config.remote_endpoint, hook)
            try:
                response = await call(request, timeout=self.timeout)
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else None
                name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
                self.requests.labels(hook=hook.value, result=name).inc()
                details = exc.details() if hasattr(exc, "details") else str(exc)
                return DispatchResult(
                    None, f"{hook.rpc} at {config.remote_endpoint}: {name}: {details}", config.failure_policy, hook
                )
            self.requests.labels(hook=hook.value, result="success").inc()
            return DispatchResult(response, None, config.failure_policy, hook)
        return DispatchResult()

    def failures(self) -> float:
        """Hook calls that failed so far, all hooks together."""
        total = 0.0
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.labels.get("result") not in (None, "success"):
                    total += sample.value
        return total

    async def close(self) -> None:
        """Close the hook server channels (on the loop they were made on)."""
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        for ch in channels:
            await ch.close()
