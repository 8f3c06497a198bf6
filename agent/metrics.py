"""The agent's Prometheus metrics (names follow upstream ``pkg/koordlet/metrics``, subsystem ``koordlet``)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

disable_created_metrics()  # no *_created series, as the service and the manager


class AgentMetrics:
    """One registry per agent (tests run several agents in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.node_cpu = Gauge("koordlet_node_used_cpu_cores", "Node cpu usage in cores.", registry=r)
        self.node_memory = Gauge("koordlet_node_used_memory_bytes", "Node memory usage without page cache.", registry=r)
        self.pod_cpu = Gauge(
            "koordlet_pod_used_cpu_cores", "Pod cpu usage in cores.", ["pod_namespace", "pod_name", "qos"], registry=r
        )
        self.pod_memory = Gauge(
            "koordlet_pod_used_memory_bytes",
            "Pod memory working set.",
            ["pod_namespace", "pod_name", "qos"],
            registry=r,
        )
        self.be_suppress = Gauge(
            "koordlet_be_suppress_cpu_cores", "BE cpu suppression target in cores.", ["type"], registry=r
        )
        self.be_suppress_ls = Gauge(
            "koordlet_be_suppress_ls_used_cpu_cores", "Non-BE pod cpu usage seen by cpu suppress.", registry=r
        )
        self.be_used = Gauge("koordlet_be_suppress_be_used_cpu_cores", "BE cpu usage in cores.", registry=r)
        self.cgroup_writes = Counter(
            "koordlet_cgroup_writes",
            "Cgroup writes by result (written, unchanged, dry_run, invalid, out_of_bounds, missing, error).",
            ["resource", "result"],
            registry=r,
        )
        self.nodeslo_refused = Counter(
            "koordlet_nodeslo_refused",
            "NodeSLO fields refused on intake (out of upstream's range or malformed); the last good spec stays.",
            ["field"],
            registry=r,
        )
        self.nodeslo_invalid = Gauge(
            "koordlet_nodeslo_invalid",
            "1 while the newest NodeSLO is refused and the last good one is in force.",
            registry=r,
        )
        self.evictions = Counter("koordlet_pod_eviction", "Pods evicted by reason.", ["reason", "result"], registry=r)
        self.collect_seconds = Histogram(
            "koordlet_collect_duration_seconds",
            "Time of one collection round.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=r,
        )
        self.reports = Counter("koordlet_nodemetric_reports", "NodeMetric reports by result.", ["result"], registry=r)
        self.device_reports = Counter(
            "koordlet_device_reports", "Device object writes (only when it changed) by result.", ["result"], registry=r
        )
        self.topology_reports = Counter(
            "koordlet_node_topology_reports",
            "NodeResourceTopology reports by result (written, unchanged, failed).",
            ["result"],
            registry=r,
        )
        self.runtime_hooks = Counter(
            "koordlet_runtime_hooks",
            "RuntimeHookService calls from koord runtime-proxy by hook and result (success, failed: the request "
            "was answered with its own values).",
            ["hook", "result"],
            registry=r,
        )
        self._write_counters: dict[tuple[str, str], Any] = {}

    def runtime_hook(self, hook: str, result: str) -> None:
        """Count one runtime hook call (the hook server's HookRecorder)."""
        self.runtime_hooks.labels(hook=hook, result=result).inc()

    def cgroup_write(self, resource: str, result: str) -> None:
        """Count one executor outcome (the executor's WriteRecorder)."""
        key = (resource, result)
        child = self._write_counters.get(key)
        if child is None:
            child = self._write_counters[key] = self.cgroup_writes.labels(resource=resource, result=result)
        child.inc()
