"""The agent's RuntimeHookService server (upstream ``runtimehooks/proxyserver/{server,service}.go``).

Serves upstream's ``runtime.v1alpha1.RuntimeHookService`` on a unix socket (``--runtime-hooks-addr``), so
koord runtime-proxy (or upstream's) calls it, and registers by writing ``koordlet.json`` into
``--runtime-hooks-config-path`` with ``--runtime-hooks-host-endpoint`` (the socket's path on the host, where the
proxy runs), ``--runtime-hooks-failure-policy`` and the hooks it serves (PreRunPodSandbox, PreCreateContainer,
PreUpdateContainerResources, as koordlet's ``GetStages``).

Each answer starts as the request's own values (as upstream), then the hooks (:mod:`agent.runtimehooks.hooks`)
change them. A hook that raises is logged and the answer goes back with what the others set: the proxy never
gets an error from us, so a pod start never fails because of the agent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc

from agent.executor import CgroupExecutor
from agent.runtimehooks import hooks
from agent.runtimehooks.protocol import HookEnv, hook_pod
from app.api.runtime.config import FailurePolicy, RuntimeHookType, hook_config_json
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from app.api.runtime.v1alpha1 import api_pb2_grpc as hookgrpc

log = logging.getLogger("agent.runtimehooks")

#: The hooks the agent registers for (koordlet's stages in proxy mode).
SERVED_HOOKS = [
    RuntimeHookType.PRE_RUN_POD_SANDBOX,
    RuntimeHookType.PRE_CREATE_CONTAINER,
    RuntimeHookType.PRE_UPDATE_CONTAINER_RESOURCES,
]
CONFIG_FILE = "koordlet.json"


@dataclass(frozen=True, slots=True)
class HookServerOptions:
    """Flags of the hook server, named as koordlet's (``runtimehooks/config.go``).

    Attributes:
        addr: the socket path the agent listens on (``--runtime-hooks-addr``; inside the agent's container).
        host_endpoint: the same socket's path on the host, written into the registration.
        config_path: folder of registrations (``--runtime-hooks-config-path``; None: do not register).
        failure_policy: written into the registration (``Ignore``: a failed hook never fails a pod start).
    """

    addr: str
    host_endpoint: str
    config_path: Path | None
    failure_policy: FailurePolicy = FailurePolicy.IGNORE


class HookRecorder(Protocol):
    """Counts hook calls (:class:`agent.metrics.AgentMetrics` implements it)."""

    def runtime_hook(self, hook: str, result: str) -> None:
        """Count one call of ``hook`` (``PreCreateContainer``, ...) with ``result`` (``success`` / ``failed``)."""
        ...


class RuntimeHookServicer(hookgrpc.RuntimeHookServiceServicer):
    """The service. Args: the running agent (``env``), the executor for pod-level writes, what counts calls."""

    def __init__(self, env: HookEnv, executor: CgroupExecutor, recorder: HookRecorder | None = None) -> None:
        self.env = env
        self.executor = executor
        self.recorder = recorder

    def _count(self, hook: str, ok: bool) -> None:
        if self.recorder is not None:
            self.recorder.runtime_hook(hook, "success" if ok else "failed")

    def _pod_of_sandbox(self, req: hookapi.PodSandboxHookRequest, since: float) -> Any:
        m = req.pod_meta
        return hook_pod(
            self.env, m.uid, m.namespace, m.name, dict(req.labels), dict(req.annotations), req.cgroup_parent, since
        )

    def _pod_of_container(self, req: hookapi.ContainerResourceHookRequest, since: float) -> Any:
        m = req.pod_meta
        labels, annotations = dict(req.pod_labels), dict(req.pod_annotations)
        return hook_pod(self.env, m.uid, m.namespace, m.name, labels, annotations, req.pod_cgroup_parent, since)

    @staticmethod
    def _echo_sandbox(req: hookapi.PodSandboxHookRequest) -> hookapi.PodSandboxHookResponse:
        resp = hookapi.PodSandboxHookResponse(
            labels=req.labels, annotations=req.annotations, cgroup_parent=req.cgroup_parent
        )
        if req.HasField("resources"):
            resp.resources.CopyFrom(req.resources)
        return resp

    @staticmethod
    def _echo_container(req: hookapi.ContainerResourceHookRequest) -> hookapi.ContainerResourceHookResponse:
        resp = hookapi.ContainerResourceHookResponse(
            container_annotations=req.container_annotations,
            pod_cgroup_parent=req.pod_cgroup_parent,
            container_envs=req.container_envs,
        )
        if req.HasField("container_resources"):
            resp.container_resources.CopyFrom(req.container_resources)
        return resp

    def PreRunPodSandboxHook(self, request: Any, context: Any) -> Any:
        """Pod-level batch resources, memory QoS, group identity, cpuset pods' quota, written to the pod cgroup."""
        since = time.monotonic()
        resp = self._echo_sandbox(request)
        try:
            pod = self._pod_of_sandbox(request, since)
            n = hooks.pre_run_pod_sandbox(self.env, self.executor, pod, time.time())
            log.debug("PreRunPodSandbox %s: %d pod cgroup files written", pod.key, n)
        except Exception:  # a hook must never fail the pod start
            log.exception("PreRunPodSandbox %s/%s: hooks failed", request.pod_meta.namespace, request.pod_meta.name)
            self._count("PreRunPodSandbox", False)
        else:
            self._count("PreRunPodSandbox", True)
        return resp

    def _container(self, stage: str, request: Any, with_env: bool) -> Any:
        since = time.monotonic()
        resp = self._echo_container(request)
        try:
            pod = self._pod_of_container(request, since)
            done = hooks.container_resources(
                self.env, pod, request.container_meta.name, resp.container_resources, since
            )
            if with_env:
                env = hooks.gpu_env(pod)
                resp.container_envs.update(env)
                done += [f"{k}={v}" for k, v in env.items()]
            if done:
                log.info("%s %s/%s: %s", stage, pod.key, request.container_meta.name, ", ".join(done))
        except Exception:
            log.exception("%s %s/%s: hooks failed", stage, request.pod_meta.name, request.container_meta.name)
            self._count(stage, False)
        else:
            self._count(stage, True)
        return resp

    def PreCreateContainerHook(self, request: Any, context: Any) -> Any:
        """cpuset, batch resources and the GPU env of a new container."""
        return self._container("PreCreateContainer", request, with_env=True)

    def PreUpdateContainerResourcesHook(self, request: Any, context: Any) -> Any:
        """cpuset and batch resources kept when kubelet updates a container's resources."""
        return self._container("PreUpdateContainerResources", request, with_env=False)

    def PreStartContainerHook(self, request: Any, context: Any) -> Any:
        """Not registered; answers the request's own values."""
        return self._echo_container(request)

    def PostStartContainerHook(self, request: Any, context: Any) -> Any:
        """Not registered; answers the request's own values."""
        return self._echo_container(request)

    def PostStopContainerHook(self, request: Any, context: Any) -> Any:
        """Not registered; answers the request's own values."""
        return self._echo_container(request)

    def PostStopPodSandboxHook(self, request: Any, context: Any) -> Any:
        """Not registered; answers the request's own values."""
        return self._echo_sandbox(request)


class RuntimeHookServer:
    """The gRPC server and its registration.

    Args:
        env: the running agent.
        executor: writes pod-level cgroup values (the agent's own executor class, a separate instance).
        options: the flags.
        recorder: counts calls (``koordlet_runtime_hooks_total``).

    Raises (``start``): OSError when the socket cannot be created or the registration not written.
    """

    def __init__(
        self,
        env: HookEnv,
        executor: CgroupExecutor,
        options: HookServerOptions,
        recorder: HookRecorder | None = None,
    ) -> None:
        self.options = options
        self.servicer = RuntimeHookServicer(env, executor, recorder)
        self.server: grpc.Server | None = None

    def start(self) -> None:
        """Listen on ``addr`` (a stale socket is removed first) and write the registration."""
        sock = Path(self.options.addr)
        sock.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="hooks"))
        hookgrpc.add_RuntimeHookServiceServicer_to_server(self.servicer, server)
        if server.add_insecure_port(f"unix://{sock}") == 0:
            raise OSError(f"cannot listen on {sock}")
        server.start()
        self.server = server
        if self.options.config_path is not None:
            self.register(self.options.config_path)
        log.info("runtime hook server on %s (host endpoint %s)", sock, self.options.host_endpoint)

    def register(self, folder: Path) -> Path:
        """Write ``koordlet.json`` atomically into ``folder``; returns its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / CONFIG_FILE
        tmp = folder / f".{CONFIG_FILE}.tmp"
        tmp.write_text(hook_config_json(self.options.host_endpoint, self.options.failure_policy, SERVED_HOOKS))
        os.replace(tmp, path)
        return path

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving."""
        if self.server is not None:
            self.server.stop(grace).wait()
            self.server = None
