"""``koord device-daemon``: upstream's koord-device-daemon (``cmd/koord-device-daemon/main.go``), which scans the
node's devices and labels the node with them, periodically or once.

Flags as upstream, with its environment variables: ``--oneshot`` (``KDD_ONESHOT``), ``--no-timestamp``
(``KDD_NO_TIMESTAMP``), ``--sleep-interval`` (a Go duration, default ``900s``, ``KDD_SLEEP_INTERVAL``),
``--prints-output-file`` (``KDD_PRINTS_OUTPUT_FILE``). Without ``--prints-output-file`` the labels go onto the
Node named by ``--node-name`` (``NODE_NAME``) through the API server; with it, into that
node-feature-discovery feature file and nowhere else. Exit codes: 0 done (or stopped), 1 a ``--oneshot``
round could not be written, 2 bad flags or no usable Kubernetes configuration.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from app.api.logsetup import LogFormat, LogLevel, configure_logging


def device_daemon(
    oneshot: Annotated[bool, typer.Option(envvar="KDD_ONESHOT", help="Label once and exit.")] = False,
    no_timestamp: Annotated[
        bool, typer.Option(envvar="KDD_NO_TIMESTAMP", help="Do not add the timestamp to the labels.")
    ] = False,
    sleep_interval: Annotated[
        str, typer.Option(envvar="KDD_SLEEP_INTERVAL", help="Time to sleep between labeling (Go duration).")
    ] = "900s",
    prints_output_file: Annotated[
        Path | None,
        typer.Option(
            envvar="KDD_PRINTS_OUTPUT_FILE",
            help="Write a node-feature-discovery feature file here instead of labelling the Node.",
        ),
    ] = None,
    node_name: Annotated[
        str | None, typer.Option(envvar="NODE_NAME", help="The Node to label (without --prints-output-file).")
    ] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig (default: in-cluster or ~/.kube/config).")] = None,
    sys_root: Annotated[Path, typer.Option(help="sysfs mount (/host/sys in a container).")] = Path("/sys"),
    gpu: Annotated[bool, typer.Option(help="Scan NVIDIA GPUs through NVML (extra koordinator-py[gpu]).")] = True,
    rdma: Annotated[bool, typer.Option(help="Scan RDMA NICs in sysfs.")] = True,
    nvml_capture: Annotated[
        Path | None, typer.Option(help="Answer NVML from a capture file (nvml.json) instead of the driver.")
    ] = None,
    log_level: Annotated[LogLevel, typer.Option(help="Log level.")] = LogLevel.info,
    log_format: Annotated[LogFormat, typer.Option(help="Log format.")] = LogFormat.text,
    verbosity: Annotated[int, typer.Option("-v", "--v", min=0, help="klog-style verbosity; 4 or more logs DEBUG.")] = 0,
) -> None:
    """Discover the node's devices (NVIDIA GPUs, RDMA NICs) and label the node with them."""
    from agent.collectors.nvml import NVML, NVMLError, open_nvml
    from agent.devicedaemon.daemon import DaemonConfig, DeviceDaemon
    from agent.devicedaemon.registry import manager_map
    from agent.devicedaemon.writer import DeviceDaemonError, FeatureFileWriter, NodeLabelWriter, Writer
    from app.api.duration import parse_duration

    configure_logging(log_level, log_format, verbosity)
    log = logging.getLogger("agent.devicedaemon")

    def fail(message: str, code: int = 2) -> None:
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(code)

    try:
        interval = parse_duration(sleep_interval)
    except ValueError as exc:
        fail(f"--sleep-interval: {exc}")
        return
    if interval <= 0:
        fail(f"--sleep-interval must be > 0, got {sleep_interval!r}")
    nvml: NVML | None = None
    try:
        nvml = open_nvml(nvml_capture, gpu, log)
    except ValueError as exc:
        fail(str(exc))
    writer: Writer
    if prints_output_file is not None:
        if prints_output_file.is_dir():
            fail(f"--prints-output-file {prints_output_file} is a directory; name the feature file")
        writer = FeatureFileWriter(prints_output_file)
    else:
        if not node_name:
            fail("no --prints-output-file, so the Node is labelled: --node-name (or NODE_NAME) is required")
            return
        from app.client.sync import Client

        try:
            client = Client.from_config(str(kubeconfig) if kubeconfig else None)
        except Exception as exc:  # ConfigException, OSError
            fail(f"no usable Kubernetes configuration: {exc}")
            return
        writer = NodeLabelWriter(client, node_name)
    daemon = DeviceDaemon(
        manager_map(nvml=nvml, sys_root=sys_root, rdma=rdma),
        writer,
        DaemonConfig(oneshot=oneshot, no_timestamp=no_timestamp, sleep_interval=interval),
    )
    stop = threading.Event()
    if not oneshot and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        daemon.run(stop)
    except DeviceDaemonError as exc:
        fail(str(exc), 1)
    finally:
        if nvml is not None:
            try:
                nvml.shutdown()
            except NVMLError as exc:
                log.debug("nvmlShutdown: %s", exc)
