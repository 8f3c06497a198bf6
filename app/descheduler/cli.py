"""``koord descheduler``: koord-descheduler as its own process, and ``koord descheduler explain``.

Without ``--descheduling-interval`` (and no ``deschedulingInterval`` in the config) one round runs
and the process exits, as the sigs descheduler does as a Job; with MigrationController enabled that
round only creates PodMigrationJobs, which a descheduler running with an interval carries out.
``-o json`` prints the round: node classes with usage against thresholds, evictions with pod, source
and target node, skipped pods with the reason.

With an interval it runs rounds forever, leader-elected on a Lease like ``koord manager``
(``--cluster`` runs without election), serving ``/metrics``, ``/healthz`` and ``/explain`` on
``--port``. ``--dry-run`` plans and reports but writes nothing. A bad configuration exits 2 naming
the field. Evictions go through the Eviction API (embedded mode: recorded by the file source).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from app.api.logsetup import LogFormat, LogLevel, configure_logging
from app.descheduler.config import ConfigError, DeschedulerConfig, load_config
from app.descheduler.draincli import drain_app
from app.framework.duration import parse_duration

log = logging.getLogger("koord.descheduler")

#: Kinds a round reads.
DESCHEDULER_KINDS = ("Node", "Pod", "NodeMetric", "PodDisruptionBudget")
#: Kinds the PodMigrationJob controller reads besides.
MIGRATION_KINDS = ("Reservation", "PodMigrationJob")
#: Kinds the DrainNodeController reads besides.
DRAIN_KINDS = ("DrainNode",)
DEFAULT_PORT = 10251
#: Seconds between PodMigrationJob passes while waiting for the next round (upstream's arbitration interval).
MIGRATION_PERIOD = 0.5

descheduler_app = typer.Typer(
    help="koord-descheduler: LowNodeLoad rebalancing (one round without an interval), and node drains.",
    invoke_without_command=True,
)
descheduler_app.add_typer(drain_app, name="drain")


def _source(cluster: Path | None, kubeconfig: Path | None, migration: bool, drain: bool = False) -> Any:
    """The file source (``--cluster``) or the API server's, reading the migration (and drain) kinds too
    when needed."""
    from app.sources.files import FileSource
    from app.sources.kubernetes import KubernetesSource

    kinds = (*DESCHEDULER_KINDS, *MIGRATION_KINDS) if migration else DESCHEDULER_KINDS
    if drain:
        kinds = (*kinds, *DRAIN_KINDS)
    if cluster is not None:
        return FileSource(cluster, poll_interval=1.0, kinds=kinds)
    in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    return KubernetesSource(kinds, kubeconfig=str(kubeconfig) if kubeconfig else None, in_cluster=in_cluster)


async def _wait_ready(source: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not source.ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{source.description} did not finish its first list in {timeout:.0f}s")
        await asyncio.sleep(0.1)


async def run(
    config: DeschedulerConfig,
    source: Any,
    *,
    dry_run: bool,
    interval: float,
    host: str = "0.0.0.0",
    port: int | None = None,
    leader_elect: bool = False,
    lease: tuple[str, str] = ("koord-descheduler", "koordinator-system"),
    durations: tuple[int, int, int] = (15, 10, 2),
    rounds: int | None = None,
    identity: str | None = None,
) -> dict[str, Any] | None:
    """Run rounds on ``source`` and return the last round's report.

    ``interval`` 0 runs one round. ``rounds`` caps the number of rounds (tests). ``port`` None serves
    nothing. ``identity`` is the Lease holder identity (default ``$POD_NAME`` or the host name, plus
    the pid). Raises RuntimeError when leadership is lost (the process then exits 1).
    """
    from app.cache.snapshot import ClusterCache
    from app.descheduler.evictor import PodEvictor, TokenBucket
    from app.descheduler.runner import Descheduler, view_from_cache
    from app.sources.kubernetes import KubernetesSource

    cache = ClusterCache()
    bucket = TokenBucket(config.migration.evict_qps, config.migration.evict_burst)
    evictor = PodEvictor(source, bucket=bucket)
    desched = Descheduler(config, evictor, dry_run=dry_run, jobs=source)
    migration = None
    drain = None
    if config.migration_enabled and not desched.dry_run:
        from app.descheduler.migration import MigrationController

        migration = MigrationController(cache, source, config.migration, PodEvictor(source, attempts=1, bucket=bucket))
        if config.drain_enabled:
            from app.descheduler.drain import DrainNodeController

            drain = DrainNodeController(cache, source, config.evictor)
    started, stopped = threading.Event(), threading.Event()
    server = None
    await source.start(cache)
    try:
        await _wait_ready(source)
        if port is not None:
            from app.descheduler.server import serve

            server = serve(
                host, port, desched.metrics.registry, lambda: started.is_set() and source.ready(), lambda: desched.last
            )
        if leader_elect and isinstance(source, KubernetesSource):
            from kubernetes.client import ApiClient

            from app.sources.leaderelect import elect

            identity = identity or f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"
            threading.Thread(
                target=elect,
                args=(ApiClient(source.client.configuration), *lease, identity, durations, started, stopped),
                name="leader-election",
                daemon=True,
            ).start()
            while not started.is_set():
                if stopped.is_set():
                    raise RuntimeError("leader election ended before leading")
                await asyncio.sleep(0.2)
            log.info("%s became the leader", identity)
        else:
            started.set()
        done = 0
        while True:
            await desched.run_once(view_from_cache(cache, time.time()))
            done += 1
            if interval <= 0 or (rounds is not None and done >= rounds):
                return desched.last
            waited = 0.0
            while waited < interval:
                if stopped.is_set():
                    raise RuntimeError("leadership lost")
                if drain is not None:
                    await drain.reconcile()
                if migration is not None:
                    await migration.reconcile()
                await asyncio.sleep(min(MIGRATION_PERIOD, interval - waited))
                waited += MIGRATION_PERIOD
    finally:
        stopped.set()
        if server is not None:
            server.shutdown()
        await source.stop()


def render_round(report: dict[str, Any]) -> Table:
    """A rich table of a round: one row per node (class, usage % against low/high thresholds), and
    the chosen victims with their targets as the caption."""
    table = Table(title="koord-descheduler round" + (" (dry run)" if report.get("dryRun") else ""))
    for col in ("node", "class", "cpu % (low/high)", "memory % (low/high)", "pods", "abnormal", "pool"):
        table.add_column(col)

    def cell(n: dict[str, Any], r: str) -> str:
        used = n.get("usagePercent", {}).get(r)
        low = n.get("lowThresholdPercent", {}).get(r)
        high = n.get("highThresholdPercent", {}).get(r)
        if used is None:
            return "-"
        text = f"{used:.1f} ({low:.0f}/{high:.0f})" if low is not None and high is not None else f"{used:.1f}"
        return f"[red]{text}[/]" if high is not None and used > high else text

    for n in report.get("nodes", []):
        table.add_row(
            n["name"],
            n["class"],
            cell(n, "cpu"),
            cell(n, "memory"),
            str(n.get("usage", {}).get("pods", "")),
            "yes" if n.get("abnormal") else "",
            n.get("nodePool", ""),
        )
    lines = [
        f"evict {e['pod']}: {e['node']} -> {e['target'] or '?'} ({e['reason']})" for e in report.get("evictions", [])
    ]
    lines += [f"skip {s['pod']} on {s['node']}: {s['reason']}" for s in report.get("skipped", [])]
    lines += report.get("messages", [])
    table.caption = "\n".join(lines) or "no evictions"
    return table


def _print(report: dict[str, Any] | None, output: str) -> None:
    if report is None:
        return
    if output == "json":
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        Console().print(render_round(report))


@descheduler_app.callback()
def descheduler(
    ctx: typer.Context,
    kubeconfig: Annotated[
        Path | None, typer.Option(help="kubeconfig (default: in-cluster, then ~/.kube/config).")
    ] = None,
    cluster: Annotated[Path | None, typer.Option(help="Cluster files instead of an API server (no election).")] = None,
    config: Annotated[Path | None, typer.Option(help="DeschedulerConfiguration (YAML).")] = None,
    dry_run: Annotated[bool, typer.Option(help="Plan and report only; write nothing.")] = False,
    descheduling_interval: Annotated[
        str | None, typer.Option(help="Go duration between rounds (default: the config's; none = one round).")
    ] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="table or json (the last round).")] = "table",
    host: Annotated[str, typer.Option(help="Address of /metrics, /healthz and /explain.")] = "0.0.0.0",
    port: Annotated[
        int, typer.Option(help="Port of /metrics, /healthz and /explain (with an interval).")
    ] = DEFAULT_PORT,
    leader_elect: Annotated[
        bool, typer.Option(help="With an interval, elect one active instance through a Lease.")
    ] = True,
    lease_name: Annotated[str, typer.Option(help="Name of the leader election Lease.")] = "koord-descheduler",
    lease_namespace: Annotated[str, typer.Option(help="Namespace of the Lease.")] = "koordinator-system",
    log_level: Annotated[LogLevel, typer.Option(help="debug, info, warning or error.")] = LogLevel.info,
    log_format: Annotated[LogFormat, typer.Option(help="text or json (one object per line).")] = LogFormat.text,
    verbosity: Annotated[int, typer.Option("-v", "--v", min=0, help="klog-style verbosity; 4 or more logs DEBUG.")] = 0,
) -> None:
    """Run koord-descheduler (LowNodeLoad): one round without an interval, rounds forever with one."""
    if ctx.invoked_subcommand is not None:
        return
    configure_logging(log_level, log_format, verbosity)
    if output not in ("table", "json"):
        typer.echo("error: -o must be table or json", err=True)
        raise typer.Exit(2)
    if config is None:
        typer.echo("error: --config is required", err=True)
        raise typer.Exit(2)
    if cluster is not None and kubeconfig is not None:
        typer.echo("error: give --cluster or --kubeconfig, not both", err=True)
        raise typer.Exit(2)
    try:
        cfg = load_config(config)
        if cfg.low_node_load is None:
            raise ConfigError("profiles[0].pluginConfig", "no LowNodeLoad args: nothing to do")
        interval = parse_duration(descheduling_interval) if descheduling_interval else cfg.descheduling_interval
    except ConfigError as exc:
        typer.echo(f"error: invalid configuration: {exc}", err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:
        typer.echo(f"error: --descheduling-interval: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        source = _source(cluster, kubeconfig, cfg.migration_enabled, cfg.drain_enabled)
        report = asyncio.run(
            run(
                cfg,
                source,
                dry_run=dry_run,
                interval=interval,
                host=host,
                port=port if interval > 0 else None,
                leader_elect=leader_elect and cluster is None and interval > 0,
                lease=(lease_name, lease_namespace),
            )
        )
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    except Exception as exc:  # unreachable API server, unreadable cluster files, lost leadership
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    _print(report, output)


@descheduler_app.command("explain")
def explain(
    server: Annotated[
        str, typer.Option(help="Base URL of a running descheduler.")
    ] = f"http://127.0.0.1:{DEFAULT_PORT}",
    from_file: Annotated[
        Path | None, typer.Option("--from", help="A round saved by `koord descheduler -o json` instead of a server.")
    ] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table",
) -> None:
    """Show the last round: node classes, usage vs thresholds, chosen victims and targets."""
    try:
        if from_file is not None:
            report = orjson.loads(from_file.read_bytes())
        else:
            import httpx

            resp = httpx.get(f"{server.rstrip('/')}/explain", timeout=10.0)
            if resp.status_code != 200:
                typer.echo(f"error: {server} answered {resp.status_code}: {resp.text[:200]}", err=True)
                raise typer.Exit(1)
            report = resp.json()
    except typer.Exit:
        raise
    except Exception as exc:  # unreadable file, bad JSON, unreachable server
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if not isinstance(report, dict):
        typer.echo("error: not a round report", err=True)
        raise typer.Exit(2)
    _print(report, output)
