"""LoadAwareScheduling checked against upstream Koordinator's own test cases.

Every parametrized case translates one upstream case (pytest id = upstream case name) of
koordinator-sh/koordinator (mirror HEAD a7a1b76b):

* ``pkg/scheduler/plugins/loadaware/load_aware_test.go``: TestNew, TestFilterExpiredNodeMetric,
  TestEnableScheduleWhenNodeMetricsExpired, TestFilterUsage, TestScore;
* ``pkg/scheduler/plugins/loadaware/estimator/default_estimator_test.go``:
  TestDefaultEstimatorEstimatePod, TestDefaultEstimatorEstimateNode;
* ``pkg/scheduler/plugins/loadaware/helper_test.go``: TestGetTargetAggregatedUsage;
* ``pkg/scheduler/plugins/loadaware/pod_assign_cache_test.go``: TestPodAssignCache_OnAdd, _OnUpdate,
  _OnUpdate_NodeNameChange, _OnDelete, TestShouldEstimatePodDeadline, TestNodeMetric;
* ``pkg/scheduler/apis/config/validation/validation_pluginargs_test.go``: TestValidateLoadAwareSchedulingArgs.

The data (node allocatable, NodeMetric, assigned pods, incoming pod, args) is upstream's, written as
the JSON objects the API server would serve; the expected outcome (reason string, score) is
upstream's. Upstream's ``time.Now()`` is a fixed ``NOW`` that drives the cache clock and the
CycleState. Upstream's in-memory pod timestamps with nanosecond offsets become whole seconds
(metav1.Time serialises with second precision). ``test_review_*`` and ``test_defaults`` are not
upstream test cases: they pin behaviours read from upstream's code, each citing file and line.

Filter and Score always run on a batch ``[decoy, node]``: the decoy has no NodeMetric (passes,
scores 0), so the vectorised code must map results to the right positions.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from app.api.quantity import parse_resource_list
from app.api.timeparse import format_time
from app.cache.nodestate import parse_node
from app.cache.podinfo import parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.config import ArgsError
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import NodeBatch
from app.framework.status import Code, Status
from app.plugins.loadaware.args import LoadAwareSchedulingArgs, decode_args
from app.plugins.loadaware.estimator import estimate_pod, estimation_deadline, node_allocatable
from app.plugins.loadaware.nodeload import NodeLoad
from app.plugins.loadaware.plugin import LoadAwareScheduling, new_load_aware
from app.sources.events import Event, EventType

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
NODE = "test-node-1"
DECOY = "decoy-node"
GI = 1024**3
MI = 1024**2
ALLOC_96 = {"cpu": "96", "memory": "512Gi"}

PROD_MAX = 9999  # extension.PriorityProdValueMax
MID_MAX = 7999  # extension.PriorityMidValueMax
MID_DEFAULT = 7500  # extension.PriorityMidValueDefault
BATCH_MIN = 5000  # extension.PriorityBatchValueMin

EXPIRED = "node(s) nodeMetric expired"
CPU_EXCEED = "node(s) cpu usage exceed threshold"
MEMORY_EXCEED = "node(s) memory usage exceed threshold"
CPU_AGG_EXCEED = "node(s) cpu aggregated usage exceed threshold"

ANN_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"
ANN_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
ANN_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANN_SECONDS_AFTER_SCHEDULED = "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
ANN_SECONDS_AFTER_INITIALIZED = "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"


# ---------------------------------------------------------------------------------------- builders
def ts(offset: float) -> str:
    """RFC 3339 time ``offset`` seconds after NOW."""
    return format_time(NOW + offset)


def node_obj(
    name: str = NODE, allocatable: dict[str, Any] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    status: dict[str, Any] = {}
    if allocatable is not None:
        status["allocatable"] = allocatable
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status}


def resource_map(resources: dict[str, Any] | None) -> dict[str, Any]:
    """slov1alpha1.ResourceMap: ``{"resources": {...}}``, ``{}`` for an empty list (omitempty)."""
    return {"resources": resources} if resources else {}


def metric_obj(
    name: str = NODE,
    *,
    update: float | None = 0.0,
    usage: dict[str, Any] | None = None,
    node_metric: bool | None = None,
    system: dict[str, Any] | None = None,
    aggregated: list[tuple[str, dict[str, dict[str, Any] | None]]] | None = None,
    pods: list[Any] | None = None,
    interval: int | None = 60,
) -> dict[str, Any]:
    """A NodeMetric. ``status.nodeMetric`` is present when ``usage``/``system``/``aggregated`` is given
    (or ``node_metric`` is True); ``update`` is an offset from NOW (None: no updateTime)."""
    spec: dict[str, Any] = {}
    if interval is not None:
        spec["metricCollectPolicy"] = {"reportIntervalSeconds": interval}
    status: dict[str, Any] = {}
    if update is not None:
        status["updateTime"] = ts(update)
    if node_metric is None:
        node_metric = usage is not None or system is not None or aggregated is not None
    if node_metric:
        info: dict[str, Any] = {"nodeUsage": resource_map(usage)}
        if system is not None:
            info["systemUsage"] = resource_map(system)
        if aggregated is not None:
            info["aggregatedNodeUsages"] = [
                {"duration": duration, "usage": {t: resource_map(r) for t, r in by_type.items()}}
                for duration, by_type in aggregated
            ]
        status["nodeMetric"] = info
    if pods:
        status["podsMetric"] = pods
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


def pod_metric(name: str, usage: dict[str, Any], priority: str | None = None, ns: str = "default") -> dict[str, Any]:
    entry: dict[str, Any] = {"namespace": ns, "name": name, "podUsage": resource_map(usage)}
    if priority:
        entry["priority"] = priority
    return entry


def scheduled(offset: float, status: str = "True") -> tuple[str, str, float]:
    return ("PodScheduled", status, offset)


def initialized(offset: float, status: str = "True") -> tuple[str, str, float]:
    return ("Initialized", status, offset)


def pod_obj(
    name: str = "test-pod",
    ns: str = "default",
    *,
    uid: str | None = None,
    node: str | None = None,
    req: dict[str, Any] | None = None,
    lim: dict[str, Any] | None = None,
    priority: int | None = None,
    phase: str | None = None,
    conditions: tuple[tuple[str, str, float], ...] = (),
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner_kind: str | None = None,
) -> dict[str, Any]:
    """A one-container pod (as ``st.MakePod()...Obj()`` builds it)."""
    container: dict[str, Any] = {"name": "main"}
    resources: dict[str, Any] = {}
    if req:
        resources["requests"] = req
    if lim:
        resources["limits"] = lim
    if resources:
        container["resources"] = resources
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    if owner_kind:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "owner"}]
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if conditions:
        status["conditions"] = [{"type": t, "status": s, "lastTransitionTime": ts(off)} for t, s, off in conditions]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def vec(cpu_milli: int, memory: int) -> list[int]:
    """A [cpu, memory] vector (the vectorizer sorts names: cpu, memory)."""
    return [cpu_milli, memory]


class Env:
    """A cache with the plugin registered on it, a decoy node without NodeMetric, and a clock at ``now``."""

    def __init__(self, args: dict[str, Any] | LoadAwareSchedulingArgs, now: float = NOW) -> None:
        self.now = now
        self.cache = ClusterCache(clock=lambda: self.now)
        handle = Handle(self.cache)
        if isinstance(args, dict):
            self.plugin = new_load_aware(args, handle)
        else:
            self.plugin = LoadAwareScheduling(args, handle)
        self.apply("Node", node_obj(DECOY, ALLOC_96))

    def apply(self, kind: str, obj: dict[str, Any], etype: EventType = EventType.ADDED) -> None:
        self.cache.apply(Event(kind, etype, obj))
        assert self.cache.rejected_objects == 0, f"cache rejected {kind} {obj['metadata']}"

    def batch(self, node: str) -> NodeBatch:
        return self.batch_of([DECOY, node])

    def batch_of(self, names: list[str]) -> NodeBatch:
        rows, missing = self.cache.table.rows_of(names)
        assert not missing
        return NodeBatch(rows, names)

    def filter(self, pod: dict[str, Any], node: str = NODE) -> Status | None:
        info = parse_pod(pod)
        failures = self.plugin.filter_nodes(CycleState(self.now), info, self.batch(node))
        assert set(failures) <= {1}, failures  # the decoy (no NodeMetric) always passes
        # a batch of the one node (the binding cycle's re-check) takes its own scalar path: the same verdict
        row = self.cache.table.row(node)
        alone = self.plugin.filter_nodes(CycleState(self.now), info, NodeBatch(np.array([row]), [node]))
        assert set(alone) <= {0} and alone.get(0) == failures.get(1), (alone, failures)
        # the plugin attributes its statuses itself (it says so: the framework merges them as they are)
        assert LoadAwareScheduling.attributed_statuses
        assert all(s.plugin == LoadAwareScheduling.NAME for s in (*failures.values(), *alone.values()))
        return failures.get(1)

    def answers(self, pod: dict[str, Any], names: list[str]) -> tuple[dict[int, Status], np.ndarray]:
        """The plugin's filter failures (by index into ``names``) and scores over ``names``, each asked in a cycle of
        its own."""
        info, batch = parse_pod(pod), self.batch_of(names)
        return (
            self.plugin.filter_nodes(CycleState(self.now), info, batch),
            self.plugin.score_nodes(CycleState(self.now), info, batch),
        )

    def score(self, pod: dict[str, Any], node: str = NODE) -> int:
        scores = self.plugin.score_nodes(CycleState(self.now), parse_pod(pod), self.batch(node))
        assert scores.shape == (2,)
        assert scores[0] == 0  # the decoy has no NodeMetric
        return int(scores[1])

    def load(self, node: str) -> NodeLoad:
        return self.plugin.loads[node]


def assert_status(got: Status | None, want: str | None) -> None:
    if want is None:
        assert got is None, f"want pass, got {got}"
    else:
        assert got is not None, f"want Unschedulable {want!r}, got pass"
        assert got.code == Code.UNSCHEDULABLE
        assert got.reasons == (want,)


def estimated_pods(load: NodeLoad) -> set[str]:
    """upstream ``nodeEstimatedPods``: assigned pods with a non-empty estimate."""
    return {info.key for info in load.pods.values() if info.estimated is not None}


# ---------------------------------------------------------------------------------------- TestNew
def test_new() -> None:
    """TestNew: defaulted args build the plugin."""
    cache = ClusterCache(clock=lambda: NOW)
    plugin = new_load_aware({}, Handle(cache))
    assert plugin.name == "LoadAwareScheduling"
    assert plugin.vec.names == ["cpu", "memory"]
    assert plugin.weights is not None and plugin.weights.tolist() == [1, 1]


# ---------------------------------------------------------------------------------------- TestFilterExpiredNodeMetric
@pytest.mark.parametrize(
    ("metric", "want"),
    [
        pytest.param(metric_obj(update=0), None, id="filter healthy nodeMetrics"),
        pytest.param(metric_obj(update=None), EXPIRED, id="filter unhealthy nodeMetric with nil updateTime"),
        pytest.param(metric_obj(update=-180), EXPIRED, id="filter unhealthy nodeMetric with expired updateTime"),
    ],
)
def test_filter_expired_node_metric(metric: dict[str, Any], want: str | None) -> None:
    env = Env({})
    env.apply("NodeMetric", metric)
    env.apply("Node", node_obj(NODE))  # upstream's node has no allocatable
    assert_status(env.filter(pod_obj("empty-pod")), want)


# ---- TestEnableScheduleWhenNodeMetricsExpired
@pytest.mark.parametrize(
    ("metric", "enable", "want"),
    [
        pytest.param(metric_obj(update=0), None, None, id="filter healthy nodeMetrics"),
        pytest.param(metric_obj(update=None), True, None, id="enable scheduling when nodeMetric with nil updateTime"),
        pytest.param(
            metric_obj(update=-180), True, None, id="enable scheduling when nodeMetric with expired updateTime"
        ),
        pytest.param(
            metric_obj(update=None), False, EXPIRED, id="disable scheduling when nodeMetric with nil updateTime"
        ),
        pytest.param(
            metric_obj(update=-180), False, EXPIRED, id="disable scheduling when nodeMetric with expired updateTime"
        ),
    ],
)
def test_enable_schedule_when_node_metrics_expired(
    metric: dict[str, Any], enable: bool | None, want: str | None
) -> None:
    args: dict[str, Any] = {}
    if enable is not None:
        args["enableScheduleWhenNodeMetricsExpired"] = enable
    env = Env(args)
    env.apply("NodeMetric", metric)
    env.apply("Node", node_obj(NODE))
    assert_status(env.filter(pod_obj("empty-pod")), want)


@pytest.mark.parametrize(("enable", "want"), [(True, None), (False, EXPIRED)])
def test_expired_node_metric_over_its_threshold(enable: bool, want: str | None) -> None:
    """An expired NodeMetric's usage is not compared: with scheduling enabled on expired metrics the node passes
    though its (stale) usage is over the threshold, on the batch path and the one-node path alike."""
    env = Env({"enableScheduleWhenNodeMetricsExpired": enable})
    env.apply("NodeMetric", metric_obj(update=-180, usage={"cpu": "95", "memory": "10Gi"}))
    env.apply("Node", node_obj(NODE, ALLOC_96))
    assert_status(env.filter(pod_obj("empty-pod")), want)
    env.apply("NodeMetric", metric_obj(update=0, usage={"cpu": "95", "memory": "10Gi"}), EventType.MODIFIED)
    assert_status(env.filter(pod_obj("empty-pod")), CPU_EXCEED)  # fresh, the same usage fails


# ---------------------------------------------------------------------------------------- TestFilterUsage
def _prod_pods_metric(cpu1: str, mem1: str, cpu2: str, mem2: str, prod2: bool = True) -> list[Any]:
    return [
        pod_metric("prod-pod-1", {"cpu": cpu1, "memory": mem1}, "koord-prod"),
        pod_metric("prod-pod-2", {"cpu": cpu2, "memory": mem2}, "koord-prod" if prod2 else None),
    ]


def _prod_pods(extra2: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        pod_obj("prod-pod-1", priority=PROD_MAX),
        pod_obj("prod-pod-2", priority=PROD_MAX, req=extra2),
    ]


P95_5M_ARGS = {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95", "usageAggregatedDuration": "5m0s"}
P95_5M_METRIC = {
    "usage": {"cpu": "30", "memory": "100Gi"},
    "aggregated": [("5m0s", {"p95": {"cpu": "70", "memory": "256Gi"}})],
}

FILTER_USAGE_CASES = [
    pytest.param(
        {"metric": metric_obj(usage={"cpu": "60", "memory": "256Gi"})},
        None,
        id="filter normal usage",
    ),
    pytest.param({}, None, id="filter node missing NodeMetrics"),
    pytest.param(
        {"metric": metric_obj(usage={"cpu": "70", "memory": "256Gi"})},
        CPU_EXCEED,
        id="filter exceed cpu usage",
    ),
    pytest.param(
        {"aggregated": P95_5M_ARGS, "metric": metric_obj(**P95_5M_METRIC)},  # type: ignore[arg-type]
        CPU_AGG_EXCEED,
        id="filter exceed p95 cpu usage",
    ),
    pytest.param(
        {"metric": metric_obj(usage={"cpu": "30", "memory": "500Gi"})},
        MEMORY_EXCEED,
        id="filter exceed memory usage",
    ),
    pytest.param(
        {
            "custom": {"usageThresholds": {"memory": 60}},
            "metric": metric_obj(usage={"cpu": "30", "memory": "316Gi"}),
        },
        MEMORY_EXCEED,
        id="filter exceed memory usage by custom usage thresholds",
    ),
    pytest.param(
        {
            "custom": {"aggregatedUsage": P95_5M_ARGS},
            "metric": metric_obj(**P95_5M_METRIC),  # type: ignore[arg-type]
        },
        CPU_AGG_EXCEED,
        id="filter exceed p95 cpu usage by custom usage",
    ),
    pytest.param(
        {"usage": {"memory": 0}, "metric": metric_obj(usage={"cpu": "30", "memory": "500Gi"})},
        None,
        id="disable filter exceed memory usage",
    ),
    pytest.param(
        {
            "usage": {"cpu": 100, "memory": 100},
            "metric": metric_obj(
                usage={"cpu": "63", "memory": "500Gi"}, pods=_prod_pods_metric("30", "200Gi", "33", "300Gi")
            ),
            "pods": _prod_pods(),
        },
        None,
        id="prod usage filter is not enabled by default",
    ),
    pytest.param(
        {
            "usage": {"cpu": 100, "memory": 100},
            "prod": {"cpu": 50, "memory": 100},
            "metric": metric_obj(
                usage={"cpu": "63", "memory": "500Gi"}, pods=_prod_pods_metric("30", "200Gi", "33", "300Gi")
            ),
            "pods": _prod_pods(),
            "test_pod": pod_obj("prod-pod-3", priority=PROD_MAX),
        },
        CPU_EXCEED,
        id="filter prod cpu usage",
    ),
    pytest.param(
        {
            "usage": {"cpu": 100, "memory": 100},
            "prod": {"cpu": 100, "memory": 50},
            "metric": metric_obj(
                usage={"cpu": "63", "memory": "500Gi"}, pods=_prod_pods_metric("30", "200Gi", "33", "300Gi")
            ),
            "pods": _prod_pods(),
            "test_pod": pod_obj("prod-pod-3", priority=PROD_MAX),
        },
        MEMORY_EXCEED,
        id="filter prod memory usage",
    ),
    pytest.param(
        {
            "usage": {"cpu": 100, "memory": 100},
            "prod": {"cpu": 100, "memory": 100},
            "custom": {"prodUsageThresholds": {"cpu": 100, "memory": 50}},
            "metric": metric_obj(
                usage={"cpu": "63", "memory": "500Gi"}, pods=_prod_pods_metric("30", "200Gi", "33", "300Gi")
            ),
            "pods": _prod_pods(),
            "test_pod": pod_obj("prod-pod-3", priority=PROD_MAX),
        },
        MEMORY_EXCEED,
        id="filter prod memory usage with custom usage configuration",
    ),
    pytest.param(
        {
            "metric": metric_obj(usage={"cpu": "70", "memory": "256Gi"}),
            "test_pod": pod_obj("test-pod", priority=PROD_MAX, owner_kind="DaemonSet"),
        },
        None,
        id="filter daemonset pod exceed cpu usage",
    ),
    pytest.param(
        {
            "usage": {"cpu": 65, "memory": 100},
            "prod": {"cpu": 60, "memory": 100},
            "metric": metric_obj(
                usage={"cpu": "53", "memory": "500Gi"}, pods=_prod_pods_metric("30", "100Gi", "23", "200Gi")
            ),
            "pods": _prod_pods(),
            "test_pod": pod_obj("prod-pod-3", req={"cpu": "20", "memory": "100Gi"}, priority=PROD_MAX),
        },
        CPU_EXCEED,
        id="filter prod cpu usage with new pod request configuration",
    ),
    pytest.param(
        {
            "usage": {"cpu": 65, "memory": 100},
            "prod": {"cpu": 60, "memory": 100},
            "metric": metric_obj(
                usage={"cpu": "53", "memory": "300Gi"},
                pods=_prod_pods_metric("30", "100Gi", "23", "200Gi", prod2=False),
            ),
            "pods": _prod_pods(),
            "test_pod": pod_obj(
                "prod-pod-3",
                req={"kubernetes.io/mid-cpu": "12k", "kubernetes.io/mid-memory": "100Gi"},
                priority=MID_MAX,
            ),
        },
        CPU_EXCEED,
        id="filter mid cpu usage with new pod request configuration",
    ),
    pytest.param(
        {
            "usage": {"cpu": 65, "memory": 85},
            "prod": {"cpu": 60, "memory": 80},
            "metric": metric_obj(
                usage={"cpu": "53", "memory": "300Gi"}, pods=_prod_pods_metric("30", "100Gi", "23", "200Gi")
            ),
            "pods": _prod_pods(),
            "test_pod": pod_obj("prod-pod-3", req={"cpu": "1", "memory": "165Gi"}, priority=PROD_MAX),
        },
        MEMORY_EXCEED,
        id="filter memory usage with new pod request configuration",
    ),
    pytest.param(
        {
            "usage": {"cpu": 65, "memory": 85},
            "prod": {"cpu": 60, "memory": 80},
            "metric": metric_obj(
                usage={"cpu": "53", "memory": "300Gi"},
                pods=_prod_pods_metric("30", "100Gi", "23", "200Gi", prod2=False),
            ),
            "pods": _prod_pods(),
            "test_pod": pod_obj(
                "prod-pod-3",
                req={"kubernetes.io/mid-cpu": "1k", "kubernetes.io/mid-memory": "200Gi"},
                priority=MID_MAX,
            ),
        },
        MEMORY_EXCEED,
        id="filter mid memory usage with new pod request configuration",
    ),
    pytest.param(
        {
            "usage": {"cpu": 65, "memory": 85},
            "prod": {"cpu": 60, "memory": 70},
            "metric": metric_obj(
                usage={"cpu": "53", "memory": "300Gi"},
                pods=[pod_metric("prod-pod-1", {"cpu": "30", "memory": "100Gi"}, "koord-prod")],
            ),
            "pods": _prod_pods(extra2={"cpu": "1", "memory": "200Gi"}),
            "test_pod": pod_obj("prod-pod-3", req={"cpu": "1", "memory": "200Gi"}, priority=PROD_MAX),
        },
        MEMORY_EXCEED,
        id="filter prod memory usage with assignedCache pod",
    ),
    pytest.param(
        {
            "usage": {"cpu": 65, "memory": 85},
            "prod": {"cpu": 60, "memory": 70},
            "metric": metric_obj(
                usage={"cpu": "33", "memory": "110Gi"},
                pods=[pod_metric("prod-pod-1", {"cpu": "30", "memory": "100Gi"}, "koord-prod")],
            ),
            "pods": [
                pod_obj("prod-pod-1", priority=PROD_MAX),
                pod_obj(
                    "mid-pod-2",
                    req={"kubernetes.io/mid-cpu": "20k", "kubernetes.io/mid-memory": "200Gi"},
                    priority=MID_MAX,
                ),
            ],
            "test_pod": pod_obj(
                "mid-pod-3",
                req={"kubernetes.io/mid-cpu": "20k", "kubernetes.io/mid-memory": "200Gi"},
                priority=MID_MAX,
            ),
        },
        CPU_EXCEED,
        id="filter mid cpu usage with assignedCache pod",
    ),
]


@pytest.mark.parametrize(("case", "want"), FILTER_USAGE_CASES)
def test_filter_usage(case: dict[str, Any], want: str | None) -> None:
    args: dict[str, Any] = {"filterExpiredNodeMetrics": False}
    if case.get("usage"):
        args["usageThresholds"] = case["usage"]
    if case.get("prod"):
        args["prodUsageThresholds"] = case["prod"]
    if case.get("aggregated"):
        args["aggregated"] = case["aggregated"]
    env = Env(args)
    if case.get("metric"):
        env.apply("NodeMetric", case["metric"])
    for pod in copy.deepcopy(case.get("pods", [])):
        pod["spec"]["nodeName"] = NODE
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(-10)}]
        env.apply("Pod", pod)
    annotations = {ANN_USAGE_THRESHOLDS: json.dumps(case["custom"])} if case.get("custom") else None
    env.apply("Node", node_obj(NODE, ALLOC_96, annotations))
    assert_status(env.filter(case.get("test_pod") or pod_obj("empty-pod")), want)


# ---------------------------------------------------------------------------------------- TestScore
RES_16_32 = {"cpu": "16", "memory": "32Gi"}
EMPTY_USAGE_METRIC = {"usage": {}, "node_metric": True}


def _test_pod_1(**kw: Any) -> dict[str, Any]:
    kw.setdefault("req", RES_16_32)
    kw.setdefault("lim", RES_16_32)
    return pod_obj(kw.pop("name", "test-pod-1"), **kw)


def _assigned(name: str, scheduled_offset: float, **kw: Any) -> dict[str, Any]:
    """An assigned pod; upstream's ``podAssignInfo.timestamp`` becomes its PodScheduled time.

    (Upstream's harness only creates the pod through the fake client, so its cache stamps it with
    the clock at sync time; every TestScore expectation is the same either way: the pods are
    either unreported, or their estimate only matters through nodeEstimated.)
    """
    kw.setdefault("req", RES_16_32)
    kw.setdefault("lim", RES_16_32)
    return pod_obj(name, node=NODE, conditions=(scheduled(scheduled_offset),), **kw)


SCORE_CASES = [
    pytest.param(
        # upstream scores a nil pod here (never read: scoreAccordingProdUsage is false); an empty pod stands in
        {"pod": pod_obj("test-pod-1"), "metric": metric_obj(update=-180, **EMPTY_USAGE_METRIC)},  # type: ignore[arg-type]
        0,
        id="score node with expired nodeMetric",
    ),
    pytest.param(
        {"pod": _test_pod_1(), "metric": metric_obj(**EMPTY_USAGE_METRIC)},  # type: ignore[arg-type]
        90,
        id="score empty node",
    ),
    pytest.param({"pod": _test_pod_1()}, 0, id="score node missing NodeMetrics"),
    pytest.param(
        {"pod": _test_pod_1(), "metric": metric_obj(usage={"cpu": "32", "memory": "10Gi"})},
        72,
        id="score load node",
    ),
    pytest.param(
        {
            "aggregated": {"scoreAggregationType": "p95", "scoreAggregatedDuration": "5m0s"},
            "pod": _test_pod_1(),
            "metric": metric_obj(
                usage={"cpu": "0", "memory": "0Gi"},
                aggregated=[
                    (
                        "5m0s",
                        {"p95": {"cpu": "32", "memory": "10Gi"}, "p99": {"cpu": "50", "memory": "70Gi"}},
                    )
                ],
            ),
        },
        72,
        id="score load node with p95",
    ),
    pytest.param(
        {
            "aggregated": {"scoreAggregationType": "p95", "scoreAggregatedDuration": "5m0s"},
            "pod": _test_pod_1(),
            "metric": metric_obj(usage={"cpu": "0", "memory": "0Gi"}),
        },
        90,
        id="score load node with p95 but have not reported usage",
    ),
    pytest.param(
        {
            "aggregated": {"scoreAggregationType": "p95", "scoreAggregatedDuration": "5m0s"},
            "pod": _test_pod_1(),
            "assigned": [_assigned("assigned-pod-1", -600)],
            "metric": metric_obj(
                usage={"cpu": "0", "memory": "0Gi"},
                pods=[pod_metric("assigned-pod-1", {"cpu": "1", "memory": "1Gi"})],
            ),
        },
        81,
        id="score load node with p95 but have not reported usage and have assigned pods",
    ),
    pytest.param(
        {
            "pod": _test_pod_1(),
            "assigned": [_assigned("assigned-pod-1", 0)],
            "metric": metric_obj(usage={"cpu": "32", "memory": "10Gi"}),
        },
        63,
        id="score load node with just assigned pod",
    ),
    pytest.param(
        {
            "pod": _test_pod_1(),
            "assigned": [_assigned("assigned-pod-1", 0)],
            "metric": metric_obj(update=-10, usage={"cpu": "32", "memory": "10Gi"}),
        },
        63,
        id="score load node with just assigned pod where after updateTime",
    ),
    pytest.param(
        {
            "pod": _test_pod_1(),
            "assigned": [_assigned("assigned-pod-1", -10)],
            "metric": metric_obj(usage={"cpu": "32", "memory": "10Gi"}),
        },
        63,
        id="score load node with just assigned pod where before updateTime",
    ),
    pytest.param(
        {
            "pod": _test_pod_1(
                priority=BATCH_MIN,
                req={"kubernetes.io/batch-cpu": "16000", "kubernetes.io/batch-memory": "32Gi"},
                lim={"kubernetes.io/batch-cpu": "16000", "kubernetes.io/batch-memory": "32Gi"},
            ),
            "metric": metric_obj(**EMPTY_USAGE_METRIC),  # type: ignore[arg-type]
        },
        90,
        id="score batch Pod",
    ),
    pytest.param(
        {
            "score_prod": True,
            "pod": _test_pod_1(
                name="prod-pod-1",
                priority=PROD_MAX,
                req={"cpu": "16000", "memory": "32Gi"},
                lim={"cpu": "16000", "memory": "32Gi"},
            ),
            "assigned": [_assigned("assign-prod-pod-1", 0, priority=PROD_MAX)],
            "metric": metric_obj(
                usage={},
                node_metric=True,
                pods=[pod_metric("assign-prod-pod-1", {"cpu": "30", "memory": "100Gi"}, "koord-prod")],
            ),
        },
        38,
        id="score prod Pod",
    ),
    pytest.param(
        {
            "pod": _test_pod_1(req={"cpu": "8", "memory": "16Gi"}),
            "metric": metric_obj(**EMPTY_USAGE_METRIC),  # type: ignore[arg-type]
        },
        90,
        id="score request less than limit",
    ),
    pytest.param(
        {"dominant": 10, "pod": _test_pod_1(), "metric": metric_obj(**EMPTY_USAGE_METRIC)},  # type: ignore[arg-type]
        85,
        id="score with drf",
    ),
    pytest.param(
        {"pod": pod_obj("test-pod-1"), "metric": metric_obj(**EMPTY_USAGE_METRIC)},  # type: ignore[arg-type]
        99,
        id="score empty pod",
    ),
]


@pytest.mark.parametrize(("case", "want"), SCORE_CASES)
def test_score(case: dict[str, Any], want: int) -> None:
    args: dict[str, Any] = {
        "scoreAccordingProdUsage": case.get("score_prod", False),
        "dominantResourceWeight": case.get("dominant", 0),
    }
    if case.get("aggregated"):
        args["aggregated"] = case["aggregated"]
    env = Env(args)
    env.apply("Node", node_obj(NODE, ALLOC_96))
    if case.get("metric"):
        env.apply("NodeMetric", case["metric"])
    for pod in case.get("assigned", []):
        env.apply("Pod", pod)
    assert env.score(case["pod"]) == want


# ---------------------------------------------------------------------------------------- estimator
def _estimator_args(factors: dict[str, int] | None = None, allow_customize: bool = False) -> LoadAwareSchedulingArgs:
    """Args as upstream's estimator tests build them: SetDefaults (factors merged), no validation
    (one case uses a factor of 110, which validation would reject)."""
    merged = {"cpu": 85, "memory": 70}
    merged.update(factors or {})
    return LoadAwareSchedulingArgs(estimated_scaling_factors=merged, allow_customize_estimation=allow_customize)


GUARANTEED_4_8 = {"req": {"cpu": "4", "memory": "8Gi"}, "lim": {"cpu": "4", "memory": "8Gi"}}


@pytest.mark.parametrize(
    ("pod", "factors", "allow_customize", "want"),
    [
        pytest.param(pod_obj(), None, False, {"cpu": 250, "memory": 200 * MI}, id="estimate empty pod"),
        pytest.param(
            pod_obj(**GUARANTEED_4_8),  # type: ignore[arg-type]
            None,
            False,
            {"cpu": 3400, "memory": 6012954214},
            id="estimate guaranteed pod",
        ),
        pytest.param(
            pod_obj(req={"cpu": "4", "memory": "8Gi"}, lim={"cpu": "8", "memory": "8Gi"}),
            None,
            False,
            {"cpu": 6800, "memory": 6012954214},
            id="estimate burstable pod",
        ),
        pytest.param(
            pod_obj(**GUARANTEED_4_8),  # type: ignore[arg-type]
            {"cpu": 110},
            False,
            {"cpu": 4000, "memory": 6012954214},
            id="estimate guaranteed pod and zoomed cpu factors",
        ),
        pytest.param(
            pod_obj(**GUARANTEED_4_8),  # type: ignore[arg-type]
            {"memory": 110},
            False,
            {"cpu": 3400, "memory": 8589934592},
            id="estimate guaranteed pod and zoomed memory factors",
        ),
        pytest.param(
            pod_obj(
                labels={"koordinator.sh/qosClass": "BE"},
                priority=BATCH_MIN,
                req={"kubernetes.io/batch-cpu": "4000", "kubernetes.io/batch-memory": "8Gi"},
                lim={"kubernetes.io/batch-cpu": "4000", "kubernetes.io/batch-memory": "8Gi"},
            ),
            None,
            False,
            {"cpu": 3400, "memory": 6012954214},
            id="estimate Batch pod",
        ),
        pytest.param(
            pod_obj(labels={"koordinator.sh/qosClass": "LS"}, priority=PROD_MAX, req={"cpu": "4", "memory": "8Gi"}),
            {"cpu": 80, "memory": 80},
            False,
            {"cpu": 3200, "memory": 6871947674},
            id="estimate pod only has request",
        ),
        pytest.param(
            pod_obj(
                labels={"koordinator.sh/qosClass": "LS"},
                annotations={ANN_SCALING_FACTORS: '{"cpu":100}'},
                priority=PROD_MAX,
                req={"cpu": "4", "memory": "8Gi"},
            ),
            {"cpu": 80, "memory": 80},
            True,
            {"cpu": 4000, "memory": 6871947674},
            id="estimate pod with customized factors",
        ),
    ],
)
def test_default_estimator_estimate_pod(
    pod: dict[str, Any], factors: dict[str, int] | None, allow_customize: bool, want: dict[str, int]
) -> None:
    assert estimate_pod(parse_pod(pod), _estimator_args(factors, allow_customize)) == want


@pytest.mark.parametrize(
    ("node", "want"),
    [
        pytest.param(node_obj("n", {"cpu": "32"}), {"cpu": "32"}, id="estimate empty node"),
        pytest.param(
            node_obj("n", {"cpu": "32", "memory": "42Gi"}, {ANN_RAW_ALLOCATABLE: '{"cpu":28,"memory":"32Gi"}'}),
            {"cpu": "28", "memory": "32Gi"},
            id="estimate node with original allocatable",
        ),
        pytest.param(
            node_obj("n", {"cpu": "32", "memory": "42Gi"}, {ANN_RAW_ALLOCATABLE: '{"cpu":32,"memory":"42Gi"}'}),
            {"cpu": "32", "memory": "42Gi"},
            id="estimate node with original allocatable and sames",
        ),
    ],
)
def test_default_estimator_estimate_node(node: dict[str, Any], want: dict[str, str]) -> None:
    assert node_allocatable(parse_node(node)) == parse_resource_list(want)


def test_review_raw_allocatable_used_by_filter() -> None:
    """The raw-allocatable annotation reaches Filter (Filter calls EstimateNode, load_aware.go:176).

    Data of "estimate node with original allocatable": usage 20 of raw 28 cpus = 71% > 65 fails,
    while 20 of the amplified 32 cpus = 63% would pass.
    """
    env = Env({"filterExpiredNodeMetrics": False})
    env.apply("NodeMetric", metric_obj(usage={"cpu": "19750m", "memory": "1Gi"}))
    env.apply(
        "Node", node_obj(NODE, {"cpu": "32", "memory": "42Gi"}, {ANN_RAW_ALLOCATABLE: '{"cpu":28,"memory":"32Gi"}'})
    )
    assert_status(env.filter(pod_obj("empty-pod")), CPU_EXCEED)
    env.apply("Node", node_obj(NODE, {"cpu": "32", "memory": "42Gi"}), EventType.MODIFIED)
    assert_status(env.filter(pod_obj("empty-pod")), None)


# ---------------------------------------------------------------------------------------- TestGetTargetAggregatedUsage
@pytest.mark.parametrize(
    ("metric", "duration", "want"),
    [
        pytest.param(
            metric_obj(
                "n",
                aggregated=[
                    ("5m0s", {"p95": {"cpu": "30"}}),
                    ("10m0s", {"p95": {"cpu": "50"}}),
                    ("15m0s", {"p95": None}),
                ],
            ),
            0.0,
            vec(50_000, 0),
            id="Valid AggregatedNodeUsages and aggregatedDuration is nil",
        ),
        pytest.param(
            metric_obj(
                "n",
                aggregated=[
                    ("5m0s", {"p95": {"cpu": "30"}}),
                    ("10m0s", {"p95": {"cpu": "50"}}),
                    ("15m0s", {"p95": {"cpu": "70"}}),
                ],
            ),
            300.0,
            vec(30_000, 0),
            id="aggregatedDuration is not nil and matches a duration",
        ),
        pytest.param(
            metric_obj("n", usage={"cpu": "30"}, aggregated=[("5m0s", {"p95": None})]),
            0.0,
            vec(30_000, 0),
            id="NodeUsage contains a valid resource list and AggregatedNodeUsages is empty",
        ),
    ],
)
def test_get_target_aggregated_usage(metric: dict[str, Any], duration: float, want: list[int]) -> None:
    env = Env(LoadAwareSchedulingArgs())
    env.apply("NodeMetric", metric)
    view = env.load("n").metric
    assert view is not None
    assert view.target_aggregated("p95", duration) == want


# ---------------------------------------------------------------------------------------- pod assign cache
CACHE_NODE = "test-node"
DEFAULT_EST = vec(250, 200 * MI)


def _cache_env(factors: dict[str, int], **kw: Any) -> Env:
    """upstream: newPodAssignCache with args {EstimatedScalingFactors: factors} (no defaulting)."""
    return Env(LoadAwareSchedulingArgs(estimated_scaling_factors=factors, **kw))


def _running(name: str, uid: str, node: str = CACHE_NODE, phase: str = "Running", **kw: Any) -> dict[str, Any]:
    return pod_obj(name, uid=uid, node=node, phase=phase, **kw)


ON_ADD_CASES = [
    pytest.param(pod_obj("pending"), {"pods": 0}, id="add pending pod"),
    pytest.param(pod_obj("terminated", node=CACHE_NODE, phase="Failed"), {"pods": 0}, id="add terminated pod"),
    pytest.param(
        _running("test", "123456789"),
        {
            "pods": {"123456789": (NOW, DEFAULT_EST)},
            "node_delta": DEFAULT_EST,
            "node_estimated": DEFAULT_EST,
            "node_delta_pods": {"default/test"},
            "node_estimated_pods": {"default/test"},
        },
        id="add scheduled running pod without resources",
    ),
    pytest.param(
        pod_obj("test", uid="123456789", node=CACHE_NODE, req={"cpu": "1", "memory": "4Gi"}),
        {
            "node_delta": vec(1000, 4 * GI),
            "prod_delta": vec(1000, 4 * GI),
            "node_estimated": vec(1000, 4 * GI),
            "node_delta_pods": {"default/test"},
            "prod_delta_pods": {"default/test"},
            "node_estimated_pods": {"default/test"},
        },
        id="add prod pod",
    ),
    pytest.param(
        pod_obj(
            "test",
            uid="123456789",
            node=CACHE_NODE,
            priority=MID_DEFAULT,
            req={"kubernetes.io/mid-cpu": "1k", "kubernetes.io/mid-memory": "4Gi"},
        ),
        {
            "node_delta": vec(1000, 4 * GI),
            "node_estimated": vec(1000, 4 * GI),
            "node_delta_pods": {"default/test"},
            "node_estimated_pods": {"default/test"},
        },
        id="add non prod pod",
    ),
    pytest.param(
        _running("test-reservation", "reserve-uid-123", annotations={"scheduling.koordinator.sh/reserve-pod": "true"}),
        {"pods": 0},
        id="add reserve pod - should be skipped",
    ),
]


def _check_load(load: NodeLoad, want: dict[str, Any]) -> None:
    pods = want.get("pods")
    if isinstance(pods, int):
        assert len(load.pods) == pods
    elif pods is not None:
        assert {uid: (i.timestamp, i.estimated) for uid, i in load.pods.items()} == pods
    for attr in ("node_delta", "prod_delta", "node_estimated", "node_delta_pods", "prod_delta_pods"):
        if attr in want:
            assert getattr(load, attr) == want[attr], attr
    if "node_estimated_pods" in want:
        assert estimated_pods(load) == want["node_estimated_pods"]


@pytest.mark.parametrize(("pod", "want"), ON_ADD_CASES)
def test_pod_assign_cache_on_add(pod: dict[str, Any], want: dict[str, Any]) -> None:
    env = _cache_env({"cpu": 100, "memory": 100})
    env.apply("NodeMetric", {"metadata": {"name": CACHE_NODE}})
    env.apply("Pod", pod)
    _check_load(env.load(CACHE_NODE), want)


ON_UPDATE_CASES = [
    pytest.param(pod_obj("pending"), [], {"pods": 0}, id="update pending pod"),
    pytest.param(
        _running("test", "123456789", phase="Failed"),
        [_running("test", "123456789")],
        {"pods": 0},
        id="update terminated pod",
    ),
    pytest.param(
        _running("test", "123456789"),
        [],
        {
            "pods": {"123456789": (NOW, DEFAULT_EST)},
            "node_delta": DEFAULT_EST,
            "node_estimated": DEFAULT_EST,
            "node_delta_pods": {"default/test"},
            "node_estimated_pods": {"default/test"},
        },
        id="update scheduled running pod without resources",
    ),
    pytest.param(
        _running("test", "123456789", annotations={"foo": "bar"}, labels={"foo": "bar"}),
        [_running("test", "123456789")],
        {"pods": {"123456789": (NOW, DEFAULT_EST)}},
        id="update pod metadata only, cache won't be updated",
    ),
    pytest.param(
        _running("test", "123456789", conditions=(scheduled(1), initialized(3))),
        [_running("test", "123456789", conditions=(scheduled(1),))],
        {
            "pods": {"123456789": (NOW + 1, DEFAULT_EST)},
            "node_delta": DEFAULT_EST,
            "node_estimated": DEFAULT_EST,
            "node_delta_pods": {"default/test"},
            "node_estimated_pods": {"default/test"},
        },
        id="update pod conditions, cache will be updated",
    ),
    pytest.param(
        _running("test", "123456789", req={"cpu": "1", "memory": "4Gi"}),
        [_running("test", "123456789", conditions=(scheduled(1),))],
        {
            "pods": {"123456789": (NOW, vec(1000, 4 * GI))},
            "node_delta": vec(1000, 4 * GI),
            "prod_delta": vec(1000, 4 * GI),
            "node_estimated": vec(1000, 4 * GI),
            "node_delta_pods": {"default/test"},
            "prod_delta_pods": {"default/test"},
            "node_estimated_pods": {"default/test"},
        },
        id="update pod resources, cache will be updated",
    ),
]


@pytest.mark.parametrize(("pod", "existing", "want"), ON_UPDATE_CASES)
def test_pod_assign_cache_on_update(pod: dict[str, Any], existing: list[dict[str, Any]], want: dict[str, Any]) -> None:
    env = _cache_env({"cpu": 100, "memory": 100})
    env.apply("NodeMetric", {"metadata": {"name": CACHE_NODE}})
    for p in existing:
        env.apply("Pod", p)
    env.apply("Pod", pod, EventType.MODIFIED)
    _check_load(env.load(CACHE_NODE), want)


@pytest.mark.parametrize(
    ("req", "want_dst"),
    [
        pytest.param(
            None,
            {
                "pods": 1,
                "node_delta": DEFAULT_EST,
                "node_estimated": DEFAULT_EST,
                "node_delta_pods": {"default/test-pod"},
                "node_estimated_pods": {"default/test-pod"},
            },
            id="pod moves from node-a to node-b: source node cache must be cleared",
        ),
        pytest.param(
            {"cpu": "1", "memory": "4Gi"},
            {
                "pods": 1,
                "node_delta": vec(1000, 4 * GI),
                "prod_delta": vec(1000, 4 * GI),
                "node_estimated": vec(1000, 4 * GI),
                "node_delta_pods": {"default/test-pod"},
                "prod_delta_pods": {"default/test-pod"},
                "node_estimated_pods": {"default/test-pod"},
            },
            id="pod with resources moves from node-a to node-b: source node cache must be cleared",
        ),
    ],
)
def test_pod_assign_cache_on_update_node_name_change(req: dict[str, Any] | None, want_dst: dict[str, Any]) -> None:
    env = _cache_env({"cpu": 100, "memory": 100})
    env.apply("NodeMetric", {"metadata": {"name": "node-a"}})
    env.apply("NodeMetric", {"metadata": {"name": "node-b"}})
    env.apply("Pod", _running("test-pod", "aaa", node="node-a", req=req))
    env.apply("Pod", _running("test-pod", "aaa", node="node-b", req=req), EventType.MODIFIED)
    empty = {
        "pods": 0,
        "node_delta": vec(0, 0),
        "prod_delta": vec(0, 0),
        "node_estimated": vec(0, 0),
        "node_delta_pods": set(),
        "prod_delta_pods": set(),
        "node_estimated_pods": set(),
    }
    _check_load(env.load("node-a"), empty)
    _check_load(env.load("node-b"), want_dst)


def test_pod_assign_cache_on_delete() -> None:
    """TestPodAssignCache_OnDelete (one scenario, no sub-cases)."""
    env = _cache_env({"cpu": 50, "memory": 50})
    env.apply(
        "NodeMetric",
        metric_obj(
            CACHE_NODE,
            update=None,
            interval=None,
            usage={"cpu": "70", "memory": "280Gi"},
            pods=[
                pod_metric("prod-0", {"cpu": "50", "memory": "200Gi"}, "koord-prod"),
                pod_metric("prod-1", {"cpu": "1", "memory": "6Gi"}, "koord-prod"),
                pod_metric("prod-2", {"cpu": "4", "memory": "2Gi"}, "koord-prod"),
                pod_metric("prod-3", {"cpu": "3", "memory": "6Gi"}, "koord-mid"),
                pod_metric("mid-1", {"cpu": "1", "memory": "6Gi"}, "koord-mid"),
                pod_metric("mid-2", {"cpu": "4", "memory": "2Gi"}, "koord-mid"),
                pod_metric("mid-3", {"cpu": "3", "memory": "6Gi"}, "koord-prod"),
            ],
        ),
    )
    prod_req = {"cpu": "4", "memory": "8Gi"}
    mid_req = {"kubernetes.io/mid-cpu": "4k", "kubernetes.io/mid-memory": "8Gi"}
    pods = [
        _running("prod-1", "1", req=prod_req),
        _running("prod-2", "2", req=prod_req),
        _running("prod-3", "3", req=prod_req),
        _running("mid-1", "4", priority=MID_DEFAULT, req=mid_req),
        _running("mid-2", "5", priority=MID_DEFAULT, req=mid_req),
        _running("mid-3", "6", priority=MID_DEFAULT, req=mid_req),
    ]
    for p in pods:
        env.apply("Pod", p)
    _check_load(
        env.load(CACHE_NODE),
        {
            "node_delta": vec(2000, 4 * GI),
            "prod_delta": vec(3000, 6 * GI),
            "node_estimated": vec(12_000, 24 * GI),
            "node_delta_pods": {"default/prod-1", "default/prod-2", "default/mid-1", "default/mid-2"},
            "prod_delta_pods": {"default/prod-1", "default/prod-2", "default/prod-3"},
            "node_estimated_pods": {f"default/{p['metadata']['name']}" for p in pods},
        },
    )
    assert env.load(CACHE_NODE).prod_usage == vec(5000, 8 * GI)
    # upstream deletes with objects that differ from the cached ones (phase Failed, other requests):
    # the cached assign info is what gets removed.
    deleted = [_running("prod-1", "1", phase="Failed", req={"cpu": "2", "memory": "8Gi"})]
    deleted += [pod_obj(p["metadata"]["name"], uid=p["metadata"]["uid"], node=CACHE_NODE) for p in pods[1:]]
    for p in deleted:
        env.apply("Pod", p, EventType.DELETED)
    _check_load(
        env.load(CACHE_NODE),
        {
            "pods": 0,
            "node_delta": vec(0, 0),
            "prod_delta": vec(0, 0),
            "node_estimated": vec(0, 0),
            "node_delta_pods": set(),
            "prod_delta_pods": set(),
            "node_estimated_pods": set(),
        },
    )


@pytest.mark.parametrize(
    ("after_scheduled", "after_initialized", "allow_customize", "pod", "want"),
    [
        pytest.param(None, None, False, pod_obj("pod"), None, id="disabled"),
        pytest.param(
            180, None, False, pod_obj("pod", conditions=(scheduled(-60),)), NOW + 120, id="enabled for pod scheduled"
        ),
        pytest.param(
            180,
            10,
            False,
            pod_obj("pod", conditions=(scheduled(-60), initialized(-30))),
            NOW - 20,
            id="disabled pod scheduled when pod initialized",
        ),
        pytest.param(
            None,
            180,
            False,
            pod_obj("pod", conditions=(initialized(-60),)),
            NOW + 120,
            id="enabled for pod initialized",
        ),
        pytest.param(
            None,
            180,
            False,
            pod_obj("pod", conditions=(initialized(-60, "False"),)),
            None,
            id="disabled for pod initialized when condition is not satisfied",
        ),
        pytest.param(
            None,
            None,
            True,
            pod_obj("pod", annotations={ANN_SECONDS_AFTER_SCHEDULED: "180"}, conditions=(scheduled(-60),)),
            NOW + 120,
            id="after pod scheduled from metadata",
        ),
        pytest.param(
            None,
            None,
            True,
            pod_obj("pod", annotations={ANN_SECONDS_AFTER_INITIALIZED: "180"}, conditions=(initialized(-60),)),
            NOW + 120,
            id="after initialized from metadata",
        ),
    ],
)
def test_should_estimate_pod_deadline(
    after_scheduled: int | None,
    after_initialized: int | None,
    allow_customize: bool,
    pod: dict[str, Any],
    want: float | None,
) -> None:
    args = LoadAwareSchedulingArgs(
        estimated_seconds_after_pod_scheduled=after_scheduled,
        estimated_seconds_after_initialized=after_initialized,
        allow_customize_estimation=allow_customize,
    )
    assert estimation_deadline(parse_pod(pod), NOW - 60, args) == want


def test_node_metric_disable_estimator() -> None:
    """TestNodeMetric "disable estimator": no scaling factors, prod usage from the prod pods only."""
    env = _cache_env({})
    pods = [
        _running("prod-1", "1", req={"cpu": "40", "memory": "160Gi"}),
        _running(
            "mid-1",
            "2",
            priority=MID_DEFAULT,
            req={"kubernetes.io/mid-cpu": "4k", "kubernetes.io/mid-memory": "8Gi"},
        ),
    ]
    for p in pods:
        env.apply("Pod", p)
    metric = metric_obj(
        CACHE_NODE,
        update=None,
        interval=None,
        usage={"cpu": "72", "memory": "280Gi"},
        pods=[
            None,
            {"name": "invalid"},
            pod_metric("prod-1", {"cpu": "50", "memory": "200Gi"}, "koord-prod"),
            pod_metric("mid-1", {"cpu": "20", "memory": "75Gi"}, "koord-mid"),
        ],
    )
    env.apply("NodeMetric", metric)
    assert env.load(CACHE_NODE).prod_usage == vec(50_000, 200 * GI)
    for p in pods:
        env.apply("Pod", p, EventType.DELETED)
    env.apply("NodeMetric", metric, EventType.DELETED)
    assert CACHE_NODE not in env.plugin.loads


def test_node_metric_enable_prod_usage_include_sys() -> None:
    """TestNodeMetric "enable prod usage include sys"."""
    env = _cache_env({}, prod_usage_include_sys=True)
    metric = metric_obj(
        CACHE_NODE,
        update=0,
        interval=180,
        usage={"cpu": "2", "memory": "4Gi"},
        system={"cpu": "2", "memory": "4Gi"},
        aggregated=[
            ("1m0s", {"avg": {"cpu": "1", "memory": "2Gi"}, "p90": {"cpu": "2", "memory": "4Gi"}}),
            ("1h0m0s", {"avg": {"cpu": "500m", "memory": "1Gi"}, "p90": {"cpu": "1500m", "memory": "3Gi"}}),
        ],
    )
    env.apply("NodeMetric", metric)
    load = env.load(CACHE_NODE)
    view = load.metric
    assert view is not None
    assert view.update_time == NOW
    assert view.report_interval == 180
    assert view.node_usage == vec(2000, 4 * GI)
    assert load.prod_usage == vec(2000, 4 * GI)
    assert view.aggregated == {
        ("avg", 0.0): vec(500, 1 * GI),
        ("p90", 0.0): vec(1500, 3 * GI),
        ("avg", 60.0): vec(1000, 2 * GI),
        ("p90", 60.0): vec(2000, 4 * GI),
        ("avg", 3600.0): vec(500, 1 * GI),
        ("p90", 3600.0): vec(1500, 3 * GI),
    }
    env.apply("NodeMetric", metric, EventType.DELETED)
    assert CACHE_NODE not in env.plugin.loads


# ---------------------------------------------------------------------------------------- args
@pytest.mark.parametrize(
    ("raw", "want_error"),
    [
        pytest.param({}, False, id="empty args"),
        pytest.param({"nodeMetricExpirationSeconds": 180}, False, id="valid nodeMetricExpirationSeconds"),
        pytest.param({"nodeMetricExpirationSeconds": 0}, True, id="zero nodeMetricExpirationSeconds"),
        pytest.param({"nodeMetricExpirationSeconds": -1}, True, id="negative nodeMetricExpirationSeconds"),
        pytest.param(
            {"resourceWeights": {"cpu": 1, "memory": 1}, "estimatedScalingFactors": {"cpu": 85, "memory": 70}},
            False,
            id="valid resource weights",
        ),
        pytest.param(
            {"resourceWeights": {"cpu": 0}, "estimatedScalingFactors": {"cpu": 85}}, True, id="resource weight zero"
        ),
        pytest.param(
            {"resourceWeights": {"cpu": 101}, "estimatedScalingFactors": {"cpu": 85}},
            True,
            id="resource weight exceeds 100",
        ),
        pytest.param({"dominantResourceWeight": -1}, True, id="dominantResourceWeight negative"),
        pytest.param({"dominantResourceWeight": 101}, True, id="dominantResourceWeight exceeds 100"),
        pytest.param({"dominantResourceWeight": 100}, False, id="valid dominantResourceWeight boundary"),
        pytest.param({"usageThresholds": {"cpu": -1}}, True, id="usageThreshold negative"),
        pytest.param({"usageThresholds": {"cpu": 101}}, True, id="usageThreshold exceeds 100"),
        pytest.param({"estimatedScalingFactors": {"cpu": 0}}, True, id="estimatedScalingFactor zero"),
        pytest.param({"estimatedScalingFactors": {"cpu": 101}}, True, id="estimatedScalingFactor exceeds 100"),
        # Upstream validates {resourceWeights: {cpu: 1}, estimatedScalingFactors: {}} WITHOUT defaulting;
        # through the real pipeline (SetDefaults_LoadAwareSchedulingArgs merges cpu/memory factors
        # before validation, defaults.go:116-124) that input is valid. decode_args always defaults,
        # so the case uses a weighted resource that has no default factor.
        pytest.param(
            {"resourceWeights": {"nvidia.com/gpu": 1}, "estimatedScalingFactors": {}},
            True,
            id="resourceWeight missing estimatedScalingFactor",
        ),
        pytest.param(
            {
                "aggregated": {
                    "usageAggregationType": "p95",
                    "usageAggregatedDuration": "1m0s",
                    "scoreAggregationType": "p90",
                    "scoreAggregatedDuration": "1m0s",
                }
            },
            False,
            id="valid aggregated args",
        ),
        pytest.param({"aggregated": {"usageAggregationType": "invalid"}}, True, id="invalid aggregation type"),
        pytest.param({"aggregated": {"usageAggregatedDuration": "-1m0s"}}, True, id="negative aggregated duration"),
    ],
)
def test_validate_load_aware_scheduling_args(raw: dict[str, Any], want_error: bool) -> None:
    if want_error:
        with pytest.raises(ArgsError):
            decode_args(raw)
    else:
        decode_args(raw)


def test_resource_weight_missing_factor_is_defaulted() -> None:
    """The upstream validation case above, through defaulting: cpu's factor is merged in, so it is valid."""
    args = decode_args({"resourceWeights": {"cpu": 1}, "estimatedScalingFactors": {}})
    assert args.estimated_scaling_factors == {"cpu": 85, "memory": 70}


@pytest.mark.parametrize(
    ("raw", "attr", "want"),
    [
        pytest.param({}, "filter_expired_node_metrics", True, id="filterExpiredNodeMetrics"),
        pytest.param({}, "enable_schedule_when_node_metrics_expired", False, id="enableScheduleWhenNodeMetricsExpired"),
        pytest.param({}, "node_metric_expiration_seconds", 180, id="nodeMetricExpirationSeconds"),
        pytest.param({}, "resource_weights", {"cpu": 1, "memory": 1}, id="resourceWeights"),
        pytest.param(
            {"dominantResourceWeight": 10}, "resource_weights", {}, id="resourceWeights not defaulted with dominant"
        ),
        pytest.param({}, "usage_thresholds", {"cpu": 65, "memory": 95}, id="usageThresholds"),
        pytest.param(
            {"usageThresholds": {"memory": 60}}, "usage_thresholds", {"memory": 60}, id="usageThresholds not merged"
        ),
        pytest.param({}, "prod_usage_thresholds", {}, id="prodUsageThresholds"),
        pytest.param({}, "estimated_scaling_factors", {"cpu": 85, "memory": 70}, id="estimatedScalingFactors"),
        pytest.param(
            {"estimatedScalingFactors": {"cpu": 50}},
            "estimated_scaling_factors",
            {"cpu": 50, "memory": 70},
            id="estimatedScalingFactors merged",
        ),
        pytest.param({}, "score_according_prod_usage", False, id="scoreAccordingProdUsage"),
        pytest.param({}, "allow_customize_estimation", False, id="allowCustomizeEstimation"),
    ],
)
def test_defaults(raw: dict[str, Any], attr: str, want: Any) -> None:
    """SetDefaults_LoadAwareSchedulingArgs (pkg/scheduler/apis/config/v1/defaults.go:100-125)."""
    assert getattr(decode_args(raw), attr) == want


# ---------------------------------------------------------------------------------------- review cases
# Not upstream test cases: behaviours read from upstream's code (file:line at mirror HEAD a7a1b76b).
@pytest.mark.parametrize(
    ("annotation", "want"),
    [
        # apis/extension/load_aware.go:84-91 returns ParseInt's value, 0 included; pod_assign_cache.go:335
        # applies the args' window only when that value is < 0.
        pytest.param("0", None, id="zero disables the args window"),
        pytest.param("abc", NOW + 120, id="invalid falls back to args"),
        pytest.param(" 30", NOW + 120, id="ParseInt rejects spaces"),
        pytest.param("+30", NOW - 30, id="ParseInt accepts a sign"),
    ],
)
def test_review_custom_estimated_seconds(annotation: str, want: float | None) -> None:
    args = LoadAwareSchedulingArgs(estimated_seconds_after_pod_scheduled=180, allow_customize_estimation=True)
    pod = pod_obj("pod", annotations={ANN_SECONDS_AFTER_SCHEDULED: annotation}, conditions=(scheduled(-60),))
    assert estimation_deadline(parse_pod(pod), NOW - 60, args) == want


def test_review_unknown_estimator_falls_back_to_default() -> None:
    """estimator/types.go:38-44: an unknown estimator name uses the default estimator, no error."""
    assert decode_args({"estimator": "someEstimator"}).estimator == "someEstimator"
    with pytest.raises(ArgsError):
        decode_args({"estimator": 3})


@pytest.mark.parametrize(
    "annotation",
    [
        pytest.param({"usageThresholds": "x", "prodUsageThresholds": {"cpu": 10}}, id="usageThresholds not a map"),
        pytest.param(
            {"prodUsageThresholds": {"cpu": 10}, "aggregatedUsage": {"usageAggregatedDuration": ""}},
            id="invalid aggregated duration",
        ),
        pytest.param({"prodUsageThresholds": {"cpu": 10.5}}, id="non-integer threshold"),
    ],
)
def test_review_malformed_usage_thresholds_annotation_is_ignored(annotation: dict[str, Any]) -> None:
    """helper.go:84-88: when GetCustomUsageThresholds fails to unmarshal, the args' profile is used as a whole."""
    env = Env({"filterExpiredNodeMetrics": False})
    env.apply(
        "NodeMetric",
        metric_obj(
            usage={"cpu": "30", "memory": "10Gi"},
            pods=[pod_metric("prod-pod-1", {"cpu": "30", "memory": "1Gi"}, "koord-prod")],
        ),
    )
    env.apply("Pod", pod_obj("prod-pod-1", node=NODE, priority=PROD_MAX, conditions=(scheduled(-10),)))
    env.apply("Node", node_obj(NODE, ALLOC_96, {ANN_USAGE_THRESHOLDS: json.dumps(annotation)}))
    assert_status(env.filter(pod_obj("prod-pod-3", priority=PROD_MAX)), None)
    # control: the same prod thresholds in a well-formed annotation apply (30 of 96 cpus > 10%)
    env.apply("Node", node_obj(NODE, ALLOC_96, {ANN_USAGE_THRESHOLDS: '{"prodUsageThresholds":{"cpu":10}}'}))
    assert_status(env.filter(pod_obj("prod-pod-3", priority=PROD_MAX)), CPU_EXCEED)


def test_review_node_metric_without_update_time_keeps_previous() -> None:
    """pod_assign_cache.go:586-588: nodeInfo.updateTime is only replaced by a non-nil status.updateTime, so
    a pod assigned before ``updateTime - reportInterval`` with reported usage stays out of nodeDelta."""
    env = Env({"filterExpiredNodeMetrics": False})
    env.apply("Node", node_obj(NODE, ALLOC_96))
    pods = [pod_metric("assigned", {"cpu": "1", "memory": "1Gi"})]
    env.apply("Pod", pod_obj("assigned", node=NODE, req={"cpu": "8"}, conditions=(scheduled(-100),)))
    env.apply("NodeMetric", metric_obj(update=-5, usage={"cpu": "60", "memory": "10Gi"}, pods=pods))
    assert env.load(NODE).node_delta == vec(0, 0)
    assert_status(env.filter(pod_obj("empty-pod")), None)  # 60.25 of 96 cpus: 63%
    env.apply(
        "NodeMetric", metric_obj(update=None, usage={"cpu": "60", "memory": "10Gi"}, pods=pods), EventType.MODIFIED
    )
    assert env.load(NODE).node_delta == vec(0, 0)
    assert_status(env.filter(pod_obj("empty-pod")), None)
    # control: a pod assigned within the report interval is estimated (+5.8 cpus => 69%)
    env.apply("Pod", pod_obj("assigned", node=NODE, req={"cpu": "8"}, conditions=(scheduled(-30),)), EventType.MODIFIED)
    assert_status(env.filter(pod_obj("empty-pod")), CPU_EXCEED)


def test_review_on_update_renews_only_on_spec_or_condition_change() -> None:
    """pod_assign_cache.go:387-395 and 303-308: OnUpdate re-assigns (timestamp = clock now without PodScheduled) only
    when spec or status.conditions changed; a metadata-only update keeps the cached assign info."""
    env = _cache_env({"cpu": 100, "memory": 100})
    env.apply("NodeMetric", {"metadata": {"name": CACHE_NODE}})
    env.apply("Pod", _running("test", "1"))
    env.now = NOW + 100
    env.apply("Pod", _running("test", "1", labels={"foo": "bar"}), EventType.MODIFIED)
    assert env.load(CACHE_NODE).pods["1"].timestamp == NOW
    env.apply(
        "Pod", _running("test", "1", labels={"foo": "bar"}, conditions=(("Ready", "True", 90),)), EventType.MODIFIED
    )
    assert env.load(CACHE_NODE).pods["1"].timestamp == NOW + 100


@pytest.mark.parametrize(
    ("allocatable", "usage", "threshold", "want"),
    [
        pytest.param("96", "62150m", 65, None, id="exactly at the threshold passes"),
        pytest.param("100", "64250m", 65, None, id="64.5 rounds to 65 and passes"),
        pytest.param("100", "64250m", 64, CPU_EXCEED, id="64.5 rounds to 65 and fails 64"),
        pytest.param("100", "66250m", 66, CPU_EXCEED, id="66.5 rounds half away from zero"),
        pytest.param("100", "65250m", 65, CPU_EXCEED, id="65.5 rounds up and fails"),
    ],
)
def test_review_threshold_boundary(allocatable: str, usage: str, threshold: int, want: str | None) -> None:
    """load_aware.go:326-327 (filterNodeUsage): ``usage := int64(math.Round(est / total * 100)); if usage <= value``.

    The incoming empty pod adds 250m; percentages are computed in float64 exactly as Go does.
    """
    env = Env({"filterExpiredNodeMetrics": False, "usageThresholds": {"cpu": threshold, "memory": 95}})
    env.apply("NodeMetric", metric_obj(usage={"cpu": usage, "memory": "1Gi"}))
    env.apply("Node", node_obj(NODE, {"cpu": allocatable, "memory": "512Gi"}))
    assert_status(env.filter(pod_obj("empty-pod")), want)


def _renewal_env(**kw: Any) -> tuple[Env, dict[str, Any]]:
    env = _cache_env({"cpu": 100, "memory": 100}, **kw)
    env.apply("NodeMetric", {"metadata": {"name": CACHE_NODE}})
    bound = pod_obj("web", uid="w1", node=CACHE_NODE, req={"cpu": "1", "memory": "1Gi"}, conditions=(scheduled(-5),))
    env.apply("Pod", bound)
    env.plugin._flush()
    return env, bound


def test_running_update_that_changes_no_accounting_only_records_the_fingerprint() -> None:
    """The kubelet's Running update (new conditions, same PodScheduled time, same requests) renews the
    entry as upstream does, to the very same values: the entry and the node's sums stay, and the node's
    row is not queued for a rewrite (issue 29)."""
    env, bound = _renewal_env()
    load = env.load(CACHE_NODE)
    held = load.pods["w1"]
    sums = (list(load.node_delta), list(load.node_estimated), set(load.node_delta_pods))
    running = copy.deepcopy(bound)
    running["status"] = {
        "phase": "Running",
        "conditions": bound["status"]["conditions"]
        + [{"type": t, "status": "True", "lastTransitionTime": ts(-1)} for t in ("Initialized", "Ready")],
    }
    env.apply("Pod", running, EventType.MODIFIED)
    assert load.pods["w1"] is held
    assert held.fingerprint == env.cache.pods["w1"].spec_hash != parse_pod(bound).spec_hash
    assert (held.timestamp, held.estimated) == (NOW - 5, vec(1000, GI))
    assert (list(load.node_delta), list(load.node_estimated), set(load.node_delta_pods)) == sums
    assert CACHE_NODE not in env.plugin._dirty


@pytest.mark.parametrize(
    ("change", "want_timestamp", "want_estimated", "want_dirty"),
    [
        pytest.param({"req": {"cpu": "2", "memory": "1Gi"}}, NOW - 5, vec(2000, GI), True, id="resized requests"),
        # the pod reports no usage, so it is estimated whatever its timestamp: the sums stay, the entry is renewed
        pytest.param({"conditions": (scheduled(-2),)}, NOW - 2, vec(1000, GI), False, id="new PodScheduled time"),
    ],
)
def test_an_update_that_changes_the_accounting_is_still_applied(
    change: dict[str, Any], want_timestamp: float, want_estimated: list[int], want_dirty: bool
) -> None:
    env, _ = _renewal_env()
    kw: dict[str, Any] = {"req": {"cpu": "1", "memory": "1Gi"}, "conditions": (scheduled(-5),), **change}
    env.apply("Pod", pod_obj("web", uid="w1", node=CACHE_NODE, phase="Running", **kw), EventType.MODIFIED)
    load = env.load(CACHE_NODE)
    info = load.pods["w1"]
    assert (info.timestamp, info.estimated) == (want_timestamp, want_estimated)
    assert load.node_estimated == want_estimated
    assert (CACHE_NODE in env.plugin._dirty) == want_dirty
    _assert_sums_as_recomputed(load)


def _sums(load: NodeLoad) -> tuple[Any, ...]:
    return (
        list(load.prod_usage),
        list(load.node_delta),
        list(load.prod_delta),
        list(load.node_estimated),
        set(load.node_delta_pods),
        set(load.prod_delta_pods),
    )


def _assert_sums_as_recomputed(load: NodeLoad) -> None:
    """The incrementally kept sums equal those worked out afresh from the held entries (set_metric)."""
    kept = _sums(load)
    load.set_metric(load.metric)
    assert _sums(load) == kept


def _reported_env(**kw: Any) -> Env:
    """A node whose NodeMetric (updated now, 60 s reports) reports 200m / 256Mi used by default/web."""
    env = _cache_env({"cpu": 100, "memory": 100}, **kw)
    env.apply(
        "NodeMetric",
        metric_obj(
            CACHE_NODE,
            update=0,
            usage={"cpu": "1", "memory": "2Gi"},
            pods=[pod_metric("web", {"cpu": "200m", "memory": "256Mi"})],
        ),
    )
    return env


@pytest.mark.parametrize(
    ("before", "after", "want_delta"),
    [
        pytest.param(-5, -100, vec(0, 0), id="scheduled time moves before the report window: usage trusted"),
        pytest.param(-100, -5, vec(800, GI - 256 * MI), id="scheduled time moves into the report window: estimated"),
    ],
)
def test_a_renewal_that_moves_the_pod_across_the_report_window_re_accounts(
    before: float, after: float, want_delta: list[int]
) -> None:
    """Same key, estimate and prod flag, but the new timestamp changes whether the reported usage is trusted:
    the entry must come out of the sums and go back in (the shortcut of equal accounting must not apply)."""
    env = _reported_env()
    kw: dict[str, Any] = {"uid": "w1", "node": CACHE_NODE, "req": {"cpu": "1", "memory": "1Gi"}}
    env.apply("Pod", pod_obj("web", conditions=(scheduled(before),), **kw))
    env.plugin._flush()
    env.apply("Pod", pod_obj("web", phase="Running", conditions=(scheduled(after),), **kw), EventType.MODIFIED)
    load = env.load(CACHE_NODE)
    assert load.pods["w1"].timestamp == NOW + after
    assert load.node_delta == want_delta
    assert CACHE_NODE in env.plugin._dirty
    _assert_sums_as_recomputed(load)


def test_a_renewal_that_moves_the_deadline_past_the_report_re_accounts() -> None:
    """estimatedSecondsAfterInitialized: the Initialized time sets a deadline after the NodeMetric's update,
    so a pod scheduled long ago is estimated again although its timestamp stays."""
    env = _reported_env(estimated_seconds_after_initialized=30)
    kw: dict[str, Any] = {"uid": "w1", "node": CACHE_NODE, "req": {"cpu": "1", "memory": "1Gi"}}
    env.apply("Pod", pod_obj("web", conditions=(scheduled(-100),), **kw))
    load = env.load(CACHE_NODE)
    assert load.node_delta == vec(0, 0)
    env.plugin._flush()
    running = pod_obj("web", phase="Running", conditions=(scheduled(-100), initialized(-10)), **kw)
    env.apply("Pod", running, EventType.MODIFIED)
    assert load.pods["w1"].deadline == NOW - 10 + 30
    assert load.node_delta == vec(800, GI - 256 * MI)
    assert CACHE_NODE in env.plugin._dirty
    _assert_sums_as_recomputed(load)


def test_assume_then_bound_event_keeps_the_sums_and_takes_the_scheduled_time() -> None:
    """The binding's assume accounts the pod at the clock's now; the watch's bound event brings the PodScheduled
    time. Both are inside the estimation window (no usage reported yet), so the sums stay as the assume left
    them while the entry takes the new timestamp."""
    env = _reported_env()
    env.apply("Node", node_obj(CACHE_NODE, ALLOC_96))
    pending = pod_obj("new", uid="n1", req={"cpu": "1", "memory": "1Gi"})
    env.apply("Pod", pending)
    env.cache.assume(env.cache.pods["n1"], CACHE_NODE)
    load = env.load(CACHE_NODE)
    assert load.pods["n1"].timestamp == NOW
    assert load.node_delta == load.node_estimated == vec(1000, GI)
    env.plugin._flush()
    bound = pod_obj("new", uid="n1", node=CACHE_NODE, req={"cpu": "1", "memory": "1Gi"}, conditions=(scheduled(-1),))
    env.apply("Pod", bound, EventType.MODIFIED)
    assert load.pods["n1"].timestamp == NOW - 1
    assert load.node_delta == load.node_estimated == vec(1000, GI)
    assert CACHE_NODE not in env.plugin._dirty
    _assert_sums_as_recomputed(load)


def test_assigned_estimates_follow_the_priority_class_and_the_custom_factors() -> None:
    """The plugin remembers assigned pods' estimates by what they are worked out from: pods with the same
    requests but another priority class (batch pods are estimated from their batch-* requests) or other
    custom scaling factors get their own estimate."""
    env = _cache_env({"cpu": 100, "memory": 100}, allow_customize_estimation=True)
    env.apply("NodeMetric", {"metadata": {"name": CACHE_NODE}})
    req = {"cpu": "1", "memory": "1Gi", "kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"}
    env.apply("Pod", pod_obj("prod", uid="p", node=CACHE_NODE, req=req))
    env.apply("Pod", pod_obj("batch", uid="b", node=CACHE_NODE, req=req, priority=BATCH_MIN))
    factors = {ANN_SCALING_FACTORS: json.dumps({"cpu": 50})}
    env.apply("Pod", pod_obj("half", uid="h", node=CACHE_NODE, req=req, annotations=factors))
    env.apply("Pod", pod_obj("prod2", uid="p2", node=CACHE_NODE, req=req))
    pods = env.load(CACHE_NODE).pods
    assert pods["p"].estimated == pods["p2"].estimated == vec(1000, GI)
    assert pods["b"].estimated == vec(500, 256 * MI)
    assert pods["h"].estimated == vec(500, GI)
    assert pods["p"].estimated is not pods["p2"].estimated  # each entry has its own list
    # a priority-class change on a bound pod (same requests) is re-estimated when its conditions change
    env.apply(
        "Pod",
        pod_obj("prod2", uid="p2", node=CACHE_NODE, req=req, priority=BATCH_MIN, conditions=(scheduled(-1),)),
        EventType.MODIFIED,
    )
    assert pods["p2"].estimated == vec(500, 256 * MI)
    assert env.load(CACHE_NODE).node_estimated == vec(1000 + 500 + 500 + 500, GI + 256 * MI + GI + 256 * MI)


def test_initialized_update_renews_the_deadline_when_it_counts() -> None:
    """With estimatedSecondsAfterInitialized the Initialized time moves the deadline: not an equal renewal."""
    env, bound = _renewal_env(estimated_seconds_after_initialized=30)
    held = env.load(CACHE_NODE).pods["w1"]
    running = copy.deepcopy(bound)
    running["status"]["conditions"].append({"type": "Initialized", "status": "True", "lastTransitionTime": ts(-1)})
    env.apply("Pod", running, EventType.MODIFIED)
    renewed = env.load(CACHE_NODE).pods["w1"]
    assert renewed is not held
    assert renewed.deadline == NOW - 1 + 30


def test_incoming_estimates_are_shared_by_equal_pods_and_follow_what_they_read() -> None:
    """An incoming pod's estimate is worked out once for pods equal in what it reads (priority class,
    requests, limits, custom scaling factors) and shared read-only (issue 29); a pod differing in any of
    these gets its own, equal to :func:`estimate_pod` of it."""
    env = _cache_env({"cpu": 100, "memory": 100}, allow_customize_estimation=True)
    req = {"cpu": "1", "memory": "1Gi", "kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"}
    factors = {ANN_SCALING_FACTORS: json.dumps({"cpu": 50})}
    pods = {
        "prod": parse_pod(pod_obj("prod", uid="p", req=req)),
        "prod2": parse_pod(pod_obj("prod2", uid="p2", req=req)),
        "batch": parse_pod(pod_obj("batch", uid="b", req=req, priority=BATCH_MIN)),
        "half": parse_pod(pod_obj("half", uid="h", req=req, annotations=factors)),
        "more": parse_pod(pod_obj("more", uid="m", req={**req, "cpu": "2"})),
    }
    got = {name: env.plugin.pod_estimate(CycleState(NOW), pod) for name, pod in pods.items()}
    assert got["prod"] is got["prod2"]  # one array for the two replicas
    assert not got["prod"].flags.writeable
    assert [got[n].tolist() for n in ("prod", "batch", "half", "more")] == [
        vec(1000, GI),
        vec(500, 256 * MI),
        vec(500, GI),
        vec(2000, GI),
    ]
    for name, pod in pods.items():  # each as the plain estimate of that pod
        assert got[name].tolist() == env.plugin.vec.from_values(estimate_pod(pod, env.plugin.args))
