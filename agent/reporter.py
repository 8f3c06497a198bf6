"""NodeMetric reports: built from the metric cache, written to a file (embedded) or the status subresource.

Follows upstream ``statesinformer/impl/states_nodemetric.go``: ``nodeUsage``/``systemUsage`` are averages
over the aggregate window (default 300 s, min 60 s); ``aggregatedNodeUsages``/``aggregatedSystemUsages``
hold avg/p50/p90/p95/p99 for every configured duration (default 5m, 10m, 30m) and are left empty while
the samples span less than half the duration (cold start); ``podsMetric`` is sorted by namespace then
name with the koord priority class and QoS of each pod. cpu is written as milli-cores
(``NewMilliQuantity``), memory in bytes (``NewQuantity(BinarySI)``).

GPU usage (``collectNodeGPUMetric`` / ``collectPodGPUMetric``): ``nodeUsage.devices`` and each pod's
``podUsage.devices`` list one entry per GPU with samples in the window: ``type: gpu``, ``id`` (UUID),
``minor``, ``health`` (the GPU's current health; upstream leaves it unset), and resources
``koordinator.sh/gpu-core`` (average SM utilisation, percent), ``koordinator.sh/gpu-memory`` (average
used bytes) and ``koordinator.sh/gpu-memory-ratio`` (``int(100 * used / total)``); each aggregated node
usage (avg, p50, ... over a duration, past its cold start) carries the same entries by that aggregation.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from agent.collectors.gpu import GPUInfo
from agent.collectors.hostapps import HostApp
from agent.metriccache import AGGREGATIONS, MetricCache
from agent.qos.context import (
    NODE_CPU,
    NODE_MEMORY,
    SYS_CPU,
    SYS_MEMORY,
    host_app_cpu_key,
    host_app_memory_key,
    pod_cpu_key,
    pod_memory_key,
)
from agent.states.pods import PodMeta
from app.api import devicenames as dn
from app.api.kinds import KINDS
from app.api.quantity import format_resource, format_resource_list
from app.api.slo import NodeMetric
from app.api.timeparse import format_time
from app.client.errors import ApiError, Conflict, NotFound

if TYPE_CHECKING:
    from app.client.sync import Client

log = logging.getLogger("agent.reporter")

#: libyaml's emitter when PyYAML has it (~30x faster than the pure-Python one), same safe subset.
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

DEFAULT_AGGREGATE_SECONDS = 300
MIN_AGGREGATE_SECONDS = 60
DEFAULT_REPORT_SECONDS = 60
MIN_REPORT_SECONDS = 30
DEFAULT_DURATIONS = ("5m0s", "10m0s", "30m0s")
VALIDATE_TIME_RANGE_RATIO = 0.5

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def gpu_sm_key(minor: int) -> str:
    """Series key of a GPU's summed SM utilisation (percent)."""
    return f"gpu_core/{minor}"


def gpu_memory_key(minor: int) -> str:
    """Series key of a GPU's summed process memory (bytes)."""
    return f"gpu_memory/{minor}"


def gpu_pod_core_key(uid: str, minor: int) -> str:
    """Series key of a pod's SM utilisation on GPU ``minor`` (percent)."""
    return f"gpu_pod_core/{uid}/{minor}"


def gpu_pod_memory_key(uid: str, minor: int) -> str:
    """Series key of a pod's memory on GPU ``minor`` (bytes)."""
    return f"gpu_pod_memory/{uid}/{minor}"


class ReportError(Exception):
    """A report could not be built or written; the message says why."""


def go_duration_seconds(text: str) -> float:
    """``"5m0s"`` -> 300.0.

    Raises:
        ValueError: not a Go duration.
    """
    parts = _DURATION_PART.findall(text or "")
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


@dataclass(slots=True)
class CollectPolicy:
    """The NodeMetric ``spec.metricCollectPolicy`` as the agent applies it (seconds; durations as given)."""

    aggregate_seconds: int = DEFAULT_AGGREGATE_SECONDS
    report_seconds: int = DEFAULT_REPORT_SECONDS
    durations: tuple[str, ...] = DEFAULT_DURATIONS
    memory_policy: str = "usageWithoutPageCache"

    @classmethod
    def from_node_metric(cls, obj: dict[str, Any] | None, *, min_report: int = MIN_REPORT_SECONDS) -> CollectPolicy:
        """Read the spec (missing parts: defaults; aggregate at least 60 s, report at least ``min_report`` s)."""
        spec = (obj or {}).get("spec") or {}
        policy = spec.get("metricCollectPolicy") or {} if isinstance(spec, dict) else {}
        agg = policy.get("aggregateDurationSeconds")
        rep = policy.get("reportIntervalSeconds")
        durations = ((policy.get("nodeAggregatePolicy") or {}).get("durations")) or list(DEFAULT_DURATIONS)
        valid = []
        for d in durations:
            try:
                go_duration_seconds(str(d))
                valid.append(str(d))
            except ValueError:
                log.warning("ignoring aggregate duration %r", d)
        return cls(
            aggregate_seconds=max(int(agg), MIN_AGGREGATE_SECONDS)
            if isinstance(agg, int)
            else DEFAULT_AGGREGATE_SECONDS,
            report_seconds=max(int(rep), min_report) if isinstance(rep, int) else DEFAULT_REPORT_SECONDS,
            durations=tuple(valid),
            memory_policy=str(policy.get("nodeMemoryCollectPolicy") or "usageWithoutPageCache"),
        )

    def spec(self) -> dict[str, Any]:
        """The ``metricCollectPolicy`` object for a NodeMetric the agent creates."""
        return {
            "metricCollectPolicy": {
                "aggregateDurationSeconds": self.aggregate_seconds,
                "reportIntervalSeconds": self.report_seconds,
                "nodeAggregatePolicy": {"durations": list(self.durations)},
                "nodeMemoryCollectPolicy": self.memory_policy,
            }
        }


def _usage(
    cache: MetricCache, cpu_key: str, mem_key: str, start: float, end: float, how: str, cold: float
) -> dict[str, Any]:
    cpu = cache.aggregate(cpu_key, start, end, how)
    mem = cache.aggregate(mem_key, start, end, how)
    if cpu is None or mem is None or (cold > 0 and cpu.span < cold):
        return {}
    return {"resources": format_resource_list({"cpu": int(cpu.value * 1000), "memory": int(mem.value)})}


def _aggregated(
    cache: MetricCache,
    cpu_key: str,
    mem_key: str,
    now: float,
    durations: tuple[str, ...],
    gpus: list[GPUInfo] | None = None,
) -> list[dict[str, Any]]:
    out = []
    hows = ("avg", *AGGREGATIONS)
    for d in durations:
        seconds = go_duration_seconds(d)
        cold = seconds * VALIDATE_TIME_RANGE_RATIO
        cpu = cache.aggregates(cpu_key, now - seconds, now, hows)
        mem = cache.aggregates(mem_key, now - seconds, now, hows)
        usage: dict[str, Any] = {}
        for how in hows:
            c, m = cpu.get(how), mem.get(how)
            if c is None or m is None or (cold > 0 and c.span < cold):
                usage[how] = {}
                continue
            usage[how] = {"resources": format_resource_list({"cpu": int(c.value * 1000), "memory": int(m.value)})}
            if gpus:
                devices = gpu_devices(cache, gpus, now - seconds, now, _node_gpu_keys, how)
                if devices:
                    usage[how]["devices"] = devices
        out.append({"usage": usage, "duration": d})
    return out


def _node_gpu_keys(minor: int) -> tuple[str, str]:
    return gpu_sm_key(minor), gpu_memory_key(minor)


def gpu_devices(
    cache: MetricCache, gpus: list[GPUInfo], start: float, end: float, keys: Any, how: str = "avg"
) -> list[dict[str, Any]]:
    """GPU usage entries over ``[start, end]`` aggregated by ``how`` (avg, p50, ...; see the module docstring);
    ``keys(minor)`` gives the ``(sm key, memory key)`` of a GPU."""
    out = []
    for gpu in gpus:
        sm_key, mem_key = keys(gpu.minor)
        sm = cache.aggregate(sm_key, start, end, how)
        mem = cache.aggregate(mem_key, start, end, how)
        if sm is None or mem is None:
            continue
        ratio = int(100 * mem.value / gpu.memory_total) if gpu.memory_total > 0 else 0
        out.append(
            {
                "type": dn.DEVICE_GPU,
                "id": gpu.uuid,
                "minor": gpu.minor,
                "health": gpu.healthy,
                "resources": {
                    dn.RESOURCE_GPU_CORE: format_resource(dn.RESOURCE_GPU_CORE, int(sm.value)),
                    dn.RESOURCE_GPU_MEMORY: format_resource("memory", int(mem.value)),
                    dn.RESOURCE_GPU_MEMORY_RATIO: format_resource(dn.RESOURCE_GPU_MEMORY_RATIO, ratio),
                },
            }
        )
    return out


def build_status(
    cache: MetricCache,
    pods: list[PodMeta],
    now: float,
    policy: CollectPolicy,
    host_apps: list[HostApp] | None = None,
    gpus: list[GPUInfo] | None = None,
    prod_reclaimable: tuple[int, int] | None = None,
) -> dict[str, Any] | None:
    """The NodeMetric ``status`` at ``now``, or None before the first node sample (upstream skips that round).

    ``prod_reclaimable`` (cpu milli-cores, memory bytes; :mod:`agent.prediction`) is reported as
    ``prodReclaimableMetric.resource``; left out when None (prediction off, or not predictable yet).

    ``hostApplicationMetric`` lists each host application with samples in the window: its name, average
    usage, priority and QoS class (upstream ``states_nodemetric.go`` ``collectMetric``).
    """
    start = now - policy.aggregate_seconds
    node_usage = _usage(cache, NODE_CPU, NODE_MEMORY, start, now, "avg", 0)
    if not node_usage:
        return None
    if gpus:
        node_devices = gpu_devices(cache, gpus, start, now, _node_gpu_keys)
        if node_devices:
            node_usage["devices"] = node_devices
    pods_metric = []
    for pod in pods:
        usage = _usage(cache, pod_cpu_key(pod.uid), pod_memory_key(pod.uid), start, now, "avg", 0)
        if not usage:
            continue
        if gpus:
            uid = pod.uid
            pod_devices = gpu_devices(
                cache, gpus, start, now, lambda m, uid=uid: (gpu_pod_core_key(uid, m), gpu_pod_memory_key(uid, m))
            )
            if pod_devices:
                usage["devices"] = pod_devices
        pods_metric.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "podUsage": usage,
                "priority": pod.priority_class.value,
                "qos": pod.qos.value,
            }
        )
    pods_metric.sort(key=lambda p: (p["namespace"], p["name"]))
    apps_metric = []
    for app in host_apps or []:
        usage = _usage(cache, host_app_cpu_key(app.name), host_app_memory_key(app.name), start, now, "avg", 0)
        if usage:
            entry: dict[str, Any] = {"name": app.name, "usage": usage}
            if app.priority:
                entry["priority"] = app.priority
            if app.qos:
                entry["qos"] = app.qos
            apps_metric.append(entry)
    status: dict[str, Any] = {
        "updateTime": format_time(now),
        "nodeMetric": {
            "nodeUsage": node_usage,
            "aggregatedNodeUsages": _aggregated(cache, NODE_CPU, NODE_MEMORY, now, policy.durations, gpus),
            "systemUsage": _usage(cache, SYS_CPU, SYS_MEMORY, start, now, "avg", 0),
            "aggregatedSystemUsages": _aggregated(cache, SYS_CPU, SYS_MEMORY, now, policy.durations),
        },
        "podsMetric": pods_metric,
        "hostApplicationMetric": apps_metric,
    }
    if prod_reclaimable is not None:
        cpu, memory = prod_reclaimable
        status["prodReclaimableMetric"] = {
            "resource": {"resources": format_resource_list({"cpu": int(cpu), "memory": int(memory)})}
        }
    return status


def node_metric_object(node_name: str, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """A whole NodeMetric, checked against the NodeMetric model.

    Raises:
        ReportError: the object does not validate.
    """
    obj = {
        "apiVersion": KINDS["NodeMetric"].api_version,
        "kind": "NodeMetric",
        "metadata": {"name": node_name},
        "spec": spec,
        "status": status,
    }
    try:
        NodeMetric.model_validate(obj)
    except ValidationError as exc:
        raise ReportError(f"NodeMetric {node_name} does not validate: {exc}") from None
    return obj


class MetricWriter(ABC):
    """Delivers a NodeMetric report."""

    @abstractmethod
    def write(self, node_name: str, spec: dict[str, Any], status: dict[str, Any]) -> None:
        """Write the report.

        Raises:
            ReportError: it could not be written.
        """


class FileMetricWriter(MetricWriter):
    """Embedded mode: ``<dir>/nodemetric-<node>.yaml``, written to a temp file then ``os.replace``d."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path(self, node_name: str) -> Path:
        """The file of ``node_name``'s NodeMetric."""
        return self.directory / f"nodemetric-{node_name}.yaml"

    def write(self, node_name: str, spec: dict[str, Any], status: dict[str, Any]) -> None:
        """Atomically replace the NodeMetric file (readers never see a partial file)."""
        obj = node_metric_object(node_name, spec, status)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".nodemetric-", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "w") as f:
                    yaml.dump(obj, f, Dumper=_DUMPER, sort_keys=False)
                os.replace(tmp, self.path(node_name))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise ReportError(f"cannot write {self.path(node_name)}: {exc}") from None


class APIMetricWriter(MetricWriter):
    """Kubernetes mode: GET the NodeMetric (create it when missing), then PUT ``/status`` with its
    resourceVersion; a conflict is retried once (client-go's ``RetryOnConflict``, as koordlet's
    ``states_nodemetric.go`` updates the status).

    Args:
        client: the agent's API client (:class:`app.client.sync.Client`).
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    def write(self, node_name: str, spec: dict[str, Any], status: dict[str, Any]) -> None:
        """Update the status subresource (creating the NodeMetric first if needed).

        Raises:
            ReportError: the object does not validate, the API refused a call (the message carries the
                Status message), no answer came, or the conflict persisted.
        """
        node_metric_object(node_name, spec, status)
        collection = KINDS["NodeMetric"].collection_path(None)
        path = f"{collection}/{node_name}"
        for _attempt in range(2):
            try:
                try:
                    current = self.client.get(path)
                except NotFound:
                    body = {
                        "apiVersion": KINDS["NodeMetric"].api_version,
                        "kind": "NodeMetric",
                        "metadata": {"name": node_name},
                        "spec": spec,
                    }
                    current = self.client.create(collection, body)
                self.client.put(f"{path}/status", {**current, "status": status})
            except Conflict:  # AlreadyExists from a racing create, or a stale resourceVersion
                continue
            except ApiError as exc:
                code = f"HTTP {exc.status}: " if exc.status else ""  # ConnectionFailed has none
                raise ReportError(f"NodeMetric {node_name}: {code}{exc}") from None
            return
        raise ReportError(f"NodeMetric {node_name}: conflict persisted")


def now() -> float:
    """Wall-clock epoch seconds (patched in tests)."""
    return time.time()
