"""The agent loop: states -> collection -> QoS strategies -> executor / evictions -> NodeMetric reports.

One thread, one tick per collection interval (upstream runs each part on its own 1 s timer; one loop
keeps the agent light and its rounds consistent). Every part fails soft: an unreadable file or an
unreachable API server is logged and the next tick tries again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.cgroups import CgroupLayout, CgroupPathError
from agent.collectors.cputopology import MachineTopology, TopologyReadError, read_machine_topology
from agent.collectors.gpu import GPUCollector
from agent.collectors.hostapps import HostApp, HostAppCollector, host_apps_of
from agent.collectors.node import NodeCollector, ProcessorInfo, processors
from agent.collectors.pods import CgroupUsageReader, PodCollector, collect_be
from agent.collectors.rdma import RDMAInfo, discover_rdma
from agent.cpumanagerstate import CPUManagerStateError, pod_cpu_allocs, read_cpu_manager_entries
from agent.evictor import Evictor
from agent.executor import CgroupExecutor
from agent.hostfiles import HostRoots
from agent.kubeletconfig import KubeletConfig
from agent.metriccache import MetricCache
from agent.metrics import AgentMetrics
from agent.prediction.loop import PredictionLoop
from agent.prediction.server import PredictionConfig
from agent.qos.blkio import BlkioPlanner
from agent.qos.context import (
    BE_CPU_REAL_LIMIT,
    BE_CPU_REQUEST,
    BE_CPU_USAGE,
    DEFAULT_FEATURES,
    NODE_CPU,
    NODE_MEMORY,
    SYS_CPU,
    SYS_MEMORY,
    QoSContext,
    host_app_cpu_key,
    host_app_memory_key,
    pod_cpu_key,
    pod_memory_key,
)
from agent.qos.cpuburst import BurstPlan, CPUBurst
from agent.qos.cpuset import CPUSetAllocator, CPUSetPlan, CPUSetRule, RuleError, rule_from_annotations
from agent.qos.cpusuppress import CPUSuppress, SuppressResult
from agent.qos.evict import CPU_EVICT_COOL_SECONDS, MEMORY_EVICT_COOL_SECONDS, be_cpu_victims, be_memory_victims
from agent.qos.isolation import Isolation
from agent.qos.netqos import NetQoS
from agent.qos.netqos import plan as net_plan
from agent.qos.resctrl import GROUPS, schemata_writes, task_writes
from agent.qos.resctrl import detect as detect_resctrl
from agent.qos.support import Dimension, anolis_support, blkio_support, gated, support_line
from agent.qos.sysconfig import system_writes
from agent.reporter import (
    CollectPolicy,
    MetricWriter,
    ReportError,
    build_status,
    go_duration_seconds,
    gpu_memory_key,
    gpu_pod_core_key,
    gpu_pod_memory_key,
    gpu_sm_key,
)
from agent.runtimehooks.freshpods import FreshPods, PodsRefresher
from agent.states.device import DeviceReportError, DeviceWriter, device_object, same_devices
from agent.states.nodeslo import NodeSLOIntake
from agent.states.pods import PodMeta, pod_meta
from agent.states.providers import StatesError, StatesProvider
from agent.topologyreport import TopologyStatus, TopologyWriter, build_topology_status
from agent.validator import NodeBounds, read_online_cpus
from app.api.quantity import QuantityError, milli_value, parse_resource_list

log = logging.getLogger("agent")

ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
#: Seconds between NodeResourceTopology re-checks when nothing changed (upstream's informer resync
#: re-reads the object; this re-reads it so an object edited or deleted by someone else is repaired).
TOPOLOGY_RESYNC_SECONDS = 600.0


def parse_feature_gates(text: str) -> set[str]:
    """``"BEMemoryEvict=true,BECPUSuppress=false"`` over the defaults -> the enabled gates.

    Raises:
        ValueError: unknown gate or a value other than true/false.
    """
    gates = dict(DEFAULT_FEATURES)
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or name not in gates or value.lower() not in ("true", "false"):
            raise ValueError(f"invalid feature gate {part!r}: expected one of {sorted(gates)} =true|false")
        gates[name] = value.lower() == "true"
    return {k for k, v in gates.items() if v}


@dataclass(slots=True)
class AgentConfig:
    """Agent settings (seconds unless noted).

    Attributes:
        interval: collection and QoS interval (upstream 1 s).
        states_interval: how often pods / NodeSLO are fetched again.
        report_interval: override of the NodeMetric report interval (None: from the NodeMetric spec, >= 30 s).
        reconcile_interval: isolation writes are planned again only when pods, their resources or the NodeSLO
            change; every ``reconcile_interval`` the files are read again and drift is repaired.
        proc: the proc mount; sys_cpu: ``/sys/devices/system/cpu``; sys_root: the sysfs mount (``/sys``;
            ``/host/sys`` in a container) the cpu topology, PCI devices and RDMA NICs are read from.
        discovery_interval: GPUs and RDMA NICs are discovered (and the Device rebuilt) this often (upstream's
            ``NodeTopologySyncInterval``, 3 s).
        device_interval: the Device object is written when it changed, and at least this often (seconds)
            so a Device edited or deleted by someone else is repaired.
        rdma: look for RDMA NICs under ``<sys_root>/class/infiniband``.
        kubelet_root: the kubelet's root dir, where its static CPU manager keeps ``cpu_manager_state``.
        resctrl_root: the resctrl mount (LLC and memory bandwidth per class).
        net_interface: the interface pods' traffic leaves by, shaped per class (None: no network QoS).
        net_netns: a named network namespace holding ``net_interface`` (None: the agent's own).
        prediction: the Prediction settings (:mod:`agent.prediction`); None leaves it off (no
            ``prodReclaimableMetric``, so the manager lends no mid resources).
    """

    node_name: str
    interval: float = 1.0
    states_interval: float = 5.0
    report_interval: float | None = None
    reconcile_interval: float = 30.0
    dry_run: bool = False
    features: set[str] = field(default_factory=lambda: {k for k, v in DEFAULT_FEATURES.items() if v})
    proc: Path = Path("/proc")
    sys_cpu: Path = Path("/sys/devices/system/cpu")
    sys_root: Path = Path("/sys")
    discovery_interval: float = 3.0
    device_interval: float = 60.0
    rdma: bool = True
    kubelet_root: Path = Path("/var/lib/kubelet")
    resctrl_root: Path = Path("/sys/fs/resctrl")
    net_interface: str | None = None
    net_netns: str | None = None
    prediction: PredictionConfig | None = None


def node_capacity(
    node: dict[str, Any] | None, machine_cpu: int, machine_memory: int
) -> tuple[int, int, dict[str, int], int]:
    """``(cpu milli, memory bytes, allocatable, reserved cpu milli)`` from the Node, the machine as fallback.

    Reserved cpu = max(capacity - allocatable, ``node.koordinator.sh/reservation`` cpu (``reservedCPUs`` counts cpus)).
    """
    status = (node or {}).get("status") or {}
    try:
        capacity = parse_resource_list(status.get("capacity"), field="status.capacity")
        allocatable = parse_resource_list(status.get("allocatable"), field="status.allocatable")
    except QuantityError as exc:
        log.warning("node %s: %s; using the machine's capacity", (node or {}).get("metadata", {}).get("name"), exc)
        capacity, allocatable = {}, {}
    cpu = capacity.get("cpu") or machine_cpu
    memory = capacity.get("memory") or machine_memory
    reserved = max(cpu - allocatable["cpu"], 0) if "cpu" in allocatable else 0
    raw = ((node or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_NODE_RESERVATION)
    if raw:
        try:
            anno = json.loads(raw)
            from agent.cgroups import parse_cpuset

            by_anno = (
                len(parse_cpuset(anno["reservedCPUs"])) * 1000
                if anno.get("reservedCPUs")
                else milli_value((anno.get("resources") or {}).get("cpu", 0))
            )
            reserved = max(reserved, by_anno)
        except (ValueError, TypeError, KeyError, AttributeError, QuantityError) as exc:
            log.warning("ignoring malformed %s: %s", ANNOTATION_NODE_RESERVATION, exc)
    return cpu, memory, allocatable, reserved


class Agent:
    """The node agent.

    Args:
        config: settings.
        layout: the node's cgroup layout.
        states: where pods, Node, NodeSLO and NodeMetric come from.
        writer: where NodeMetric reports go (None: not reported).
        evictor: carries out evictions.
        metrics: Prometheus metrics (a fresh registry by default).
        gpu: NVIDIA GPU discovery and usage (None: no NVML on this node).
        device_writer: where the Device object goes (None: not reported).
        topology_writer: where the NodeResourceTopology goes (None: not reported).
        kubelet_config: the kubelet's CPU manager / topology manager settings (None: unknown).
    """

    def __init__(
        self,
        config: AgentConfig,
        layout: CgroupLayout,
        states: StatesProvider,
        writer: MetricWriter | None,
        evictor: Evictor,
        metrics: AgentMetrics | None = None,
        gpu: GPUCollector | None = None,
        device_writer: DeviceWriter | None = None,
        topology_writer: TopologyWriter | None = None,
        kubelet_config: KubeletConfig | None = None,
    ) -> None:
        self.config = config
        self.gpu = gpu
        self.device_writer = device_writer
        self.rdmas: list[RDMAInfo] = []
        self.device: dict[str, Any] | None = None
        self._devices_at = -1e18
        self._device_written: dict[str, Any] | None = None
        self._device_written_at = -1e18
        self.layout = layout
        self.states = states
        self.writer = writer
        self.evictor = evictor
        self.metrics = metrics or AgentMetrics()
        self.host_roots = HostRoots(config.proc, config.sys_root, config.resctrl_root)
        self.executor = CgroupExecutor(
            layout, dry_run=config.dry_run, recorder=self.metrics, host_roots=self.host_roots
        )
        self.resctrl, self._resctrl_why = detect_resctrl(config.resctrl_root, config.proc)
        self.blkio = BlkioPlanner(config.sys_root)
        self.netqos = (
            NetQoS(config.net_interface, config.net_netns, dry_run=config.dry_run) if config.net_interface else None
        )
        self._slo_key: object = None
        self._slo_at = -1e18
        self.node_collector = NodeCollector(config.proc)
        self.pod_collector = PodCollector(layout)
        self.host_app_collector = HostAppCollector(CgroupUsageReader(layout))
        self.host_apps: list[HostApp] = []
        self.suppress = CPUSuppress()
        self.isolation = Isolation()
        self.cpuset = CPUSetAllocator()
        self.burst = CPUBurst()
        self.last_cpuset: CPUSetPlan | None = None
        self.last_burst: BurstPlan | None = None
        self._cpuset_key: object = None
        self._cpuset_at = -1e18
        self._cpuset_verified_at = -1e18
        self._cpuset_pending = False
        self._local_topology: tuple[int, TopologyStatus | None] = (-1, None)
        self._rule: tuple[TopologyStatus | None, CPUSetRule | None] = (None, None)
        self.processors: list[ProcessorInfo] = processors(config.sys_cpu)
        self.policy = CollectPolicy()
        retention = max([go_duration_seconds(d) for d in self.policy.durations] + [300.0]) + 10 * config.interval
        self.cache = MetricCache(config.interval, retention)
        self.pods: list[PodMeta] = []
        self.slo_intake = NodeSLOIntake(lambda field: self.metrics.nodeslo_refused.labels(field=field).inc())
        self.slo = self.slo_intake.spec
        self.capacity: tuple[int, int, dict[str, int], int] = (
            len(self.processors) * 1000,
            self._machine_memory(),
            {},
            0,
        )
        self.online_cpus = read_online_cpus(config.sys_cpu) or frozenset(p.cpu_id for p in self.processors)
        self.executor.set_bounds(self.node_bounds())
        self.last_tick = 0.0
        self.last_suppress: SuppressResult | None = None
        self._states_at = -1e18
        # the first NodeMetric goes out on the first tick that has node usage (upstream's wait.Until syncs at once),
        # not a report interval after the start or a restart
        self._report_at = -1e18
        self._memory_evict_at = -1e18
        self._cpu_evict_at = -1e18
        self._pod_labels: set[tuple[str, str, str]] = set()
        self._pod_gauges: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self.reports = 0
        #: bumped whenever pods, the NodeSLO or the capacity are rebuilt from the states
        self.generation = 0
        self._derived: tuple[list[PodMeta], dict[str, PodMeta], list[PodMeta]] = ([], {}, [])
        self._isolation_at = -1e18
        self._reconciled_at = -1e18
        self._isolation_pending = False
        self.topology_writer = topology_writer
        self.kubelet_config = kubelet_config
        self.machine: MachineTopology | None = None
        self.topology: TopologyStatus | None = None  # the last status published (or found unchanged)
        self._topology_generation = -1
        self._topology_next = -1e18
        self.prediction = PredictionLoop(config.prediction) if config.prediction is not None else None
        #: the runtime hooks' reads of the pod source (the kubelet's /pods), single-flight
        self.hook_pods = PodsRefresher(states.fetch_pods, lambda: self.pods, layout)

    def node_bounds(self) -> NodeBounds:
        """The executor's node-dependent bounds: cpu capacity = max(the Node's capacity, online cpus) in
        milli-cores (a Node that claims fewer cpus than the machine has does not narrow what the kubelet may
        have set), cpusets within the online cpus."""
        return NodeBounds(max(self.capacity[0], len(self.online_cpus) * 1000), self.online_cpus)

    def _machine_memory(self) -> int:
        try:
            return self.node_collector.memory_total()
        except OSError:
            return 0

    @property
    def report_interval(self) -> float:
        """Seconds between NodeMetric reports."""
        return self.config.report_interval or float(self.policy.report_seconds)

    def healthy(self) -> bool:
        """A tick completed within the last three intervals (plus slack)."""
        return time.time() - self.last_tick < 3 * self.config.interval + 5

    # -- parts ------------------------------------------------------------------------------------
    def refresh_states(self, now: float) -> None:
        """Fetch states when due; rebuild pod metas, the merged NodeSLO, capacity and the collect policy."""
        if now - self._states_at < self.config.states_interval:
            return
        self._states_at = now
        try:
            changed = self.states.refresh()
        except StatesError as exc:
            log.warning("keeping the last states: %s", exc)
            return
        if not changed and self.pods:
            return
        self.pods = [pod_meta(p, self.layout) for p in self.states.pods]
        self.generation += 1
        self.slo = self.slo_intake.update(self.states.node_slo)
        self.metrics.nodeslo_invalid.set(1 if self.slo_intake.refused else 0)
        self.host_apps = host_apps_of(self.layout, self.slo.host_applications)
        names = {app.name for app in self.host_apps}
        for key in self.cache.keys("host_app_"):
            if key.split("/", 1)[1] not in names:
                self.cache.drop(key)
        self.capacity = node_capacity(self.states.node, len(self.processors) * 1000, self._machine_memory())
        self.executor.set_bounds(self.node_bounds())
        self.policy = CollectPolicy.from_node_metric(self.states.node_metric)
        live = {p.uid for p in self.pods}
        for key in self.cache.keys("pod_"):
            if key.split("/", 1)[1] not in live:
                self.cache.drop(key)
        for key in self.cache.keys("gpu_pod_"):
            if key.split("/")[1] not in live:
                self.cache.drop(key)

    def refresh_devices(self, now: float) -> None:
        """Every ``discovery_interval``: discover GPUs and RDMA NICs, build the Device object, and write it when
        it changed or ``device_interval`` passed (upstream ``reportDevice``). Nothing is written without a writer."""
        if now - self._devices_at < self.config.discovery_interval:
            return
        self._devices_at = now
        gpus = self.gpu.discover() if self.gpu is not None else []
        self.rdmas = discover_rdma(self.config.sys_root) if self.config.rdma else []
        if self.device_writer is None:
            return
        node_uid = ((self.states.node or {}).get("metadata") or {}).get("uid")
        driver = self.gpu.driver_version if self.gpu is not None else ""
        try:
            desired = device_object(self.config.node_name, node_uid, gpus, self.rdmas, driver, now)
        except DeviceReportError as exc:
            log.warning("%s", exc)
            return
        self.device = desired
        written = self._device_written
        if (
            written is not None
            and same_devices(desired, written)
            and now - self._device_written_at < (self.config.device_interval)
        ):
            return
        try:
            self.device_writer.write(desired, create=bool(desired["spec"]["devices"]))
        except DeviceReportError as exc:
            log.warning("Device report failed: %s", exc)
            self.metrics.device_reports.labels(result="failed").inc()
            return
        self.metrics.device_reports.labels(result="success").inc()
        self._device_written = desired
        self._device_written_at = now

    def collect_gpus(self, now: float, retention: float) -> None:
        """GPU usage into the metric cache: per minor (SM percent, memory bytes) for the node and per pod."""
        if self.gpu is None or not self.gpu.gpus:
            return
        sample = self.gpu.usage()
        for minor, (sm, mem) in sample.node.items():
            self.cache.append(gpu_sm_key(minor), now, sm)
            self.cache.append(gpu_memory_key(minor), now, mem)
        for uid, per in sample.pods.items():
            for minor, (sm, mem) in per.items():
                self.cache.append(gpu_pod_core_key(uid, minor), now, sm, retention=retention)
                self.cache.append(gpu_pod_memory_key(uid, minor), now, mem, retention=retention)

    def known_pod(self, uid: str) -> PodMeta | None:
        """The pod with this uid in the current states (the runtime hooks' view), None when not (yet) known."""
        return self._pod_views()[0].get(uid)

    def fresh_pods(self, since: float) -> FreshPods:
        """The node's pods read from the pod source at or after ``since`` for the runtime hooks, single-flight
        (:class:`agent.runtimehooks.freshpods.PodsRefresher`); the agent's current pods when the source does not
        answer. The loop's own states are left alone. Never raises."""
        return self.hook_pods.get(since)

    def group_identity_supported(self, ctx: QoSContext) -> bool:
        """Whether the kernel offers ``cpu.bvt_warp_ns`` (checked once)."""
        return self.isolation.group_identity_supported(ctx)

    def _pod_views(self) -> tuple[dict[str, PodMeta], list[PodMeta]]:
        """``(pods by uid, active pods)`` of :attr:`pods`, computed again only when the list is replaced."""
        if self._derived[0] is not self.pods:
            self._derived = (self.pods, {p.uid: p for p in self.pods}, [p for p in self.pods if p.active])
        return self._derived[1], self._derived[2]

    def collect(self, now: float) -> None:
        """Node, pod and BE usage into the metric cache and the gauges."""
        t0 = time.perf_counter()
        try:
            node_cpu, node_memory = self.node_collector.collect(now)
        except (OSError, ValueError) as exc:
            log.warning("node usage not collected: %s", exc)
            node_cpu, node_memory = None, None
        if node_memory is not None:
            self.cache.append(NODE_MEMORY, now, node_memory)
            self.metrics.node_memory.set(node_memory)
        if node_cpu is not None:
            self.cache.append(NODE_CPU, now, node_cpu)
            self.metrics.node_cpu.set(node_cpu)
        sample = self.pod_collector.collect(self.pods, now)
        pod_retention = self.policy.aggregate_seconds + 10 * self.config.interval
        labels: set[tuple[str, str, str]] = set()
        by_uid = self._pod_views()[0]
        gauges = self._pod_gauges
        sum_cpu, sum_mem, all_cpu = 0.0, 0, True
        for uid, usage in sample.pods.items():
            pod = by_uid[uid]
            lab = (pod.namespace, pod.name, pod.qos.value)
            labels.add(lab)
            children = gauges.get(lab)
            if children is None:
                children = gauges[lab] = (self.metrics.pod_cpu.labels(*lab), self.metrics.pod_memory.labels(*lab))
            self.cache.append(pod_memory_key(uid), now, usage.memory, retention=pod_retention)
            children[1].set(usage.memory)
            sum_mem += usage.memory
            if usage.cpu is None:
                all_cpu = False
                continue
            self.cache.append(pod_cpu_key(uid), now, usage.cpu, retention=pod_retention)
            children[0].set(usage.cpu)
            sum_cpu += usage.cpu
        if labels != self._pod_labels:
            for lab in self._pod_labels - labels:
                gauges.pop(lab, None)
                for gauge in (self.metrics.pod_cpu, self.metrics.pod_memory):
                    with contextlib.suppress(KeyError):
                        gauge.remove(*lab)
            self._pod_labels = labels
        apps_cpu, apps_mem = 0.0, 0
        for name, usage in self.host_app_collector.collect(self.host_apps, now).items():
            self.cache.append(host_app_memory_key(name), now, usage.memory, retention=pod_retention)
            apps_mem += usage.memory
            if usage.cpu is not None:
                self.cache.append(host_app_cpu_key(name), now, usage.cpu, retention=pod_retention)
                apps_cpu += usage.cpu
        # system = node - pods - host applications (upstream's sysresource collector)
        if node_cpu is not None and all_cpu:
            self.cache.append(SYS_CPU, now, max(node_cpu - sum_cpu - apps_cpu, 0.0))
        if node_memory is not None:
            self.cache.append(SYS_MEMORY, now, max(node_memory - sum_mem - apps_mem, 0))
        self.collect_gpus(now, pod_retention)
        try:
            be = collect_be(self.layout, self.pod_collector.reader, self.pods, now)
        except (OSError, ValueError, CgroupPathError) as exc:
            log.debug("BE totals not collected: %s", exc)
        else:
            if be.usage is not None:
                self.cache.append(BE_CPU_USAGE, now, be.usage)
                self.cache.append(BE_CPU_REQUEST, now, be.request)
                self.cache.append(BE_CPU_REAL_LIMIT, now, be.real_limit)
                self.metrics.be_used.set(be.usage / 1000)
        self.metrics.collect_seconds.observe(time.perf_counter() - t0)

    def context(self, now: float) -> QoSContext:
        """The strategies' view of this round."""
        cpu, memory, allocatable, reserved = self.capacity
        return QoSContext(
            now=now,
            interval=self.config.interval,
            layout=self.layout,
            slo=self.slo,
            pods=self._pod_views()[1],
            cache=self.cache,
            processors=self.processors,
            capacity_cpu=cpu,
            capacity_memory=memory,
            allocatable=allocatable,
            reserved_cpu=reserved,
            features=self.config.features,
            host_apps=self.host_apps,
        )

    def enforce(self, now: float) -> None:
        """Run the strategies and hand their writes to the executor, then evict when needed."""
        ctx = self.context(now)
        planned = self.suppress.plan(ctx)
        if isinstance(planned, SuppressResult):
            self.last_suppress = planned
            self.executor.update_batch(planned.writes)
            cores = (planned.quota or 0) / 100_000 if planned.policy == "cfsQuota" else len(planned.cpus or [])
            self.metrics.be_suppress.labels(type=planned.policy).set(cores)
            self.metrics.be_suppress_ls.set(planned.ls_used_cores)
        else:
            self.executor.update_batch(planned)
        self.enforce_cpusets(ctx)
        if "CPUBurst" in self.config.features:
            self.last_burst = self.burst.plan(ctx)
            if self.last_burst is not None:
                self.executor.update_batch(self.last_burst.writes)
        self.isolate(ctx)
        self.enforce_slo_dimensions(ctx)
        if now - self._memory_evict_at >= MEMORY_EVICT_COOL_SECONDS:
            victims = be_memory_victims(ctx)
            if self._evict(victims):
                self._memory_evict_at = now
        if now - self._cpu_evict_at >= CPU_EVICT_COOL_SECONDS:
            victims = be_cpu_victims(ctx)
            if self._evict(victims):
                self._cpu_evict_at = now

    def isolate(self, ctx: QoSContext) -> None:
        """Hand the isolation writes to the executor when they may have changed: a new plan (pods, resources,
        NodeSLO or node memory changed), cgroups missing at the last attempt (retried every ``states_interval``
        seconds), or a reconcile every ``reconcile_interval`` seconds, which reads the files again to repair
        drift. (A v1 quota clamped by its parent's is raised by the executor when the parent's rises.)"""
        now = ctx.now
        key = (self.generation, ctx.capacity_memory, ctx.allocatable.get("memory"))
        writes, rebuilt = self.isolation.plan_cached(ctx, key)
        verify = now - self._reconciled_at >= self.config.reconcile_interval
        if not (
            rebuilt or verify or (self._isolation_pending and now - self._isolation_at >= self.config.states_interval)
        ):
            return
        missing = self.executor.missing_dirs
        self.executor.update_batch(writes, verify=verify)
        self._isolation_pending = self.executor.missing_dirs != missing
        self._isolation_at = now
        if verify:
            self._reconciled_at = now

    def dimensions(self) -> list[Dimension]:
        """What this node enforces of each differentiated-SLO dimension, and why not (the start-up line)."""
        features = self.config.features
        ctx = self.context(time.time())
        resctrl = (
            Dimension("LLC/MBA (resctrl)", True, f"CAT {self.resctrl.cat}, MBA {self.resctrl.mba}, {self.resctrl.root}")
            if self.resctrl is not None
            else Dimension("LLC/MBA (resctrl)", False, self._resctrl_why)
        )
        if self.netqos is None:
            net = Dimension("network", False, "no --net-interface given")
        else:
            ok, why = self.netqos.supported()
            net = gated(
                Dimension("network", ok, f"HTB on {self.netqos.interface}" if ok else why), "NetQOSByTC", features
            )
        return [
            Dimension("cpu", True, "suppress, burst, cpuset; group identity where cpu.bvt_warp_ns exists"),
            Dimension("memory min/low/high", True, f"cgroup {self.layout.version.value}"),
            anolis_support(self.isolation.anolis_memory_supported(ctx)),
            gated(resctrl, "RdtResctrl", features),
            gated(blkio_support(self.layout), "BlkIOReconcile", features),
            gated(Dimension("system memory", True, f"{self.host_roots.proc}/sys/vm"), "SystemConfig", features),
            net,
        ]

    def enforce_slo_dimensions(self, ctx: QoSContext) -> None:
        """LLC/MBA, disk IO, system memory and network per the NodeSLO: planned when the states change and
        every ``reconcile_interval`` (files read again); resctrl tasks are synced every round, so new processes
        join their class's group."""
        now = ctx.now
        features = self.config.features
        key = (self.generation, ctx.capacity_memory)
        verify = now - self._slo_at >= self.config.reconcile_interval
        if key != self._slo_key or verify:
            self._slo_key = key
            if verify:
                self._slo_at = now
            if self.resctrl is not None and "RdtResctrl" in features:
                for group in GROUPS:
                    self.executor.make_group_dir(self.resctrl.root / group)
                self.executor.update_host_batch(schemata_writes(ctx.slo, self.resctrl), verify=verify)
            if "BlkIOReconcile" in features:
                self.executor.update_batch(self.blkio.plan(self.layout, ctx.slo, ctx.pods), verify=verify)
            if "SystemConfig" in features:
                self.executor.update_host_batch(
                    system_writes(ctx.slo, ctx.capacity_memory, self.host_roots), verify=verify
                )
            if self.netqos is not None and "NetQOSByTC" in features:
                policies = ctx.slo.resource_qos_strategy.policies if ctx.slo.resource_qos_strategy else None
                tc = policies is None or (policies.net_qos_policy or "tc") == "tc"
                try:
                    wanted = net_plan(ctx.slo, ctx.pods) if tc else None
                except ValueError as exc:
                    log.warning("network QoS not planned: %s", exc)
                else:
                    if verify and wanted is not None and not self.netqos.present():
                        self.netqos.applied = None  # someone removed or replaced the qdisc: rebuild it
                    self.netqos.apply(wanted)
        if self.resctrl is not None and "RdtResctrl" in features:
            self.executor.update_host_batch(task_writes(self.layout, ctx.pods, self.resctrl))

    def cpuset_rule(self) -> CPUSetRule | None:
        """The shared pools and kubelet policy of the NodeResourceTopology: the one last published, else (no
        topology writer) the one this agent would publish for the current states, built once per generation;
        None when the machine's topology cannot be read or the annotations do not parse (logged)."""
        status = self.topology
        if status is None:
            generation, status = self._local_topology
            if generation != self.generation:
                status = None
                try:
                    if self.machine is None:
                        self.machine = read_machine_topology(self.config.sys_root, self.config.proc)
                    status = build_topology_status(
                        self.machine, self.kubelet_config, self.states.pods, self.states.node
                    )
                except TopologyReadError as exc:
                    log.warning("no cpu shared pools, only exclusive cpusets are enforced: %s", exc)
                self._local_topology = (self.generation, status)
        if status is None:
            return None
        if self._rule[0] is status:
            return self._rule[1]
        rule: CPUSetRule | None = None
        try:
            rule = rule_from_annotations(status.annotations)
        except RuleError as exc:
            log.warning("no cpu shared pools, only exclusive cpusets are enforced: %s", exc)
        self._rule = (status, rule)
        return rule

    def enforce_cpusets(self, ctx: QoSContext) -> None:
        """Plan the cpusets (:mod:`agent.qos.cpuset`) and hand them to the executor, parents first and widened
        before narrowed, when the pods or the shared pools changed, when a cgroup was missing at the last attempt
        (retried every ``states_interval``), and every ``reconcile_interval`` (files read again, drift repaired)."""
        now = ctx.now
        rule = self.cpuset_rule()
        key = (self.generation, rule)
        verify = now - self._cpuset_verified_at >= self.config.reconcile_interval
        changed = key != self._cpuset_key
        if not (changed or verify or (self._cpuset_pending and now - self._cpuset_at >= self.config.states_interval)):
            return
        plan = self.cpuset.plan(ctx, rule)
        self.last_cpuset = plan
        self._cpuset_key = key
        missing = self.executor.missing_dirs
        self.executor.update_leveled(plan.levels, verify=verify)
        self.executor.update_batch(plan.quota_writes, verify=verify)
        self._cpuset_pending = self.executor.missing_dirs != missing or any(
            not self.layout.exists(w.rel_dir, "cpuset") for w in plan.levels[0]
        )
        self._cpuset_at = now
        if verify:
            self._cpuset_verified_at = now

    def _evict(self, victims: list[Any]) -> bool:
        done = False
        for v in victims:
            ok = self.evictor.evict(v.pod, v.reason)
            self.metrics.evictions.labels(reason=v.reason, result="success" if ok else "failed").inc()
            done = done or ok
        return done

    def report(self, now: float, force: bool = False) -> bool:
        """Write a NodeMetric when the report interval passed (or ``force``); True when written."""
        if self.writer is None or (not force and now - self._report_at < self.report_interval):
            return False
        gpus = self.gpu.gpus if self.gpu is not None else None
        reclaimable = None
        if self.prediction is not None:
            reclaimable = self.prediction.prod_reclaimable(self.pods, (self.capacity[0], self.capacity[1]), now)
        status = build_status(self.cache, self.pods, now, self.policy, self.host_apps, gpus, reclaimable)
        if status is None:
            return False
        self._report_at = now
        try:
            # the spec says the interval the agent really reports at (--report-interval overrides the NodeMetric's)
            spec_policy = replace(self.policy, report_seconds=max(1, round(self.report_interval)))
            self.writer.write(self.config.node_name, spec_policy.spec(), status)
        except ReportError as exc:
            log.warning("NodeMetric report failed: %s", exc)
            self.metrics.reports.labels(result="failed").inc()
            return False
        self.metrics.reports.labels(result="success").inc()
        self.reports += 1
        return True

    def report_topology(self, now: float) -> bool:
        """Publish the NodeResourceTopology when the states changed or the resync is due, and only when
        its content changed (:mod:`agent.topologyreport`); True when an object was written. The machine's
        topology is read once; a failure is logged and retried after the states interval."""
        if self.topology_writer is None:
            return False
        if self.generation == self._topology_generation and now < self._topology_next:
            return False
        self._topology_generation = self.generation
        retry_at = now + max(self.config.states_interval, 5.0)
        if self.machine is None:
            try:
                self.machine = read_machine_topology(self.config.sys_root, self.config.proc)
            except TopologyReadError as exc:
                log.warning("cpu topology not reported: %s", exc)
                self.metrics.topology_reports.labels(result="failed").inc()
                self._topology_next = retry_at
                return False
        allocs = None
        if self.kubelet_config is not None and self.kubelet_config.cpu_manager_policy == "static":
            try:
                entries = read_cpu_manager_entries(self.config.kubelet_root)
            except CPUManagerStateError as exc:
                log.warning("NodeResourceTopology not reported: %s", exc)
                self.metrics.topology_reports.labels(result="failed").inc()
                self._topology_next = retry_at
                return False
            allocs = pod_cpu_allocs(entries, self.states.pods)
        status = build_topology_status(self.machine, self.kubelet_config, self.states.pods, self.states.node, allocs)
        if status == self.topology and now < self._topology_next:
            return False
        try:
            written = self.topology_writer.publish(self.config.node_name, status, self.states.node)
        except ReportError as exc:
            log.warning("NodeResourceTopology report failed: %s", exc)
            self.metrics.topology_reports.labels(result="failed").inc()
            self._topology_next = retry_at
            return False
        self.metrics.topology_reports.labels(result="written" if written else "unchanged").inc()
        self.topology = status
        self._topology_next = now + TOPOLOGY_RESYNC_SECONDS
        return written

    def tick(self, now: float | None = None) -> None:
        """One round: states (when due), topology report (when changed), collection, enforcement, NodeMetric
        report (when due)."""
        now = time.time() if now is None else now
        self.refresh_states(now)
        self.refresh_devices(now)
        # before enforcement: the cpuset strategy takes the shared pools from the topology just published
        self.report_topology(now)
        self.collect(now)
        # only once the states have synced: the first round restores checkpoints and removes those of unknown
        # pods, so an empty pod list from an unreachable API server must not get there (upstream waits for its
        # informer's HasSynced)
        if self.prediction is not None and self.generation > 0:
            self.prediction.tick(self.cache, self.pods, now)
        self.enforce(now)
        self.report(now)
        self.last_tick = time.time()

    def run(self, stop: threading.Event) -> None:
        """Tick every interval until ``stop`` is set (drift-free: ticks stay on the interval grid)."""
        log.info(
            "agent on node %s: %s, cgroup %s %s %s, interval %.1fs%s",
            self.config.node_name,
            self.states.description,
            self.layout.version.value,
            self.layout.driver.value,
            self.layout.root / self.layout.kubepods,
            self.config.interval,
            " (dry-run)" if self.config.dry_run else "",
        )
        log.info("%s", support_line(self.dimensions()))
        next_at = time.monotonic()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # one bad round must not stop the agent
                log.exception("agent round failed")
            next_at += self.config.interval
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
                delay = 0
            stop.wait(delay)
