"""What every QoS strategy sees in one round: a read-only snapshot of states and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.cgroups import CgroupLayout
from agent.collectors.hostapps import HostApp
from agent.collectors.node import ProcessorInfo
from agent.metriccache import MetricCache
from agent.states.pods import PodMeta
from app.api.slo import NodeSLOSpec, ResourceThresholdStrategy

#: Metric cache keys shared by the collectors and the strategies.
NODE_CPU = "node_cpu"  # cores
NODE_MEMORY = "node_memory"  # bytes
SYS_CPU = "sys_cpu"
SYS_MEMORY = "sys_memory"
BE_CPU_USAGE = "be_cpu_usage"  # milli-cores
BE_CPU_REQUEST = "be_cpu_request"
BE_CPU_REAL_LIMIT = "be_cpu_real_limit"


def pod_cpu_key(uid: str) -> str:
    """Series key of a pod's cpu (cores)."""
    return f"pod_cpu/{uid}"


def pod_memory_key(uid: str) -> str:
    """Series key of a pod's memory working set (bytes)."""
    return f"pod_memory/{uid}"


def host_app_cpu_key(name: str) -> str:
    """Series key of a host application's cpu (cores)."""
    return f"host_app_cpu/{name}"


def host_app_memory_key(name: str) -> str:
    """Series key of a host application's memory working set (bytes)."""
    return f"host_app_memory/{name}"


#: koordlet feature gates with their upstream defaults (``pkg/features/koordlet_features.go``).
DEFAULT_FEATURES: dict[str, bool] = {
    "BECPUSuppress": True,
    "CPUBurst": True,
    "BECPUEvict": False,
    "BEMemoryEvict": False,
    "CPUEvict": False,
    "MemoryEvict": False,
    "CgroupReconcile": False,
    "RdtResctrl": True,
    "BlkIOReconcile": False,
    "SystemConfig": False,
    "NetQOSByTC": False,
}


@dataclass(slots=True)
class QoSContext:
    """One round's inputs.

    Attributes:
        now: epoch seconds.
        interval: collection interval, seconds.
        capacity_cpu: node cpu capacity, milli-cores; capacity_memory: bytes.
        allocatable: node allocatable in internal units (``kubernetes.io/batch-cpu`` milli-cores, ...).
        reserved_cpu: max(kubelet reserved = capacity - allocatable, annotation reservation), milli-cores.
        features: enabled feature gates.
        host_apps: the NodeSLO's host applications with their cgroup dirs.
    """

    now: float
    interval: float
    layout: CgroupLayout
    slo: NodeSLOSpec
    pods: list[PodMeta]
    cache: MetricCache
    processors: list[ProcessorInfo]
    capacity_cpu: int
    capacity_memory: int
    allocatable: dict[str, int] = field(default_factory=dict)
    reserved_cpu: int = 0
    features: set[str] = field(default_factory=set)
    host_apps: list[HostApp] = field(default_factory=list)

    @property
    def thresholds(self) -> ResourceThresholdStrategy:
        """``resourceUsedThresholdWithBE`` (merged with defaults, never None)."""
        return self.slo.resource_used_threshold_with_be or ResourceThresholdStrategy()

    def feature_active(self, gate: str) -> bool:
        """The gate is on and the NodeSLO enables ``resourceUsedThresholdWithBE`` (``IsFeatureDisabled``)."""
        return gate in self.features and bool(self.thresholds.enable)

    def last_pod_values(self, key_of: str) -> dict[str, float]:
        """Newest value per pod uid (within two intervals) of ``pod_cpu`` or ``pod_memory`` series (or per
        host application name of ``host_app_cpu`` / ``host_app_memory``)."""
        prefix = key_of + "/"
        out: dict[str, float] = {}
        for key in self.cache.keys(prefix):
            value = self.cache.last(key, self.now, 2 * self.interval + 0.5)
            if value is not None:
                out[key[len(prefix) :]] = value
        return out
