"""``koord``: the service and its tools.

- ``koord scheduler``: serve the extender, webhooks and inspection API on one port (9876); ``--role
  extender`` / ``--role webhooks`` split them into separate processes (the Kubernetes Deployments).
- ``koord explain pod NAME -n NS`` / ``--pod FILE``: ask a running service why a pod can or cannot go where.
- ``koord agent``, ``koord runtime-proxy``, ``koord manager``, ``koord sim`` (and ``koord sim whatif``),
  ``koord snapshot``, ``koord certs``, ``koord quota``, ``koord gang``, ``koord reservation``, ``koord ui``: in
  their modules.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from app.api.logsetup import LogFormat, LogLevel, configure_logging
from app.cli.embedded import embedded_cluster_path
from app.cli.helpstyle import KoordGroup, root_options
from app.cli.output import OutputOpt, emit
from app.cli.remote import DEFAULT_SERVER, CAOpt, ClientCertOpt, ClientKeyOpt, InsecureOpt, ServerOpt, request
from app.framework.duration import parse_duration

if TYPE_CHECKING:
    from app.sources.base import Source

cli = typer.Typer(
    help="Koordinator-Py: QoS-aware colocation scheduling for Kubernetes.", no_args_is_help=True, cls=KoordGroup
)
cli.callback()(root_options)  # --version
console = Console()
err_console = Console(stderr=True)
log = logging.getLogger("koord")


def _fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)  # one line, brackets kept
    raise typer.Exit(code)


def choose_source(cluster: Path | None, kubeconfig: Path | None) -> Source:
    """``--cluster`` -> files; ``--kubeconfig`` -> that API server; otherwise a reachable in-cluster
    or default kubeconfig API server, else the embedded example cluster.

    Raises:
        typer.Exit: nothing usable was found.
    """
    from app.sources.files import FileSource
    from app.sources.kubernetes import KubernetesSource, probe

    if cluster is not None:
        return FileSource(cluster)
    if kubeconfig is not None:
        return KubernetesSource(kubeconfig=str(kubeconfig))
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    if asyncio.run(probe(None, in_cluster=in_cluster)):
        return KubernetesSource(in_cluster=in_cluster)
    embedded = embedded_cluster_path()
    if embedded is None:
        _fail("no --cluster given, no API server reachable, and the example cluster (examples/cluster) is missing")
    assert embedded is not None
    log.info("no API server reachable: serving the embedded example cluster %s", embedded)
    return FileSource(embedded)


def _lease_follower(source: Source, lease: str, identity: str | None) -> Any:
    """The :class:`~app.sources.leaderlease.LeaseFollower` of ``--follow-leader-lease``.

    Raises:
        typer.Exit: not NAMESPACE/NAME, or the source is not an API server (code 2).
    """
    import socket

    from app.sources.kubernetes import KubernetesSource
    from app.sources.leaderlease import LeaseFollower, parse_lease_ref

    try:
        namespace, name = parse_lease_ref(lease)
    except ValueError as exc:
        _fail(f"--follow-leader-lease: {exc}")
    if not isinstance(source, KubernetesSource):
        _fail("--follow-leader-lease needs an API server (--kubeconfig or in-cluster), not cluster files")
    assert isinstance(source, KubernetesSource)
    return LeaseFollower(source.client, namespace, name, identity or socket.gethostname())


def _byte_count(flag: str, text: str) -> int:
    """A positive byte count from a Kubernetes quantity (``1048576``, ``256Mi``, ``1G``).

    Raises:
        typer.Exit: not a quantity, not a whole number of bytes, or not positive (code 2).
    """
    from app.api.quantity import INT64_MAX, QuantityError, parse

    try:
        value = parse(text)
    except QuantityError as exc:
        _fail(f"{flag}: {exc}")
    if not 0 < value <= INT64_MAX or value != value.to_integral_value():
        _fail(f"{flag}: {text!r} is not a positive whole number of bytes (at most {INT64_MAX})")
    return int(value)


def _fail_if_port_taken(host: str, port: int) -> None:
    """Exit 2 at once when ``host:port`` cannot be bound (in use, or not an address of this host), as uvicorn
    would only after the cluster is loaded. Bound as uvicorn binds (SO_REUSEADDR), then released."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        _fail(f"--host {host}: {exc.strerror}")
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            _fail(f"cannot listen on {host}:{port}: {exc.strerror} (is another koord scheduler running?)")


def _log_inspection_access(access: Any, role: str, host: str, port: int) -> None:
    """Say at start-up who may read the cluster's state (:mod:`app.server.inspectauth`): the policy, or that
    inspection is open and to whom."""
    from app.server.app import serves_inspection

    what = "inspection (/apis/v1/..., /ui) and /metrics" if serves_inspection(role) else "/metrics"
    if access is not None:
        log.info("%s: callers need %s; /healthz and /readyz are open", what, access.description)
        return
    loopback = host in ("127.0.0.1", "::1", "localhost")
    if loopback:
        log.info(
            "embedded mode without --client-ca-file: %s stay open on loopback (%s:%d), as before", what, host, port
        )
    else:
        log.warning(
            "embedded mode without --client-ca-file: %s are open to anyone who reaches %s:%d; "
            "bind --host 127.0.0.1 or pass --client-ca-file",
            what,
            host,
            port,
        )


@cli.command()
def scheduler(
    cluster: Annotated[
        Path | None, typer.Option(help="YAML/JSON file or directory of cluster objects (embedded mode).")
    ] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig of the API server to list/watch.")] = None,
    config: Annotated[Path | None, typer.Option(help="Plugin configuration (plugins, pluginConfig).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9876,
    tls_cert_file: Annotated[Path | None, typer.Option(help="Serving certificate (PEM).")] = None,
    tls_private_key_file: Annotated[Path | None, typer.Option(help="Serving key (PEM).")] = None,
    client_ca_file: Annotated[
        Path | None,
        typer.Option(
            help="Require client certificates signed by this CA (PEM) on the extender verbs and the webhooks; "
            "inspection (/apis/v1/..., /ui, /metrics) also takes them as identities (embedded mode: the only one)."
        ),
    ] = None,
    allowed_client_names: Annotated[
        str,
        typer.Option(help="Comma-separated certificate CNs allowed to call the extender verbs (empty: any)."),
    ] = "",
    allowed_webhook_client_names: Annotated[
        str,
        typer.Option(help="Comma-separated certificate CNs allowed to call the webhooks (empty: any)."),
    ] = "",
    allowed_inspection_client_names: Annotated[
        str,
        typer.Option(
            help="Comma-separated certificate CNs allowed to call inspection (/apis/v1/..., /ui, /metrics; "
            "empty: any the CA signed). Against an API server, RBAC then decides (SubjectAccessReview)."
        ),
    ] = "",
    assumed_pod_ttl: Annotated[str, typer.Option(help="Forget unconfirmed assumed pods after (Go duration).")] = "15m",
    log_level: Annotated[LogLevel, typer.Option(help="debug, info, warning or error.")] = LogLevel.info,
    log_format: Annotated[LogFormat, typer.Option(help="text or json (one object per line).")] = LogFormat.text,
    verbosity: Annotated[int, typer.Option("-v", "--v", min=0, help="klog-style verbosity; 4 or more logs DEBUG.")] = 0,
    max_request_body_bytes: Annotated[
        str,
        typer.Option(help="Refuse larger request bodies with 413 (bytes, or a quantity such as 256Mi)."),
    ] = "256Mi",
    follow_leader_lease: Annotated[
        str | None,
        typer.Option(
            help="NAMESPACE/NAME of kube-scheduler's leader Lease: background writes (quota status, revokes) "
            "only while the kube-scheduler in this pod holds it (Kubernetes source only)."
        ),
    ] = None,
    leader_identity: Annotated[
        str | None,
        typer.Option(help="kube-scheduler's identity prefix in the Lease (default: this host's name, the pod name)."),
    ] = None,
    cpu_slice_ms: Annotated[
        float,
        typer.Option(
            help="A CPU time slice (ms, 0.1-100) for the serving thread to ask of Linux's fair scheduler (EEVDF, "
            "6.12+), so its bursts of work preempt a shared control plane's threads less; 0 (the default) keeps "
            "the kernel's. See docs/deployment.md, CPU time slice."
        ),
    ] = 0.0,
    role: Annotated[
        str,
        typer.Option(
            help="all (extender verbs, webhooks, inspection), extender (verbs and inspection) or webhooks "
            "(webhooks only: binds nothing, runs no controller, serves no inspection). Health and metrics are "
            "always served."
        ),
    ] = "all",
) -> None:
    """Serve the extender verbs (filter/prioritize/preempt/bind), webhooks, inspection API, health and metrics.

    Inspection (/apis/v1/..., /ui) and /metrics need credentials against an API server (a bearer token checked by
    TokenReview, or a client certificate of --client-ca-file; RBAC decides by SubjectAccessReview), and in
    embedded mode with --client-ca-file; /healthz and /readyz are open.
    """
    _fail_if_port_taken(host, port)  # before loading the cluster: that can take a minute
    import uvicorn

    from app.server.app import ROLES, BackgroundTask, create_app, serves_extender

    if role not in ROLES:
        _fail(f"--role: unknown role {role!r}, expected one of {', '.join(ROLES)}")
    from app.server.cpuslice import MAX_SLICE_MS, MIN_SLICE_MS, request_slice

    if cpu_slice_ms and not MIN_SLICE_MS <= cpu_slice_ms <= MAX_SLICE_MS:
        _fail(f"--cpu-slice-ms: {cpu_slice_ms:g} is outside {MIN_SLICE_MS:g}-{MAX_SLICE_MS:g} (or 0: the kernel's)")
    effective_level = configure_logging(log_level, log_format, verbosity)
    try:
        ttl = parse_duration(assumed_pod_ttl)
    except ValueError as exc:
        _fail(f"--assumed-pod-ttl: {exc}")
    body_limit = _byte_count("--max-request-body-bytes", max_request_body_bytes)
    from app.api.manifests import ManifestError
    from app.manager import run_embedded_controllers
    from app.server.clientauth import ClientAuth, parse_names
    from app.server.httpprotocol import ServiceProtocol
    from app.server.inspectauth import inspection_access
    from app.server.tls import CertReloader, TLSConfigError
    from app.sources.files import FileSource

    if (tls_cert_file is None) != (tls_private_key_file is None):
        _fail("--tls-cert-file and --tls-private-key-file go together")
    if client_ca_file is not None and tls_cert_file is None:
        _fail("--client-ca-file needs TLS: pass --tls-cert-file and --tls-private-key-file too")
    named = (allowed_client_names, allowed_webhook_client_names, allowed_inspection_client_names)
    if client_ca_file is None and any(named):
        _fail(
            "--allowed-client-names, --allowed-webhook-client-names and --allowed-inspection-client-names "
            "need --client-ca-file"
        )
    reloader = None
    if tls_cert_file is not None and tls_private_key_file is not None:
        try:  # reloaded on change, no restart
            reloader = CertReloader(tls_cert_file, tls_private_key_file, client_ca_file=client_ca_file)
        except TLSConfigError as exc:
            _fail(str(exc))
    else:
        log.warning("serving plain HTTP: pass --tls-cert-file/--tls-private-key-file in production")
    client_auth = None
    if client_ca_file is not None:
        client_auth = ClientAuth(
            parse_names(allowed_client_names),
            parse_names(allowed_webhook_client_names),
            parse_names(allowed_inspection_client_names),
        )
    else:
        log.warning(
            "no --client-ca-file: anyone who reaches the port may call the extender verbs (/filter, /prioritize, "
            "/preempt, /bind) and the webhooks"
        )
    # The plugins are imported here, by the command that runs them: every other koord command (the client
    # commands above all) starts without them, a third of a second sooner.
    from app.framework.config import ConfigError, default_config, load_config
    from app.plugins.registry import default_registry

    registry = default_registry()
    try:
        cfg = load_config(config, registry.names()) if config else default_config(registry.names())
        source = choose_source(cluster, kubeconfig)
        # Embedded mode: the manager's NodeSLO / batch-resource controllers run inside the service (never in
        # the webhooks role, which writes nothing). Against an API server `koord manager` runs them.
        embedded = isinstance(source, FileSource)
        background: list[BackgroundTask] = [run_embedded_controllers] if embedded and serves_extender(role) else []
        if not embedded:
            log.info(
                "colocation controllers (NodeSLO, batch-cpu/batch-memory) are not run by koord scheduler "
                "against an API server: run `koord manager` for them"
            )
        if reloader is not None:
            watcher = reloader

            async def tls_reload(_state: Any) -> None:
                await watcher.watch()

            background.append(tls_reload)
        leader = None
        if follow_leader_lease is not None:
            leader = _lease_follower(source, follow_leader_lease, leader_identity)
        inspection = inspection_access(source, client_auth.inspection_names if client_auth is not None else None)
        _log_inspection_access(inspection, role, host, port)
        app = create_app(
            source,
            cfg,
            registry=registry,
            assumed_pod_ttl=ttl,
            background=background,
            max_request_body_bytes=body_limit,
            client_auth=client_auth,
            role=role,
            leader=leader,
            inspection=inspection,
        )
        if isinstance(source, FileSource):
            # a bad cluster file: one line naming it, exit 2 (not a traceback from the lifespan); read after the
            # plugins are built so a bad --config is named first, whatever else lies in the cluster folder
            source.preload()
    except ConfigError as exc:
        _fail(f"invalid config{f' {config}' if config else ''}: {exc}")
    except ManifestError as exc:
        _fail(f"bad cluster file: {exc}")
    if cpu_slice_ms:  # on this thread, which runs the event loop (the threads it starts get the same)
        why_not = request_slice(cpu_slice_ms)
        if why_not is None:
            log.info("asked Linux for a %g ms CPU slice for the serving thread", cpu_slice_ms)
        else:
            log.info("no CPU slice asked (--cpu-slice-ms %g): %s", cpu_slice_ms, why_not)
    uvicorn.run(
        app,
        host=host,
        port=port,
        ssl_context_factory=(lambda _cfg, _default: reloader.context) if reloader is not None else None,
        log_config=None,  # uvicorn's loggers keep configure_logging's format
        log_level=effective_level,
        access_log=effective_level <= logging.DEBUG,  # one line per request: debugging only
        http=ServiceProtocol,  # httptools, the client certificate in the ASGI TLS extension, answers in one write
        loop="uvloop",
    )


@cli.command()
def explain(
    kind: Annotated[str | None, typer.Argument(help="pod (as kubectl names it) or reservation, with NAME.")] = None,
    name: Annotated[
        str | None, typer.Argument(help="The pod's name, read from the cluster, or the Reservation's.")
    ] = None,
    namespace: Annotated[str, typer.Option("-n", "--namespace", help="The pod's namespace.")] = "default",
    pod: Annotated[
        str | None, typer.Option(metavar="FILE", help="The pod from a YAML/JSON file instead; - reads stdin.")
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="kubeconfig to read the pod with, whose user's credentials also go to the service (default: as "
            "kubectl)."
        ),
    ] = None,
    context: Annotated[str | None, typer.Option(help="The kubeconfig context to use.")] = None,
    server: ServerOpt = DEFAULT_SERVER,
    nodes: Annotated[str | None, typer.Option(help="Comma-separated node names (default: every node).")] = None,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    client_certificate: ClientCertOpt = None,
    client_key: ClientKeyOpt = None,
) -> None:
    """Why is my pod pending? Per node: kube-scheduler's verdict, each plugin's, and the score.

    koord explain pod NAME -n NAMESPACE | koord explain --pod FILE | koord explain --pod - < pod.yaml

    koord explain reservation NAME: why no node fits a pending Reservation, and what preemption would take.
    """
    from app.cli.explain import (
        POD_KINDS,
        RESERVATION_KINDS,
        feasible_names,
        fetch_pod,
        read_pod_file,
        render_explain,
        render_reservation_explain,
    )

    if kind in RESERVATION_KINDS and name and pod is None:
        found = request(
            "GET",
            server,
            f"/apis/v1/plugins/Reservation/reservations/{name}/explain",
            insecure=insecure,
            ca=certificate_authority,
            client_cert=client_certificate,
            client_key=client_key,
            kubeconfig=kubeconfig,
            context=context,
        )
        emit(output, found, lambda wide: render_reservation_explain(found, wide), lambda: [f"reservation/{name}"])
        return
    if (kind is None) == (pod is None):
        _fail("name the pod (koord explain pod NAME -n NAMESPACE) or give --pod FILE (- for stdin), one of them")
    if pod is not None:
        obj = read_pod_file(pod)
    else:
        if kind not in POD_KINDS or not name:
            _fail(f"expected: koord explain pod NAME [-n NAMESPACE], got {' '.join(filter(None, [kind, name]))!r}")
        assert name is not None
        obj = fetch_pod(namespace, name, kubeconfig, context)
    body: dict[str, Any] = {"Pod": obj, "Nodes": None, "NodeNames": None}
    if nodes:
        body["NodeNames"] = [n.strip() for n in nodes.split(",") if n.strip()]
    answer = request(
        "POST",
        server,
        "/apis/v1/explain",
        insecure=insecure,
        ca=certificate_authority,
        body=body,
        client_cert=client_certificate,
        client_key=client_key,
        kubeconfig=kubeconfig,
        context=context,
    )
    emit(output, answer, lambda wide: render_explain(answer, wide), lambda: feasible_names(answer))


def _register_subcommands() -> None:
    """Commands that live in their own modules (each imports its heavy parts lazily)."""
    from agent.cli import agent
    from agent.devicedaemon.cli import device_daemon
    from app.cli.certs import certs
    from app.cli.gang import gang_app
    from app.cli.quota import quota_app
    from app.cli.reservation import reservation_app
    from app.cli.sim import sim
    from app.cli.snapshot import snapshot
    from app.cli.ui import ui
    from app.cli.whatif import SimCommand
    from app.descheduler.cli import descheduler_app
    from app.manager.cli import manager
    from runtimeproxy.cli import runtime_proxy

    cli.command(name="agent")(agent)
    cli.command(name="device-daemon")(device_daemon)
    cli.command(name="manager")(manager)
    cli.command(name="runtime-proxy")(runtime_proxy)
    cli.command(name="sim", cls=SimCommand)(sim)  # koord sim whatif: app/cli/whatif.py
    cli.command(name="snapshot")(snapshot)
    cli.command(name="certs")(certs)
    cli.command(name="ui")(ui)
    cli.add_typer(quota_app, name="quota")
    cli.add_typer(gang_app, name="gang")
    cli.add_typer(reservation_app, name="reservation")
    cli.add_typer(descheduler_app, name="descheduler")


_register_subcommands()


def main() -> None:
    """Entry point of the ``koord`` console script."""
    cli()
