"""`koord agent`: the node agent (koordlet): metrics, NodeMetric reporting and QoS enforcement."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.api.logsetup import LogFormat, LogLevel, configure_logging

if TYPE_CHECKING:
    from agent.cgroups import CgroupLayout

#: Set in the environment once ``koord agent`` re-executed into ``python -m agent`` (never twice).
LEAN_ENV = "KOORD_AGENT_LEAN"


def reexec_lean() -> None:
    """When started as ``koord agent ...``, replace this process (same pid) by ``python -P -m agent ...`` with the
    same arguments: ``koord`` imports every command's dependencies, ~25 MB the agent never uses. Does nothing
    when already lean, when not started by the ``koord`` script (tests invoke the command in-process), or
    when the exec fails (the agent then runs here)."""
    if os.environ.get(LEAN_ENV) or Path(sys.argv[0]).name != "koord" or sys.argv[1:2] != ["agent"]:
        return
    os.environ[LEAN_ENV] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, [sys.executable, "-P", "-m", "agent", *sys.argv[2:]])
    except OSError:
        return


def warn_missing_kubepods(layout: CgroupLayout) -> bool:
    """Log a warning when the kubepods cgroup of ``layout`` does not exist (a wrong ``--cgroup-root`` or
    ``--kubepods``: no pod would ever be seen or managed); True when it does not."""
    kubepods_dir = layout.dir_path("cpu", layout.kubepods)
    if kubepods_dir.is_dir():
        return False
    logging.getLogger("agent").warning(
        "kubepods cgroup %s does not exist: no pod usage is collected and no QoS is applied until it does "
        "(check --cgroup-root and --kubepods: kubepods for cgroupfs, kubepods.slice for systemd)",
        kubepods_dir,
    )
    return True


def agent(
    node_name: Annotated[
        str, typer.Option(envvar="NODE_NAME", help="This node's name (pods with this spec.nodeName).")
    ],
    cgroup_root: Annotated[Path, typer.Option(help="cgroup mount root.")] = Path("/sys/fs/cgroup"),
    kubepods: Annotated[
        str, typer.Option(help="kubepods parent under the root (kubepods, or kubepods.slice for systemd).")
    ] = "kubepods",
    interval: Annotated[float, typer.Option(help="Collection and QoS interval, seconds.")] = 1.0,
    host: Annotated[str, typer.Option(help="Address for /metrics and /healthz.")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="Port for /metrics and /healthz (0: do not serve).")] = 9316,
    cluster: Annotated[
        Path | None, typer.Option(help="Embedded mode: the cluster files the scheduler service reads.")
    ] = None,
    nodemetric_dir: Annotated[
        Path | None, typer.Option(help="Embedded mode: directory the NodeMetric YAML is written to.")
    ] = None,
    events_file: Annotated[
        Path | None, typer.Option(help="Embedded mode: JSON-lines file recording evictions.")
    ] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig (default: in-cluster or ~/.kube/config).")] = None,
    kubelet_url: Annotated[
        str | None, typer.Option(help="Discover pods from the kubelet, e.g. https://127.0.0.1:10250.")
    ] = None,
    kubelet_insecure: Annotated[bool, typer.Option(help="Do not verify the kubelet's certificate.")] = False,
    proc_root: Annotated[Path, typer.Option(help="proc mount (/host/proc in a container).")] = Path("/proc"),
    sys_root: Annotated[
        Path, typer.Option(help="sysfs mount (/host/sys in a container): CPU topology, PCI devices, RDMA NICs.")
    ] = Path("/sys"),
    kubelet_config: Annotated[
        Path | None,
        typer.Option(help="The kubelet's config file: CPU manager policy, reserved CPUs, topology manager policy."),
    ] = None,
    kubelet_root_dir: Annotated[
        Path, typer.Option(help="The kubelet's root dir (its static CPU manager's cpu_manager_state is read there).")
    ] = Path("/var/lib/kubelet"),
    feature_gates: Annotated[
        str, typer.Option(help="e.g. BEMemoryEvict=true,BECPUEvict=true (defaults as koordlet).")
    ] = "",
    report_interval: Annotated[
        float | None, typer.Option(help="Override the NodeMetric report interval, seconds.")
    ] = None,
    states_interval: Annotated[float, typer.Option(help="Seconds between pod / NodeSLO refreshes.")] = 5.0,
    dry_run: Annotated[
        bool, typer.Option(help="Plan and log every cgroup write and eviction; change nothing.")
    ] = False,
    log_level: Annotated[LogLevel, typer.Option(help="debug, info, warning or error.")] = LogLevel.info,
    log_format: Annotated[LogFormat, typer.Option(help="text or json (one object per line).")] = LogFormat.text,
    verbosity: Annotated[int, typer.Option("-v", "--v", min=0, help="klog-style verbosity; 4 or more logs DEBUG.")] = 0,
    gpu: Annotated[
        bool, typer.Option(help="Report NVIDIA GPUs through NVML (needs the extra koordinator-py[gpu] and a driver).")
    ] = True,
    nvml_capture: Annotated[
        Path | None, typer.Option(help="Answer NVML from a capture file (nvml.json) instead of the driver.")
    ] = None,
    resctrl_root: Annotated[
        Path, typer.Option(help="resctrl mount (LLC and memory bandwidth per QoS class; not mounted by the agent).")
    ] = Path("/sys/fs/resctrl"),
    net_interface: Annotated[
        str | None,
        typer.Option(help="Interface shaped per QoS class with HTB (NodeSLO networkQOS); none: no network QoS."),
    ] = None,
    net_netns: Annotated[
        str | None, typer.Option(help="Named network namespace holding --net-interface (default: the agent's own).")
    ] = None,
    device_interval: Annotated[
        float, typer.Option(help="Write the Device object at least this often, seconds (and whenever it changes).")
    ] = 60.0,
    runtime_hooks_addr: Annotated[
        str,
        typer.Option(
            help="Serve the RuntimeHookService for koord runtime-proxy on this unix socket "
            "(koordlet: /host-var-run-koordlet/koordlet.sock in its DaemonSet; empty: no hook server)."
        ),
    ] = "",
    runtime_hooks_host_endpoint: Annotated[
        str, typer.Option(help="The hook server socket's path on the host, written into the registration.")
    ] = "/var/run/koordlet/koordlet.sock",
    runtime_hooks_config_path: Annotated[
        str,
        typer.Option(help="Where koord runtime-proxy reads hook server registrations (koordlet.json); empty: none."),
    ] = "/etc/runtime/hookserver.d",
    runtime_hooks_failure_policy: Annotated[
        str, typer.Option(help="Failure policy in the registration: Ignore (a failed hook never fails a pod) or Fail.")
    ] = "Ignore",
    prediction: Annotated[
        bool, typer.Option(help="Predict prod pods' peaks and report prodReclaimableMetric (the Mid tier's input).")
    ] = True,
    prediction_checkpoint_filepath: Annotated[
        Path | None,
        typer.Option(
            help="Directory of the prediction checkpoints (default /prediction-checkpoints; embedded mode: "
            "NODEMETRIC_DIR/prediction-checkpoints)."
        ),
    ] = None,
    prediction_safety_margin_percent: Annotated[
        int, typer.Option(min=0, help="Redundancy kept above the predicted peak, percent.")
    ] = 10,
) -> None:
    """Run the node agent: usage from /proc and cgroups, NodeMetric reports, BE isolation, suppression and evictions."""
    reexec_lean()
    import signal
    import threading

    from agent.cgroups import CgroupLayout, CgroupPathError
    from agent.collectors.gpu import GPUCollector
    from agent.collectors.nvml import NVML, NVMLError, open_nvml
    from agent.daemon import Agent, AgentConfig, parse_feature_gates
    from agent.evictor import APIEvictor, Evictor, RecordingEvictor
    from agent.kubeletconfig import KubeletConfig, KubeletConfigError, read_kubelet_config
    from agent.reporter import APIMetricWriter, FileMetricWriter, MetricWriter
    from agent.states.device import APIDeviceWriter, DeviceWriter, FileDeviceWriter
    from agent.states.providers import APIServerStates, FileStates, StatesProvider
    from agent.topologyreport import APITopologyWriter, FileTopologyWriter, TopologyWriter
    from app.api.metricsserver import serve

    configure_logging(log_level, log_format, verbosity)
    err = typer.echo

    def fail(message: str) -> None:
        err(f"error: {message}", err=True)
        raise typer.Exit(2)

    if interval <= 0:
        fail("--interval must be > 0")
    try:
        features = parse_feature_gates(feature_gates)
        layout = CgroupLayout.detect(cgroup_root, kubepods)
    except (ValueError, CgroupPathError) as exc:
        fail(str(exc))
        return
    warn_missing_kubepods(layout)
    if device_interval <= 0:
        fail("--device-interval must be > 0")
    nvml: NVML | None = None
    try:
        nvml = open_nvml(nvml_capture, gpu, logging.getLogger("agent"))
    except ValueError as exc:
        fail(str(exc))
    gpus = GPUCollector(nvml, sys_root=sys_root, proc_root=proc_root) if nvml is not None else None
    kubelet: KubeletConfig | None = None
    if kubelet_config is not None:
        try:
            kubelet = read_kubelet_config(kubelet_config)
        except KubeletConfigError as exc:
            fail(f"--kubelet-config {exc}")
    topology_writer: TopologyWriter | None
    states: StatesProvider
    writer: MetricWriter | None
    device_writer: DeviceWriter | None
    evictor: Evictor
    if cluster is not None:
        if not cluster.exists():
            fail(f"--cluster {cluster}: no such file or directory")
        states = FileStates(node_name, cluster)
        writer = FileMetricWriter(nodemetric_dir) if nodemetric_dir else None
        device_writer = FileDeviceWriter(nodemetric_dir) if nodemetric_dir else None
        topology_writer = FileTopologyWriter(nodemetric_dir) if nodemetric_dir else None
        default_events = (nodemetric_dir / "agent-events.jsonl") if nodemetric_dir else None
        evictor = RecordingEvictor(node_name, events_file or default_events, dry_run)
    else:
        from app.client.sync import Client  # httpx and the kubernetes package: Kubernetes mode only

        try:
            client = Client.from_config(str(kubeconfig) if kubeconfig else None)
        except Exception as exc:  # ConfigException, OSError
            fail(f"no --cluster and no usable Kubernetes configuration: {exc}")
            return
        states = APIServerStates(node_name, client, kubelet_url=kubelet_url, kubelet_insecure=kubelet_insecure)
        writer = APIMetricWriter(client)
        device_writer = APIDeviceWriter(client)
        topology_writer = APITopologyWriter(client)
        evictor = APIEvictor(node_name, client, dry_run)
    prediction_config = None
    if prediction:
        from agent.prediction.server import PredictionConfig

        ckpt_dir = prediction_checkpoint_filepath
        if ckpt_dir is None and cluster is None:
            ckpt_dir = Path("/prediction-checkpoints")
        elif ckpt_dir is None and nodemetric_dir is not None:
            ckpt_dir = nodemetric_dir / "prediction-checkpoints"
        if ckpt_dir is not None:
            prediction_config = PredictionConfig(
                checkpoint_dir=ckpt_dir, safety_margin_percent=prediction_safety_margin_percent
            )
    config = AgentConfig(
        node_name=node_name,
        interval=interval,
        states_interval=states_interval if cluster is None else min(states_interval, 1.0),
        report_interval=report_interval,
        dry_run=dry_run,
        features=features,
        proc=proc_root,
        sys_root=sys_root,
        device_interval=device_interval,
        kubelet_root=kubelet_root_dir,
        resctrl_root=resctrl_root,
        net_interface=net_interface,
        net_netns=net_netns,
        prediction=prediction_config,
    )
    the_agent = Agent(
        config,
        layout,
        states,
        writer,
        evictor,
        gpu=gpus,
        device_writer=device_writer,
        topology_writer=topology_writer,
        kubelet_config=kubelet,
    )
    hook_server = None
    if runtime_hooks_addr:
        from agent.executor import CgroupExecutor
        from agent.runtimehooks.server import HookServerOptions, RuntimeHookServer
        from app.api.runtime.config import FailurePolicy

        if runtime_hooks_failure_policy not in (FailurePolicy.FAIL, FailurePolicy.IGNORE):
            fail(f"--runtime-hooks-failure-policy {runtime_hooks_failure_policy!r}: expected Ignore or Fail")
        hook_executor = CgroupExecutor(layout, dry_run=dry_run, recorder=the_agent.metrics)
        hook_executor.set_bounds(the_agent.node_bounds())
        hook_server = RuntimeHookServer(
            the_agent,
            hook_executor,
            HookServerOptions(
                addr=runtime_hooks_addr,
                host_endpoint=runtime_hooks_host_endpoint,
                config_path=Path(runtime_hooks_config_path) if runtime_hooks_config_path else None,
                failure_policy=FailurePolicy(runtime_hooks_failure_policy),
            ),
            recorder=the_agent.metrics,
        )
        try:
            hook_server.start()
        except OSError as exc:
            fail(f"--runtime-hooks-addr {runtime_hooks_addr}: {exc}")
    if port:
        try:
            serve(host, port, the_agent.metrics.registry, the_agent.healthy)
        except OSError as exc:
            fail(f"cannot serve on {host}:{port}: {exc}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        the_agent.run(stop)
    finally:
        if hook_server is not None:
            hook_server.stop()
        if nvml is not None:
            try:
                nvml.shutdown()
            except NVMLError as exc:
                logging.getLogger("agent").debug("nvmlShutdown: %s", exc)
