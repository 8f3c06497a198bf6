"""``koord manager``: the slo-controller (NodeSLO, batch- and device-resource controllers) as its own process.

In a cluster several replicas may run; one is active at a time through leader election on the
Lease ``--lease-name`` in ``--lease-namespace`` (the ``kubernetes`` package's ``leaderelection``,
client-go's Lease semantics: lease duration 15 s, renew deadline 10 s, retry period 2 s by
default, as controller-runtime). The informer cache warms up before leadership is won; the
controllers start once it is. Losing the lease ends the process (exit code 1), as upstream's
manager does, so a restart rejoins the election cleanly.

``--cluster PATH`` runs the controllers on cluster files instead (no election; the writes stay in
memory), which is what the service does on its own in embedded mode.

``/metrics`` (the controllers' series, process and Python metrics) and ``/healthz`` are served on
``--port`` (8080) from the start, by every replica, leader or not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    disable_created_metrics,
)

from app.api.logsetup import LogFormat, LogLevel, configure_logging
from app.api.metricsserver import serve
from app.sources.leaderelect import elect as _elect

log = logging.getLogger("koord.manager")
disable_created_metrics()  # no *_created series (they double every counter; no dashboard reads them)

#: Kinds the controllers read (ConfigMaps only in koordinator-system).
MANAGER_KINDS = ("Node", "Pod", "NodeMetric", "NodeSLO", "ConfigMap", "Device")


async def _run(
    cluster: Path | None,
    kubeconfig: Path | None,
    leader_elect: bool,
    lease_name: str,
    lease_namespace: str,
    identity: str,
    durations: tuple[int, int, int],
    registry: CollectorRegistry | None = None,
) -> int:
    from app.cache.snapshot import ClusterCache
    from app.manager.controllers import SLOControllers
    from app.sources.base import Source
    from app.sources.files import FileSource
    from app.sources.kubernetes import KubernetesSource

    source: Source
    if cluster is not None:
        source, leader_elect = FileSource(cluster), False
    else:
        in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        source = KubernetesSource(
            MANAGER_KINDS, kubeconfig=str(kubeconfig) if kubeconfig else None, in_cluster=in_cluster
        )
    cache = ClusterCache()
    controllers = SLOControllers(cache, source, registry=registry)
    await source.start(cache)
    started, stopped = threading.Event(), threading.Event()
    try:
        if leader_elect:
            assert isinstance(source, KubernetesSource)
            from kubernetes.client import ApiClient  # the leaderelection library speaks through its own client

            api_client = ApiClient(source.client.configuration)
            threading.Thread(
                target=_elect,
                args=(api_client, lease_name, lease_namespace, identity, durations, started, stopped),
                name="leader-election",
                daemon=True,
            ).start()
            log.info("%s is waiting for the Lease %s/%s", identity, lease_namespace, lease_name)
            while not started.is_set():
                if stopped.is_set():
                    return 1
                await asyncio.sleep(0.2)
            log.info("%s became the leader", identity)
        task = asyncio.create_task(controllers.run())
        try:
            while not stopped.is_set() and not task.done():
                await asyncio.sleep(0.2)
        finally:
            task.cancel()
    finally:
        stopped.set()  # ends the leading callback's wait (cancellation in tests; the process exits otherwise)
        await source.stop()
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    log.error("leadership lost: exiting")
    return 1


def manager(
    kubeconfig: Annotated[
        Path | None, typer.Option(help="kubeconfig (default: in-cluster, then ~/.kube/config).")
    ] = None,
    cluster: Annotated[Path | None, typer.Option(help="Cluster files instead of an API server (no election).")] = None,
    leader_elect: Annotated[bool, typer.Option(help="Elect one active instance through a Lease.")] = True,
    lease_name: Annotated[str, typer.Option(help="Name of the leader election Lease.")] = "koordinator-manager",
    lease_namespace: Annotated[str, typer.Option(help="Namespace of the Lease.")] = "koordinator-system",
    lease_duration: Annotated[int, typer.Option(help="Seconds a lease is valid without renewal.")] = 15,
    renew_deadline: Annotated[int, typer.Option(help="Seconds the leader retries renewing before giving up.")] = 10,
    retry_period: Annotated[int, typer.Option(help="Seconds between election attempts.")] = 2,
    host: Annotated[str, typer.Option(help="Address for /metrics and /healthz.")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="Port for /metrics and /healthz (0: do not serve).")] = 8080,
    log_level: Annotated[LogLevel, typer.Option(help="debug, info, warning or error.")] = LogLevel.info,
    log_format: Annotated[LogFormat, typer.Option(help="text or json (one object per line).")] = LogFormat.text,
    verbosity: Annotated[int, typer.Option("-v", "--v", min=0, help="klog-style verbosity; 4 or more logs DEBUG.")] = 0,
) -> None:
    """Run the NodeSLO and batch-resource controllers (koord-manager's slo-controller)."""
    configure_logging(log_level, log_format, verbosity)
    if not (lease_duration > renew_deadline > 1.2 * retry_period >= 1.2):
        typer.echo("error: need --lease-duration > --renew-deadline > 1.2 x --retry-period, all >= 1", err=True)
        raise typer.Exit(2)
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    registry = CollectorRegistry()
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    if port:
        try:  # served from the start: a replica waiting for the Lease is alive too
            server = serve(host, port, registry, lambda: True, thread_name="manager-http")
        except OSError as exc:
            typer.echo(f"error: cannot listen on {host}:{port} for /metrics and /healthz: {exc.strerror}", err=True)
            raise typer.Exit(2) from None
        log.info("serving /metrics and /healthz on %s:%d", host, server.server_address[1])
    try:
        code = asyncio.run(
            _run(
                cluster,
                kubeconfig,
                leader_elect,
                lease_name,
                lease_namespace,
                f"{identity}_{os.getpid()}",
                (lease_duration, renew_deadline, retry_period),
                registry,
            )
        )
    except KeyboardInterrupt:
        code = 0
    except Exception as exc:  # configuration problems (no kubeconfig, unreadable files)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)
