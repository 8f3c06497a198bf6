"""A fake CRI backend and a fake hook server, each a real gRPC server on a unix socket under the test's tmp_path."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from agent.cgroups import CgroupLayout
from agent.metriccache import MetricCache
from agent.qos.context import QoSContext
from agent.qos.cpuset import CPUSetRule
from agent.runtimehooks.freshpods import FreshPods
from agent.states.pods import PodMeta
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from app.api.runtime.v1alpha1 import api_pb2_grpc as hookgrpc
from app.api.slo import NodeSLOSpec
from runtimeproxy.cri.v1 import api_pb2 as cri

RS = "/runtime.v1.RuntimeService/"
IS = "/runtime.v1.ImageService/"


class FakeCRI(grpc.GenericRpcHandler):
    """Records every call as (method, raw request bytes, metadata) and answers canned raw bytes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, dict[str, str]]] = []
        self.answers: dict[str, bytes] = {
            RS + "Version": cri.VersionResponse(
                version="0.1.0", runtime_name="fake", runtime_api_version="v1"
            ).SerializeToString(),
            RS + "RunPodSandbox": cri.RunPodSandboxResponse(pod_sandbox_id="sb-1").SerializeToString(),
            RS + "CreateContainer": cri.CreateContainerResponse(container_id="ctr-1").SerializeToString(),
            RS + "ListPodSandbox": cri.ListPodSandboxResponse().SerializeToString(),
            RS + "ListContainers": cri.ListContainersResponse().SerializeToString(),
        }

    def _record(self, method: str, raw: bytes, ctx: grpc.ServicerContext) -> None:
        self.calls.append((method, raw, {k: str(v) for k, v in ctx.invocation_metadata()}))

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = details.method  # type: ignore[attr-defined]
        if method == RS + "GetContainerEvents":

            def events(raw: bytes, ctx: grpc.ServicerContext) -> Iterator[bytes]:
                self._record(method, raw, ctx)
                for i in range(3):
                    yield cri.ContainerEventResponse(container_id=f"c{i}").SerializeToString()

            return grpc.unary_stream_rpc_method_handler(events)
        if method == RS + "RemoveContainer":

            def refuse(raw: bytes, ctx: grpc.ServicerContext) -> bytes:
                self._record(method, raw, ctx)
                ctx.set_trailing_metadata((("why", "gone"),))
                ctx.abort(grpc.StatusCode.NOT_FOUND, "container ctr-9 not found")
                return b""

            return grpc.unary_unary_rpc_method_handler(refuse)

        def unary(raw: bytes, ctx: grpc.ServicerContext) -> bytes:
            self._record(method, raw, ctx)
            return self.answers.get(method, b"\x0a\x03abc" + raw)  # unknown methods: a fixed prefix + the request

        return grpc.unary_unary_rpc_method_handler(unary)


def serve(handler_or_register: Any, sock: Path) -> grpc.Server:
    """Start a gRPC server on ``sock`` with a generic handler, or a ``register(server)`` callable."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    if isinstance(handler_or_register, grpc.GenericRpcHandler):
        server.add_generic_rpc_handlers((handler_or_register,))
    else:
        handler_or_register(server)
    assert server.add_insecure_port(f"unix://{sock}") != 0
    server.start()
    return server


class FakeHookServer(hookgrpc.RuntimeHookServiceServicer):
    """Answers as koordlet does: the request's values plus ``env`` / ``shares`` / ``cpuset``; sleeps ``delay`` first."""

    def __init__(self, env: dict[str, str], shares: int = 0, cpuset: str = "", delay: float = 0.0) -> None:
        self.env, self.shares, self.cpuset, self.delay = env, shares, cpuset, delay
        self.seen: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def _container(self, name: str, req: hookapi.ContainerResourceHookRequest) -> hookapi.ContainerResourceHookResponse:
        with self.lock:
            self.seen.append((name, req))
        time.sleep(self.delay)
        resp = hookapi.ContainerResourceHookResponse(
            container_annotations=req.container_annotations,
            container_resources=req.container_resources,
            pod_cgroup_parent=req.pod_cgroup_parent,
            container_envs=req.container_envs,
        )
        resp.container_envs.update(self.env)
        if self.shares:
            resp.container_resources.cpu_shares = self.shares
        if self.cpuset:
            resp.container_resources.cpuset_cpus = self.cpuset
        return resp

    def PreRunPodSandboxHook(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.seen.append(("PreRunPodSandboxHook", request))
        time.sleep(self.delay)
        return hookapi.PodSandboxHookResponse(
            labels=request.labels, annotations=request.annotations, cgroup_parent=request.cgroup_parent
        )

    def PreCreateContainerHook(self, request: Any, context: Any) -> Any:
        return self._container("PreCreateContainerHook", request)

    def PreStartContainerHook(self, request: Any, context: Any) -> Any:
        return self._container("PreStartContainerHook", request)

    def PostStartContainerHook(self, request: Any, context: Any) -> Any:
        return self._container("PostStartContainerHook", request)

    def PreUpdateContainerResourcesHook(self, request: Any, context: Any) -> Any:
        return self._container("PreUpdateContainerResourcesHook", request)

    def PostStopContainerHook(self, request: Any, context: Any) -> Any:
        return self._container("PostStopContainerHook", request)


def hook_registrar(servicer: FakeHookServer) -> Callable[[grpc.Server], None]:
    """``register(server)`` for :func:`serve`."""
    return lambda server: hookgrpc.add_RuntimeHookServiceServicer_to_server(servicer, server)


@dataclass
class AgentEnv:
    """The running agent as the hooks see it: fake cgroup root, shared pool cpus 2-3 on NUMA node 0."""

    layout: CgroupLayout
    rule: CPUSetRule = field(default_factory=lambda: CPUSetRule("none", ((0, frozenset({2, 3})),)))
    slo: NodeSLOSpec = field(default_factory=NodeSLOSpec)
    gi: bool = False  # the kernel has cpu.bvt_warp_ns

    def context(self, now: float) -> QoSContext:
        return QoSContext(
            now=now,
            interval=1.0,
            layout=self.layout,
            slo=self.slo,
            pods=[],
            cache=MetricCache(1.0, 60.0),
            processors=[],
            capacity_cpu=4000,
            capacity_memory=8 << 30,
        )

    def cpuset_rule(self) -> CPUSetRule | None:
        return self.rule

    def known_pod(self, uid: str) -> PodMeta | None:
        return None

    def fresh_pods(self, since: float) -> FreshPods:
        return FreshPods()

    def group_identity_supported(self, ctx: QoSContext) -> bool:
        return self.gi
