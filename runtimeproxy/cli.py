"""``koord runtime-proxy``: the CRI proxy between kubelet and containerd (upstream ``cmd/koord-runtime-proxy``).

Flags as upstream: ``--koord-runtimeproxy-endpoint``, ``--remote-runtime-service-endpoint``,
``--backend-runtime-mode`` (``Containerd``; ``Docker`` is refused: not implemented), ``--runtime-hook-server-key``
and ``--runtime-hook-server-val``. Added here: ``--runtime-hooks-config-path`` (upstream hard-codes
``/etc/runtime/hookserver.d``), ``--hook-timeout`` and ``--metrics-port``. Exit status 2 on a bad flag or a socket
that cannot be created.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.api.logsetup import LogFormat, LogLevel, configure_logging
from runtimeproxy.options import (
    BACKEND_RUNTIME_MODE_CONTAINERD,
    BACKEND_RUNTIME_MODE_DOCKER,
    DEFAULT_BACKEND_RUNTIME_MODE,
    DEFAULT_CONTAINERD_RUNTIME_SERVICE_ENDPOINT,
    DEFAULT_HOOK_SERVER_KEY,
    DEFAULT_HOOK_SERVER_VAL,
    DEFAULT_HOOK_TIMEOUT,
    DEFAULT_RUNTIME_HOOK_CONFIG_PATH,
    DEFAULT_RUNTIME_PROXY_ENDPOINT,
    Options,
    set_grpc_environment,
)

if TYPE_CHECKING:
    from runtimeproxy.server import RuntimeProxyServer

#: Set in the environment once ``koord runtime-proxy`` re-executed into ``python -m runtimeproxy`` (never twice).
LEAN_ENV = "KOORD_RUNTIME_PROXY_LEAN"


def reexec_lean() -> None:
    """When started as ``koord runtime-proxy ...``, replace this process (same pid, what systemd watches) by
    ``python -P -m runtimeproxy`` with the same arguments, as ``koord agent`` does; nothing when already lean, when
    not started by the ``koord`` script (tests invoke the command in-process) or when the exec fails."""
    if os.environ.get(LEAN_ENV) or Path(sys.argv[0]).name != "koord" or sys.argv[1:2] != ["runtime-proxy"]:
        return
    os.environ[LEAN_ENV] = "1"
    set_grpc_environment(os.environ)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, [sys.executable, "-P", "-m", "runtimeproxy", *sys.argv[2:]])
    except OSError:
        return


def runtime_proxy(
    koord_runtimeproxy_endpoint: Annotated[
        str, typer.Option("--koord-runtimeproxy-endpoint", help="koord-runtimeproxy service endpoint (unix socket).")
    ] = DEFAULT_RUNTIME_PROXY_ENDPOINT,
    remote_runtime_service_endpoint: Annotated[
        str, typer.Option("--remote-runtime-service-endpoint", help="backend runtime service endpoint.")
    ] = DEFAULT_CONTAINERD_RUNTIME_SERVICE_ENDPOINT,
    backend_runtime_mode: Annotated[
        str, typer.Option("--backend-runtime-mode", help="backend container engine (Containerd).")
    ] = DEFAULT_BACKEND_RUNTIME_MODE,
    runtime_hook_server_key: Annotated[
        str,
        typer.Option(
            "--runtime-hook-server-key",
            help="pods labelled with this key (and --runtime-hook-server-val) are the hook server itself: "
            "their CRI calls are not sent to hook servers.",
        ),
    ] = DEFAULT_HOOK_SERVER_KEY,
    runtime_hook_server_val: Annotated[
        str, typer.Option("--runtime-hook-server-val", help="working combined with --runtime-hook-server-key.")
    ] = DEFAULT_HOOK_SERVER_VAL,
    runtime_hooks_config_path: Annotated[
        Path, typer.Option(help="folder where hook servers register (koord agent writes koordlet.json).")
    ] = Path(DEFAULT_RUNTIME_HOOK_CONFIG_PATH),
    hook_timeout: Annotated[
        float, typer.Option(help="seconds a hook call may take; then the CRI call goes on unchanged.")
    ] = DEFAULT_HOOK_TIMEOUT,
    metrics_host: Annotated[str, typer.Option(help="address for /metrics and /healthz.")] = "127.0.0.1",
    metrics_port: Annotated[int, typer.Option(help="port for /metrics and /healthz (0: do not serve).")] = 0,
    log_level: Annotated[LogLevel, typer.Option(help="debug, info, warning or error.")] = LogLevel.info,
    log_format: Annotated[LogFormat, typer.Option(help="text or json (one object per line).")] = LogFormat.text,
    verbosity: Annotated[int, typer.Option("-v", "--v", min=0, help="klog-style verbosity; 4 or more logs DEBUG.")] = 0,
) -> None:
    """Serve the CRI between kubelet and containerd, calling the runtime hook servers (koord agent) at pod and
    container creation."""
    reexec_lean()
    configure_logging(log_level, log_format, verbosity)

    def fail(message: str) -> None:
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(2)

    if backend_runtime_mode == BACKEND_RUNTIME_MODE_DOCKER:
        fail("--backend-runtime-mode Docker is not implemented; use Containerd")
    if backend_runtime_mode != BACKEND_RUNTIME_MODE_CONTAINERD:
        fail(f"unknown runtime engine backend {backend_runtime_mode!r} (Containerd)")
    if hook_timeout <= 0:
        fail("--hook-timeout must be > 0")
    if koord_runtimeproxy_endpoint == remote_runtime_service_endpoint:
        fail("--koord-runtimeproxy-endpoint and --remote-runtime-service-endpoint are the same socket")
    from runtimeproxy.server import RuntimeProxyServer  # grpc: only when the command runs

    options = Options(
        runtime_proxy_endpoint=koord_runtimeproxy_endpoint,
        remote_runtime_service_endpoint=remote_runtime_service_endpoint,
        backend_runtime_mode=backend_runtime_mode,
        runtime_hook_server_key=runtime_hook_server_key,
        runtime_hook_server_val=runtime_hook_server_val,
        runtime_hooks_config_path=runtime_hooks_config_path,
        hook_timeout=hook_timeout,
    )
    server = RuntimeProxyServer(options)
    try:
        asyncio.run(_serve(server, metrics_host, metrics_port))
    except OSError as exc:  # the proxy socket or the metrics port
        fail(str(exc))


async def _serve(server: RuntimeProxyServer, metrics_host: str, metrics_port: int) -> None:
    """Serve on this thread's event loop until SIGTERM or SIGINT, then stop (running calls get 1 s).

    Raises:
        OSError: the proxy socket cannot be created, or the metrics port bound (message names which).
    """
    try:
        await server.start_async()
    except OSError as exc:
        raise OSError(f"--koord-runtimeproxy-endpoint {server.options.runtime_proxy_endpoint}: {exc}") from None
    if metrics_port:
        from app.api.metricsserver import serve

        try:
            serve(metrics_host, metrics_port, server.dispatcher.registry, lambda: True, thread_name="proxy-http")
        except OSError as exc:
            await server.stop_async(0)
            raise OSError(f"cannot serve metrics on {metrics_host}:{metrics_port}: {exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    logging.getLogger("runtimeproxy").info("koordinator runtime-proxy shutting down")
    await server.stop_async()
