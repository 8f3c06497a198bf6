"""Table tests of the pydantic models kept at the edges: NodeMetric (the agent checks each report
against it) and the NodeSLO spec (the agent reads its NodeSLO through it). Upstream JSON shapes
validate and round-trip, wrong shapes fail at the failing field, and apiVersion/kind match upstream."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.api.slo import NodeMetric, NodeMetricStatus, NodeSLOSpec

NODE_METRIC: dict[str, Any] = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeMetric",
    "metadata": {
        "name": "node-1",
        "uid": "0f9a3c1e-1111-4c3b-9b1e-2a3b4c5d6e7f",
        "resourceVersion": "123456",
        "generation": 1,
        "creationTimestamp": "2024-05-01T08:00:00Z",
        "labels": {"kubernetes.io/hostname": "node-1"},
    },
    "spec": {
        "metricCollectPolicy": {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
    },
    "status": {
        "updateTime": "2024-05-01T10:00:00Z",
        "nodeMetric": {
            "nodeUsage": {
                "resources": {"cpu": "3250m", "memory": "12Gi"},
                "devices": [
                    {
                        "type": "gpu",
                        "id": "GPU-6a1e5c3e-0d1f-4b6e-9e7a-1b2c3d4e5f60",
                        "minor": 0,
                        "health": True,
                        "resources": {"koordinator.sh/gpu-core": "40", "koordinator.sh/gpu-memory": "8Gi"},
                    }
                ],
            },
            "aggregatedNodeUsages": [
                {
                    "duration": "5m0s",
                    "usage": {
                        "avg": {"resources": {"cpu": "3", "memory": "11Gi"}},
                        "p50": {"resources": {"cpu": "2900m", "memory": "11Gi"}},
                        "p90": {"resources": {"cpu": "3800m", "memory": "12Gi"}},
                        "p95": {"resources": {"cpu": "4", "memory": "12Gi"}},
                        "p99": {"resources": {"cpu": "4200m", "memory": "13Gi"}},
                    },
                }
            ],
            "systemUsage": {"resources": {"cpu": "250m", "memory": "1Gi"}},
            "aggregatedSystemUsages": [
                {"duration": "5m0s", "usage": {"avg": {"resources": {"cpu": "200m", "memory": "1Gi"}}}}
            ],
            "numaUsages": [
                {"numaNodeID": 0, "nodeUsage": {"resources": {"cpu": "2", "memory": "6Gi"}}},
                {"numaNodeID": 1, "systemUsage": {"resources": {"cpu": "100m"}}},
            ],
        },
        "podsMetric": [
            {
                "name": "web-0",
                "namespace": "default",
                "podUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}},
                "priority": "koord-prod",
                "qos": "LS",
            },
            {
                "name": "spark-exec-1",
                "namespace": "batch",
                "podUsage": {"resources": {"cpu": 1, "memory": 1073741824}},
                "priority": "koord-batch",
                "qos": "BE",
                "extensions": {"vendor.example.com/extra": {"throttled": True}},
            },
        ],
        "hostApplicationMetric": [
            {
                "name": "nginx",
                "usage": {"resources": {"cpu": "100m", "memory": "256Mi"}},
                "priority": "koord-prod",
                "qos": "LS",
            }
        ],
        "prodReclaimableMetric": {"resource": {"resources": {"cpu": "2", "memory": "4Gi"}}},
        "prodPeakMetric": {"resource": {"resources": {"cpu": "5", "memory": "14Gi"}}},
        "someFutureField": {"kept": True},
    },
}

NODE_SLO: dict[str, Any] = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeSLO",
    "metadata": {"name": "node-1"},
    "spec": {
        "resourceUsedThresholdWithBE": {
            "enable": True,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressMinPercent": 10,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "memoryEvictLowerPercent": 65,
            "cpuEvictBESatisfactionUpperPercent": 60,
            "cpuEvictBESatisfactionLowerPercent": 40,
            "cpuEvictBEUsageThresholdPercent": 90,
            "cpuEvictTimeWindowSeconds": 300,
            "cpuEvictPolicy": "evictByRealLimit",
            "evictEnabledPriorityThreshold": 5999,
            "allocatableEvictPriorityThreshold": 5999,
        },
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
            "lsrClass": {
                "cpuQOS": {"enable": True, "groupIdentity": 2},
                "memoryQOS": {"enable": True, "minLimitPercent": 100, "wmarkRatio": 95},
                "resctrlQOS": {"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100},
            },
            "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
            "beClass": {
                "cpuQOS": {"enable": True, "groupIdentity": -1, "schedIdle": 1},
                "memoryQOS": {"enable": True, "priorityEnable": 1, "priority": 0, "oomKillGroup": 0},
                "resctrlQOS": {
                    "enable": True,
                    "catRangeStartPercent": 0,
                    "catRangeEndPercent": 30,
                    "mbaPercent": 100,
                },
                "blkioQOS": {
                    "enable": True,
                    "blocks": [
                        {
                            "name": "/dev/vdb",
                            "type": "device",
                            "ioCfg": {"readIOPS": 1024, "writeBPS": 1048576},
                        }
                    ],
                },
                "networkQOS": {"enable": True, "ingressRequest": "10M", "egressLimit": "50%"},
            },
            "systemClass": {"cpuQOS": {"enable": False}},
            "cgroupRoot": {"memoryQOS": {"enable": True}},
        },
        "cpuBurstStrategy": {
            "policy": "auto",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {
            "minFreeKbytesFactor": 100,
            "watermarkScaleFactor": 150,
            "memcgReapBackGround": 0,
            "schedFeatures": {"ID_ABSOLUTE_EXPEL": True},
            "totalNetworkBandwidth": "10G",
        },
        "extensions": {"vendor-plugin": {"enable": True, "level": 3}},
        "hostApplications": [
            {
                "name": "nginx",
                "priority": "koord-prod",
                "qos": "LS",
                "cgroupPath": {
                    "base": "CgroupRoot",
                    "parentDir": "host-latency-sensitive/",
                    "relativePath": "nginx/",
                },
            }
        ],
    },
    "status": {},
}


def dump(model: BaseModel) -> dict[str, Any]:
    """JSON-shaped dict with upstream (alias) names, None fields left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def test_node_metric_validates_and_round_trips() -> None:
    obj = copy.deepcopy(NODE_METRIC)
    model = NodeMetric.model_validate(obj)
    assert obj == NODE_METRIC, "validation must not mutate its input"
    assert dump(model) == NODE_METRIC
    assert dump(NodeMetric.model_validate(dump(model))) == NODE_METRIC  # a second pass is stable


def test_node_slo_spec_validates_and_round_trips() -> None:
    spec = NodeSLOSpec.model_validate(copy.deepcopy(NODE_SLO["spec"]))
    assert dump(spec) == NODE_SLO["spec"]


def test_node_metric_api_version_and_kind_are_upstreams() -> None:
    assert NodeMetric.KIND == "NodeMetric"
    assert NodeMetric.API_VERSION == "slo.koordinator.sh/v1alpha1"
    bare = dump(NodeMetric.model_validate({"metadata": {"name": "x"}, "spec": NODE_METRIC["spec"]}))
    assert bare["apiVersion"] == "slo.koordinator.sh/v1alpha1" and bare["kind"] == "NodeMetric"


def test_snake_case_attributes_and_typed_values() -> None:
    nm = NodeMetric.model_validate(NODE_METRIC)
    assert nm.status.update_time == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert nm.status.node_metric is not None
    numa = nm.status.node_metric.numa_usages
    assert numa is not None and numa[1].numa_node_id == 1
    pods = nm.status.pods_metric
    assert pods is not None and pods[1].pod_usage is not None
    assert pods[1].pod_usage.resources == {"cpu": 1, "memory": 1073741824}  # numbers kept as given
    assert nm.status.model_extra == {"someFutureField": {"kept": True}}
    assert nm.name == "node-1" and nm.namespace == ""

    spec = NodeSLOSpec.model_validate(NODE_SLO["spec"])
    threshold = spec.resource_used_threshold_with_be
    assert threshold is not None and threshold.cpu_evict_be_satisfaction_upper_percent == 60
    qos = spec.resource_qos_strategy
    assert qos is not None and qos.be_class is not None and qos.be_class.cpu_qos is not None
    assert qos.be_class.cpu_qos.group_identity == -1


def test_populate_by_python_name() -> None:
    nm = NodeMetric(status=NodeMetricStatus(update_time=datetime(2024, 5, 1, tzinfo=UTC)))
    out = dump(nm)
    assert out["status"] == {"updateTime": "2024-05-01T00:00:00Z"}
    assert out["apiVersion"] == "slo.koordinator.sh/v1alpha1" and out["kind"] == "NodeMetric"


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        node: Any = obj
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return apply


BAD_SHAPES: list[tuple[type[BaseModel], dict[str, Any], Callable[[dict[str, Any]], None], tuple[str | int, ...]]] = [
    (NodeMetric, NODE_METRIC, _set(["status", "updateTime"], "yesterday"), ("status", "updateTime")),
    (
        NodeMetric,
        NODE_METRIC,
        _set(["status", "nodeMetric", "numaUsages", 1, "numaNodeID"], "one"),
        ("status", "nodeMetric", "numaUsages", 1, "numaNodeID"),
    ),
    (
        NodeMetric,
        NODE_METRIC,
        _set(["status", "nodeMetric", "nodeUsage", "devices", 0, "health"], "maybe"),
        ("status", "nodeMetric", "nodeUsage", "devices", 0, "health"),
    ),
    (
        NodeMetric,
        NODE_METRIC,
        _set(["spec", "metricCollectPolicy", "nodeAggregatePolicy", "durations"], "5m"),
        ("spec", "metricCollectPolicy", "nodeAggregatePolicy", "durations"),
    ),
    (NodeMetric, NODE_METRIC, _set(["apiVersion"], "slo.koordinator.sh/v1beta1"), ("apiVersion",)),
    (NodeMetric, NODE_METRIC, _set(["kind"], "NodeSLO"), ("kind",)),
    (
        NodeSLOSpec,
        NODE_SLO["spec"],
        _set(["resourceUsedThresholdWithBE", "cpuSuppressThresholdPercent"], "high"),
        ("resourceUsedThresholdWithBE", "cpuSuppressThresholdPercent"),
    ),
    (
        NodeSLOSpec,
        NODE_SLO["spec"],
        _set(["resourceQOSStrategy", "beClass", "cpuQOS", "groupIdentity"], "low"),
        ("resourceQOSStrategy", "beClass", "cpuQOS", "groupIdentity"),
    ),
    (
        NodeSLOSpec,
        NODE_SLO["spec"],
        _set(["hostApplications", 0, "cgroupPath"], "nginx/"),
        ("hostApplications", 0, "cgroupPath"),
    ),
]


@pytest.mark.parametrize(
    ("model", "base", "mutate", "loc"), BAD_SHAPES, ids=[".".join(map(str, b[3])) for b in BAD_SHAPES]
)
def test_wrong_shape_fails_at_the_field(
    model: type[BaseModel], base: dict[str, Any], mutate: Callable[[dict[str, Any]], None], loc: tuple[str | int, ...]
) -> None:
    obj = copy.deepcopy(base)
    mutate(obj)
    with pytest.raises(ValidationError) as info:
        model.model_validate(obj)
    assert tuple(info.value.errors()[0]["loc"])[: len(loc)] == loc
