"""Koordinator SLO kinds: NodeMetric (usage reports) and the NodeSLO spec (per-node QoS strategy).

The models the agent and the manager parse at their edges: the agent checks each NodeMetric it
writes against :class:`NodeMetric` and reads its NodeSLO through :class:`NodeSLOSpec`; the
manager checks the slo-controller ConfigMap's strategies against the strategy models. (The
scheduler reads NodeMetrics from their JSON in :mod:`app.plugins.loadaware.metricview`.)

Group ``slo.koordinator.sh/v1alpha1``. Follows upstream's ``apis/slo/v1alpha1/nodemetric_types.go``,
``nodeslo_types.go``, ``resources.go`` and ``host_application.go``. Percent fields are ints in
0..100 unless noted; the ranges are documented, not enforced (upstream checks them in the
slo-controller, not in the CRD schema).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from app.api.kinds import KINDS
from app.api.meta import IntOrString, KubeModel, KubeObject, Quantity, ResourceList
from app.api.scheduling import DeviceInfo

# --- shared pieces (resources.go, host_application.go) -----------------------------------------


class ResourceMap(KubeModel):
    """Usage of a node, pod or application (``resources.go`` ResourceMap).

    ``resources`` is a ResourceList of quantities (cpu in cores/millicores, memory in bytes);
    ``devices`` carries per-device usage.
    """

    resources: ResourceList | None = None
    devices: list[DeviceInfo] | None = None


class CgroupPath(KubeModel):
    """Host cgroup of an out-of-band application.

    ``base``: CgroupRoot | Kubepods | KubepodsBurstable | KubepodsBesteffort.
    """

    base: str | None = None
    parent_dir: str | None = None
    relative_path: str | None = None


class HostApplicationSpec(KubeModel):
    """An out-of-band (non-pod) application on the node and its koordinator priority / QoS."""

    name: str | None = None
    priority: str | None = None
    qos: str | None = None
    cgroup_path: CgroupPath | None = None
    strategy: dict[str, Any] | None = None


# --- NodeMetric (nodemetric_types.go) ---------------------------------------------------------


class AggregatePolicy(KubeModel):
    """Aggregation windows as Go duration strings, e.g. ``["5m0s", "10m0s", "30m0s"]``."""

    durations: list[str] | None = None


class NodeMetricCollectPolicy(KubeModel):
    """How koordlet collects and reports (written by the slo-controller).

    Attributes:
        aggregate_duration_seconds: window for the averaged usage, seconds.
        report_interval_seconds: reporting period, seconds.
        node_memory_collect_policy: usageWithoutPageCache (default) | usageWithHotPageCache |
            usageWithPageCache.
    """

    aggregate_duration_seconds: int | None = None
    report_interval_seconds: int | None = None
    node_aggregate_policy: AggregatePolicy | None = None
    node_memory_collect_policy: str | None = None


class NodeMetricSpec(KubeModel):
    """``NodeMetric.spec``."""

    metric_collect_policy: NodeMetricCollectPolicy | None = None


class AggregatedUsage(KubeModel):
    """Usage aggregated over ``duration`` (Go duration string).

    ``usage`` maps an aggregation type (avg, p50, p90, p95, p99) to a ResourceMap.
    """

    usage: dict[str, ResourceMap] | None = None
    duration: str | None = None


class NUMAUsage(KubeModel):
    """Usage of one NUMA node; an absent ``numaNodeID`` means 0."""

    numa_node_id: int | None = Field(default=None, alias="numaNodeID")
    node_usage: ResourceMap | None = None
    system_usage: ResourceMap | None = None


class NodeMetricInfo(KubeModel):
    """Node-level usage: current, aggregated, system (node minus pods and host apps), per NUMA."""

    node_usage: ResourceMap | None = None
    aggregated_node_usages: list[AggregatedUsage] | None = None
    system_usage: ResourceMap | None = None
    aggregated_system_usages: list[AggregatedUsage] | None = None
    numa_usages: list[NUMAUsage] | None = None


class PodMetricInfo(KubeModel):
    """Usage of one pod; ``priority`` is a koord priority class, ``qos`` a koord QoS class."""

    name: str | None = None
    namespace: str | None = None
    pod_usage: ResourceMap | None = None
    priority: str | None = None
    qos: str | None = None
    extensions: dict[str, Any] | None = None


class HostApplicationMetricInfo(KubeModel):
    """Usage of one out-of-band host application."""

    name: str | None = None
    usage: ResourceMap | None = None
    priority: str | None = None
    qos: str | None = None


class ReclaimableMetric(KubeModel):
    """Predicted reclaimable resources of prod pods."""

    resource: ResourceMap | None = None


class PeakMetric(KubeModel):
    """Predicted peak usage of prod pods."""

    resource: ResourceMap | None = None


class NodeMetricStatus(KubeModel):
    """``NodeMetric.status``; staleness is judged on ``updateTime``."""

    update_time: datetime | None = None
    node_metric: NodeMetricInfo | None = None
    pods_metric: list[PodMetricInfo] | None = None
    host_application_metric: list[HostApplicationMetricInfo] | None = None
    prod_reclaimable_metric: ReclaimableMetric | None = None
    prod_peak_metric: PeakMetric | None = None


class NodeMetric(KubeObject):
    """NodeMetric: cluster-scoped, named after its node; koordlet's usage report.

    Follows ``apis/slo/v1alpha1/nodemetric_types.go``.
    """

    KIND: ClassVar[str] = "NodeMetric"
    API_VERSION: ClassVar[str] = KINDS["NodeMetric"].api_version

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    spec: NodeMetricSpec = Field(default_factory=NodeMetricSpec)
    status: NodeMetricStatus = Field(default_factory=NodeMetricStatus)


# --- NodeSLO: resource QoS (nodeslo_types.go) ---------------------------------------------------


class CPUQOSCfg(KubeModel):
    """CPU QoS of a class: ``groupIdentity`` (-1..2), ``schedIdle`` (0|1), ``coreExpeller``."""

    enable: bool | None = None
    group_identity: int | None = None
    sched_idle: int | None = None
    core_expeller: bool | None = None


class MemoryQOSCfg(KubeModel):
    """Memory QoS of a class (cgroup memory.min/low/high, watermarks, priority, page cache).

    Percent fields are 0..100; ``wmarkScalePermill`` is 1..1000; ``wmarkMinAdj`` is -25..50;
    ``priority`` 0..12; ``priorityEnable``/``oomKillGroup`` 0|1; ``pageCacheLimitSize`` bytes.
    """

    enable: bool | None = None
    min_limit_percent: int | None = None
    low_limit_percent: int | None = None
    throttling_percent: int | None = None
    wmark_ratio: int | None = None
    wmark_scale_permill: int | None = None
    wmark_min_adj: int | None = None
    priority_enable: int | None = None
    priority: int | None = None
    oom_kill_group: int | None = None
    page_cache_enable: bool | None = None
    page_cache_limit_percent: int | None = None
    page_cache_limit_size: int | None = None
    page_cache_reclaim_sync: bool | None = None


class IOCfg(KubeModel):
    """Block IO limits: IOPS, bytes/s, weight percent and latency targets (microseconds)."""

    read_iops: int | None = Field(default=None, alias="readIOPS")
    write_iops: int | None = Field(default=None, alias="writeIOPS")
    read_bps: int | None = Field(default=None, alias="readBPS")
    write_bps: int | None = Field(default=None, alias="writeBPS")
    io_weight_percent: int | None = None
    read_latency: int | None = None
    write_latency: int | None = None
    read_latency_percent: int | None = None
    write_latency_percent: int | None = None
    enable_user_model: bool | None = None
    model_read_bps: int | None = Field(default=None, alias="modelReadBPS")
    model_write_bps: int | None = Field(default=None, alias="modelWriteBPS")
    model_read_seq_iops: int | None = Field(default=None, alias="modelReadSeqIOPS")
    model_write_seq_iops: int | None = Field(default=None, alias="modelWriteSeqIOPS")
    model_read_rand_iops: int | None = Field(default=None, alias="modelReadRandIOPS")
    model_write_rand_iops: int | None = Field(default=None, alias="modelWriteRandIOPS")


class BlockCfg(KubeModel):
    """IO settings of one block target; ``type`` is device | volumegroup | podvolume."""

    name: str | None = None
    block_type: str | None = Field(default=None, alias="type")
    io_cfg: IOCfg | None = None


class BlkIOQOSCfg(KubeModel):
    """Block IO QoS of a class."""

    enable: bool | None = None
    blocks: list[BlockCfg] | None = None


class ResctrlQOSCfg(KubeModel):
    """LLC (CAT) range and memory bandwidth (MBA) of a class, percents 0..100."""

    enable: bool | None = None
    cat_range_start_percent: int | None = None
    cat_range_end_percent: int | None = None
    mba_percent: int | None = None


class NetworkQOSCfg(KubeModel):
    """Network bandwidth request/limit of a class; each is a quantity int or a percent string."""

    enable: bool | None = None
    ingress_request: IntOrString | None = None
    ingress_limit: IntOrString | None = None
    egress_request: IntOrString | None = None
    egress_limit: IntOrString | None = None


class ResourceQOS(KubeModel):
    """All QoS knobs of one class (LSR, LS, BE, SYSTEM or the cgroup root)."""

    cpu_qos: CPUQOSCfg | None = Field(default=None, alias="cpuQOS")
    memory_qos: MemoryQOSCfg | None = Field(default=None, alias="memoryQOS")
    blkio_qos: BlkIOQOSCfg | None = Field(default=None, alias="blkioQOS")
    resctrl_qos: ResctrlQOSCfg | None = Field(default=None, alias="resctrlQOS")
    network_qos: NetworkQOSCfg | None = Field(default=None, alias="networkQOS")


class ResourceQOSPolicies(KubeModel):
    """``cpuPolicy`` groupIdentity (default) | coreSched; ``netQOSPolicy`` tc (default) | terway-qos."""

    cpu_policy: str | None = None
    net_qos_policy: str | None = Field(default=None, alias="netQOSPolicy")


class ResourceQOSStrategy(KubeModel):
    """Per-class resource QoS of the node."""

    policies: ResourceQOSPolicies | None = None
    lsr_class: ResourceQOS | None = None
    ls_class: ResourceQOS | None = None
    be_class: ResourceQOS | None = None
    system_class: ResourceQOS | None = None
    cgroup_root: ResourceQOS | None = None


# --- NodeSLO: thresholds, burst, system (nodeslo_types.go) ------------------------------------------


class ResourceThresholdStrategy(KubeModel):
    """BE suppression and eviction thresholds (``resourceUsedThresholdWithBE``).

    Percent fields are 0..100 of node capacity (the ``*Allocatable*`` ones may exceed 100).
    ``cpuSuppressPolicy``: cpuset | cfsQuota. ``cpuEvictPolicy``: evictByRealLimit |
    evictByAllocatable. ``cpuEvictTimeWindowSeconds`` is seconds. ``allocatableEvictPriorityThreshold``
    is a pod priority value (<= 7999).
    """

    enable: bool | None = None
    cpu_suppress_threshold_percent: int | None = None
    cpu_suppress_min_percent: int | None = None
    cpu_suppress_policy: str | None = None
    memory_evict_threshold_percent: int | None = None
    memory_evict_lower_percent: int | None = None
    memory_allocatable_evict_threshold_percent: int | None = None
    memory_allocatable_evict_lower_percent: int | None = None
    cpu_evict_be_satisfaction_upper_percent: int | None = Field(
        default=None, alias="cpuEvictBESatisfactionUpperPercent"
    )
    cpu_evict_be_satisfaction_lower_percent: int | None = Field(
        default=None, alias="cpuEvictBESatisfactionLowerPercent"
    )
    cpu_evict_be_usage_threshold_percent: int | None = Field(default=None, alias="cpuEvictBEUsageThresholdPercent")
    cpu_evict_time_window_seconds: int | None = None
    cpu_evict_threshold_percent: int | None = None
    cpu_evict_lower_percent: int | None = None
    cpu_allocatable_evict_threshold_percent: int | None = None
    cpu_allocatable_evict_lower_percent: int | None = None
    cpu_evict_policy: str | None = None
    evict_enabled_priority_threshold: int | None = None
    allocatable_evict_priority_threshold: int | None = None


class CPUBurstStrategy(KubeModel):
    """CPU burst settings.

    ``policy``: none | cpuBurstOnly | cfsQuotaBurstOnly | auto. ``cpuBurstPercent`` 1..10000 of the
    limit; ``cfsQuotaBurstPercent`` >= 100; ``cfsQuotaBurstPeriodSeconds`` seconds (-1 = unlimited);
    ``sharePoolThresholdPercent`` 0..100.
    """

    policy: str | None = None
    cpu_burst_percent: int | None = None
    cfs_quota_burst_percent: int | None = None
    cfs_quota_burst_period_seconds: int | None = None
    share_pool_threshold_percent: int | None = None


class SystemStrategy(KubeModel):
    """Node-wide kernel settings (memory watermarks, group identity, page cache, bandwidth).

    ``totalNetworkBandwidth`` is a quantity (bits/s) kept as given.
    """

    min_free_kbytes_factor: int | None = None
    watermark_scale_factor: int | None = None
    memcg_reap_back_ground: int | None = None
    sched_group_identity_enabled: int | None = None
    sched_idle_saver_wmark: int | None = None
    sched_features: dict[str, bool] | None = None
    page_cache_limit_enabled: int | None = None
    total_network_bandwidth: Quantity | None = None


class NodeSLOSpec(KubeModel):
    """``NodeSLO.spec``: the strategies koordlet applies on the node."""

    resource_used_threshold_with_be: ResourceThresholdStrategy | None = Field(
        default=None, alias="resourceUsedThresholdWithBE"
    )
    resource_qos_strategy: ResourceQOSStrategy | None = Field(default=None, alias="resourceQOSStrategy")
    cpu_burst_strategy: CPUBurstStrategy | None = None
    system_strategy: SystemStrategy | None = None
    extensions: dict[str, Any] | None = None
    host_applications: list[HostApplicationSpec] | None = None
