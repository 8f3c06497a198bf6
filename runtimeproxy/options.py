"""Flags and defaults of koord runtime-proxy, named as upstream (``cmd/koord-runtime-proxy/options/options.go``)."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_RUNTIME_PROXY_ENDPOINT = "/var/run/koord-runtimeproxy/runtimeproxy.sock"
DEFAULT_CONTAINERD_RUNTIME_SERVICE_ENDPOINT = "/var/run/containerd/containerd.sock"
BACKEND_RUNTIME_MODE_CONTAINERD = "Containerd"
BACKEND_RUNTIME_MODE_DOCKER = "Docker"
DEFAULT_BACKEND_RUNTIME_MODE = BACKEND_RUNTIME_MODE_CONTAINERD
#: A pod labelled ``<key>=<val>`` is the hook server itself: its CRI calls are never sent to a hook server.
DEFAULT_HOOK_SERVER_KEY = "runtimeproxy.koordinator.sh/skip-hookserver"
DEFAULT_HOOK_SERVER_VAL = "true"
#: Where hook servers register (``config.defaultRuntimeHookConfigPath``; koordlet writes ``koordlet.json``).
DEFAULT_RUNTIME_HOOK_CONFIG_PATH = "/etc/runtime/hookserver.d"
#: Seconds a hook call may take before the CRI call goes on without it (not in upstream, which waits on
#: kubelet's own deadline; a slow agent must not slow every pod start).
DEFAULT_HOOK_TIMEOUT = 1.0
#: kubelet's CRI message size limit (``maxMsgSize``, 16 MiB), on both sides of the proxy.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: gRPC core experiments the proxy process turns off (grpcio 1.85 has them on): with them, every call's socket
#: events go through gRPC's EventEngine worker threads before reaching Python's poller thread. Off, the proxy
#: bench (20 pods, kubelet-like polling, 2-CPU VM) measured 66 context switches/s instead of 116 and 0.40 %
#: of a core instead of 0.53-0.60 %. A name a later grpcio no longer knows is logged by gRPC and ignored.
GRPC_EXPERIMENTS_OFF = (
    "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints,-event_engine_callback_cq"
)


def set_grpc_environment(environ: MutableMapping[str, str]) -> None:
    """Turn the experiments of :data:`GRPC_EXPERIMENTS_OFF` off in ``environ`` (``os.environ`` before gRPC is
    imported, or the environment of the re-executed process), unless ``GRPC_EXPERIMENTS`` is already set: an
    operator's own choice wins (``GRPC_EXPERIMENTS=`` keeps gRPC's defaults)."""
    environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS_OFF)


@dataclass(frozen=True, slots=True)
class Options:
    """What ``koord runtime-proxy`` runs with.

    Attributes:
        runtime_proxy_endpoint: unix socket path the proxy serves the CRI on (``--koord-runtimeproxy-endpoint``).
        remote_runtime_service_endpoint: the backend runtime's unix socket (``--remote-runtime-service-endpoint``).
        backend_runtime_mode: ``Containerd`` (``Docker`` is not implemented: refused by the CLI).
        runtime_hook_server_key / runtime_hook_server_val: pods with this label pair skip the hook servers.
        runtime_hooks_config_path: folder of hook server registrations (``*.json``).
        hook_timeout: seconds per hook call.
    """

    runtime_proxy_endpoint: str = DEFAULT_RUNTIME_PROXY_ENDPOINT
    remote_runtime_service_endpoint: str = DEFAULT_CONTAINERD_RUNTIME_SERVICE_ENDPOINT
    backend_runtime_mode: str = DEFAULT_BACKEND_RUNTIME_MODE
    runtime_hook_server_key: str = DEFAULT_HOOK_SERVER_KEY
    runtime_hook_server_val: str = DEFAULT_HOOK_SERVER_VAL
    runtime_hooks_config_path: Path = Path(DEFAULT_RUNTIME_HOOK_CONFIG_PATH)
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT
