"""Table tests of the Koordinator kind models: upstream JSON shapes validate and round-trip,
wrong shapes fail with the failing field path, and apiVersion/kind constants match upstream."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from app.api.colocation import ClusterColocationProfile
from app.api.meta import KubeObject
from app.api.registry import MODELS, ObjectValidationError, dump_object, validate_object
from app.api.scheduling import Device, PodMigrationJob, Reservation
from app.api.sigs import ElasticQuota, PodGroup
from app.api.slo import NodeMetric, NodeMetricStatus, NodeSLO

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

RESERVATION: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Reservation",
    "metadata": {"name": "reserve-web", "finalizers": ["koordinator.sh/reservation"]},
    "spec": {
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "reserve", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}],
                "schedulerName": "koord-scheduler",
            },
        },
        "owners": [
            {
                "controller": {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-5d9c",
                    "uid": "7c1e0d9a-2222-4c3b-9b1e-2a3b4c5d6e7f",
                    "controller": True,
                    "namespace": "default",
                }
            },
            {"object": {"kind": "Pod", "name": "web-0", "namespace": "default"}},
            {
                "labelSelector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}],
                }
            },
        ],
        "ttl": "1h0m0s",
        "allocateOnce": False,
        "allocatePolicy": "Aligned",
        "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
        "preAllocationPolicy": {"mode": "Default", "enableMultiple": True},
    },
    "status": {
        "phase": "Available",
        "nodeName": "node-1",
        "conditions": [
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "Scheduled",
                "lastProbeTime": "2024-05-01T09:00:00Z",
                "lastTransitionTime": "2024-05-01T09:00:00Z",
            },
            {
                "type": "Ready",
                "status": "True",
                "reason": "Available",
                "lastProbeTime": "2024-05-01T09:00:01Z",
                "lastTransitionTime": "2024-05-01T09:00:01Z",
            },
        ],
        "currentOwners": [{"namespace": "default", "name": "web-0", "uid": "u-1"}],
        "allocatable": {"cpu": "2", "memory": "4Gi"},
        "allocated": {"cpu": "1", "memory": "2Gi"},
    },
}

DEVICE: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Device",
    "metadata": {
        "name": "node-1",
        "annotations": {"scheduling.koordinator.sh/gpu-partitions": "{}"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "n-1", "blockOwnerDeletion": True}
        ],
    },
    "spec": {
        "devices": [
            {
                "type": "gpu",
                "id": "GPU-6a1e5c3e-0d1f-4b6e-9e7a-1b2c3d4e5f60",
                "minor": 0,
                "moduleID": 1,
                "health": True,
                "labels": {"type": "A100"},
                "resources": {
                    "koordinator.sh/gpu-core": "100",
                    "koordinator.sh/gpu-memory": "80Gi",
                    "koordinator.sh/gpu-memory-ratio": "100",
                },
                "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
                "conditions": [
                    {
                        "type": "Healthy",
                        "status": "True",
                        "reason": "DeviceHealthy",
                        "message": "device is healthy",
                        "lastTransitionTime": "2024-05-01T07:00:00Z",
                    }
                ],
            },
            {
                "type": "rdma",
                "id": "0000:1f:00.0",
                "minor": 0,
                "health": True,
                "resources": {"koordinator.sh/rdma": "100"},
                "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:1d"},
                "vfGroups": [
                    {
                        "labels": {"type": "general"},
                        "vfs": [{"minor": 0, "busID": "0000:1f:00.2"}, {"minor": 1}],
                    }
                ],
            },
        ]
    },
    "status": {
        "allocations": [
            {
                "type": "gpu",
                "entries": [{"name": "train-0", "namespace": "ml", "uuid": "p-1", "minors": [0]}],
            }
        ]
    },
}

POD_MIGRATION_JOB: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "PodMigrationJob",
    "metadata": {"name": "migrate-web-0", "creationTimestamp": "2024-05-01T09:30:00Z"},
    "spec": {
        "paused": False,
        "ttl": "5m0s",
        "mode": "ReservationFirst",
        "podRef": {"kind": "Pod", "namespace": "default", "name": "web-0", "uid": "u-1"},
        "reservationOptions": {
            "template": {
                "metadata": {"name": "migrate-web-0-reserve"},
                "spec": {
                    "template": {"spec": {"containers": [{"name": "reserve"}]}},
                    "owners": [{"object": {"namespace": "default", "name": "web-0"}}],
                },
            }
        },
        "deleteOptions": {"gracePeriodSeconds": 30},
    },
    "status": {
        "phase": "Running",
        "status": "WaitForPodBindReservation",
        "nodeName": "node-2",
        "conditions": [
            {
                "type": "ReservationCreated",
                "status": "True",
                "lastTransitionTime": "2024-05-01T09:30:01Z",
            },
            {"type": "ReservationScheduled", "status": "True", "reason": "Scheduled"},
        ],
        "podRef": {"namespace": "default", "name": "web-0"},
        "preemptedPodsRef": [{"namespace": "batch", "name": "spark-exec-1"}],
        "preemptedPodsReservation": [
            {
                "namespace": "default",
                "name": "r-old",
                "nodeName": "node-2",
                "phase": "Available",
                "podsRef": [{"namespace": "batch", "name": "spark-exec-1"}],
            }
        ],
    },
}

CLUSTER_COLOCATION_PROFILE: dict[str, Any] = {
    "apiVersion": "config.koordinator.sh/v1alpha1",
    "kind": "ClusterColocationProfile",
    "metadata": {"name": "colocation-profile-example"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "probability": "50%",
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "koordinatorPriority": 1000,
        "schedulerName": "koord-scheduler",
        "labels": {"koordinator.sh/mutated": "true"},
        "annotations": {"koordinator.sh/intercepted": "true"},
        "labelKeysMapping": {"app": "app.kubernetes.io/name"},
        "labelSuffixes": {"version": "-batch"},
        "patch": {"spec": {"terminationGracePeriodSeconds": 30}},
    },
    "status": {},
}

ELASTIC_QUOTA: dict[str, Any] = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "ElasticQuota",
    "metadata": {
        "name": "quota-a",
        "namespace": "team-a",
        "labels": {
            "quota.scheduling.koordinator.sh/parent": "koordinator-root-quota",
            "quota.scheduling.koordinator.sh/is-parent": "false",
        },
        "annotations": {"quota.scheduling.koordinator.sh/shared-weight": '{"cpu":"4","memory":"8Gi"}'},
    },
    "spec": {"min": {"cpu": "4", "memory": "8Gi"}, "max": {"cpu": 8, "memory": "16Gi"}},
    "status": {"used": {"cpu": "2500m", "memory": "5Gi"}},
}

POD_GROUP: dict[str, Any] = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {
        "name": "gang-a",
        "namespace": "ml",
        "annotations": {"gang.scheduling.koordinator.sh/mode": "NonStrict"},
    },
    "spec": {
        "minMember": 3,
        "minResources": {"cpu": "6", "nvidia.com/gpu": "3"},
        "scheduleTimeoutSeconds": 600,
    },
    "status": {
        "phase": "Scheduling",
        "occupiedBy": "ml/train",
        "scheduled": 2,
        "running": 1,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": "2024-05-01T09:00:00Z",
    },
}

OBJECTS: dict[str, dict[str, Any]] = {
    "NodeMetric": NODE_METRIC,
    "NodeSLO": NODE_SLO,
    "Reservation": RESERVATION,
    "Device": DEVICE,
    "PodMigrationJob": POD_MIGRATION_JOB,
    "ClusterColocationProfile": CLUSTER_COLOCATION_PROFILE,
    "ElasticQuota": ELASTIC_QUOTA,
    "PodGroup": POD_GROUP,
}

UPSTREAM_API_VERSIONS: dict[str, tuple[type[KubeObject], str]] = {
    "NodeMetric": (NodeMetric, "slo.koordinator.sh/v1alpha1"),
    "NodeSLO": (NodeSLO, "slo.koordinator.sh/v1alpha1"),
    "Reservation": (Reservation, "scheduling.koordinator.sh/v1alpha1"),
    "Device": (Device, "scheduling.koordinator.sh/v1alpha1"),
    "PodMigrationJob": (PodMigrationJob, "scheduling.koordinator.sh/v1alpha1"),
    "ClusterColocationProfile": (ClusterColocationProfile, "config.koordinator.sh/v1alpha1"),
    "ElasticQuota": (ElasticQuota, "scheduling.sigs.k8s.io/v1alpha1"),
    "PodGroup": (PodGroup, "scheduling.sigs.k8s.io/v1alpha1"),
}


@pytest.mark.parametrize("kind", sorted(OBJECTS))
def test_upstream_shape_validates_and_round_trips(kind: str) -> None:
    obj = copy.deepcopy(OBJECTS[kind])
    model = validate_object(kind, obj)
    assert isinstance(model, MODELS[kind])
    assert obj == OBJECTS[kind], "validation must not mutate its input"
    assert dump_object(model) == OBJECTS[kind]
    # and a second pass is stable
    assert dump_object(validate_object(kind, dump_object(model))) == OBJECTS[kind]


@pytest.mark.parametrize("kind", sorted(UPSTREAM_API_VERSIONS))
def test_api_version_and_kind_constants_are_upstreams(kind: str) -> None:
    model_cls, api_version = UPSTREAM_API_VERSIONS[kind]
    assert MODELS[kind] is model_cls
    assert kind == model_cls.KIND
    assert api_version == model_cls.API_VERSION
    bare = dump_object(model_cls.model_validate({"metadata": {"name": "x"}, "spec": OBJECTS[kind]["spec"]}))
    assert bare["apiVersion"] == api_version
    assert bare["kind"] == kind


def test_registry_covers_exactly_the_eight_kinds() -> None:
    assert set(MODELS) == set(OBJECTS)


def test_snake_case_attributes_and_typed_values() -> None:
    nm = validate_object("NodeMetric", NODE_METRIC)
    assert isinstance(nm, NodeMetric)
    assert nm.status.update_time == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert nm.status.node_metric is not None
    numa = nm.status.node_metric.numa_usages
    assert numa is not None and numa[1].numa_node_id == 1
    pods = nm.status.pods_metric
    assert pods is not None and pods[1].pod_usage is not None
    assert pods[1].pod_usage.resources == {"cpu": 1, "memory": 1073741824}  # numbers kept as given
    assert nm.status.model_extra == {"someFutureField": {"kept": True}}
    assert nm.name == "node-1" and nm.namespace == ""

    slo = validate_object("NodeSLO", NODE_SLO)
    assert isinstance(slo, NodeSLO)
    threshold = slo.spec.resource_used_threshold_with_be
    assert threshold is not None and threshold.cpu_evict_be_satisfaction_upper_percent == 60
    qos = slo.spec.resource_qos_strategy
    assert qos is not None and qos.be_class is not None and qos.be_class.cpu_qos is not None
    assert qos.be_class.cpu_qos.group_identity == -1

    rsv = validate_object("Reservation", RESERVATION)
    assert isinstance(rsv, Reservation)
    controller = rsv.spec.owners[0].controller
    assert controller is not None and controller.namespace == "default" and controller.controller is True

    ccp = validate_object("ClusterColocationProfile", CLUSTER_COLOCATION_PROFILE)
    assert isinstance(ccp, ClusterColocationProfile)
    assert ccp.spec.probability == "50%"
    int_prob = copy.deepcopy(CLUSTER_COLOCATION_PROFILE)
    int_prob["spec"]["probability"] = 30
    assert validate_object("ClusterColocationProfile", int_prob).model_dump()["spec"]["probability"] == 30

    eq = validate_object("ElasticQuota", ELASTIC_QUOTA)
    assert eq.name == "quota-a" and eq.namespace == "team-a"


def test_populate_by_python_name() -> None:
    nm = NodeMetric(status=NodeMetricStatus(update_time=datetime(2024, 5, 1, tzinfo=UTC)))
    out = dump_object(nm)
    assert out["status"] == {"updateTime": "2024-05-01T00:00:00Z"}
    assert out["apiVersion"] == "slo.koordinator.sh/v1alpha1" and out["kind"] == "NodeMetric"


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        node: Any = obj
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return apply


def _delete(path: list[str | int]) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        node: Any = obj
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return apply


BAD_SHAPES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("NodeMetric", _set(["status", "updateTime"], "yesterday"), "status.updateTime"),
    (
        "NodeMetric",
        _set(["status", "podsMetric", 0, "podUsage", "resources", "cpu"], [1]),
        "status.podsMetric[0].podUsage.resources.cpu",
    ),
    (
        "NodeMetric",
        _set(["status", "nodeMetric", "numaUsages", 1, "numaNodeID"], "one"),
        "status.nodeMetric.numaUsages[1].numaNodeID",
    ),
    (
        "NodeMetric",
        _set(["status", "nodeMetric", "nodeUsage", "devices", 0, "health"], "maybe"),
        "status.nodeMetric.nodeUsage.devices[0].health",
    ),
    (
        "NodeMetric",
        _set(["spec", "metricCollectPolicy", "nodeAggregatePolicy", "durations"], "5m"),
        "spec.metricCollectPolicy.nodeAggregatePolicy.durations",
    ),
    (
        "NodeSLO",
        _set(["spec", "resourceUsedThresholdWithBE", "cpuSuppressThresholdPercent"], "high"),
        "spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent",
    ),
    (
        "NodeSLO",
        _set(["spec", "resourceQOSStrategy", "beClass", "cpuQOS", "groupIdentity"], "low"),
        "spec.resourceQOSStrategy.beClass.cpuQOS.groupIdentity",
    ),
    (
        "NodeSLO",
        _set(["spec", "hostApplications", 0, "cgroupPath"], "nginx/"),
        "spec.hostApplications[0].cgroupPath",
    ),
    ("Reservation", _delete(["spec", "template"]), "spec.template"),
    ("Reservation", _delete(["spec", "owners"]), "spec.owners"),
    ("Reservation", _delete(["spec"]), "spec"),
    (
        "Reservation",
        _delete(["spec", "owners", 0, "controller", "uid"]),
        "spec.owners[0].controller.uid",
    ),
    ("Reservation", _set(["spec", "expires"], "soon"), "spec.expires"),
    ("Reservation", _delete(["spec", "taints", 0, "effect"]), "spec.taints[0].effect"),
    ("Device", _delete(["spec", "devices", 0, "health"]), "spec.devices[0].health"),
    ("Device", _delete(["spec", "devices", 1, "topology", "socketID"]), "spec.devices[1].topology.socketID"),
    (
        "Device",
        _set(["status", "allocations", 0, "entries", 0, "minors"], ["a"]),
        "status.allocations[0].entries[0].minors[0]",
    ),
    ("PodMigrationJob", _delete(["spec", "podRef"]), "spec.podRef"),
    ("PodMigrationJob", _delete(["status", "conditions", 1, "type"]), "status.conditions[1].type"),
    ("ClusterColocationProfile", _set(["spec", "probability"], [50]), "spec.probability"),
    (
        "ClusterColocationProfile",
        _set(["spec", "selector", "matchLabels"], ["a"]),
        "spec.selector.matchLabels",
    ),
    ("ElasticQuota", _set(["spec", "max"], "8 cores"), "spec.max"),
    ("ElasticQuota", _set(["metadata", "labels", "team"], 7), "metadata.labels.team"),
    ("PodGroup", _set(["spec", "minMember"], "three"), "spec.minMember"),
    ("PodGroup", _set(["status", "scheduleStartTime"], "later"), "status.scheduleStartTime"),
    ("NodeSLO", _set(["apiVersion"], "slo.koordinator.sh/v1beta1"), "apiVersion"),
    ("PodGroup", _set(["kind"], "ElasticQuota"), "kind"),
]


@pytest.mark.parametrize(("kind", "mutate", "path"), BAD_SHAPES, ids=[f"{k}:{p}" for k, _, p in BAD_SHAPES])
def test_wrong_shape_names_kind_object_and_field_path(
    kind: str, mutate: Callable[[dict[str, Any]], None], path: str
) -> None:
    obj = copy.deepcopy(OBJECTS[kind])
    mutate(obj)
    with pytest.raises(ObjectValidationError) as info:
        validate_object(kind, obj)
    err = info.value
    meta = obj["metadata"]
    name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
    assert str(err).startswith(f"{kind} {name}: {path}: "), str(err)
    assert err.kind == kind and err.name == name and err.path == path
    assert isinstance(err, ValueError)


def test_non_object_and_unknown_kind() -> None:
    with pytest.raises(ObjectValidationError, match=r"^NodeMetric <unnamed>: <root>: "):
        validate_object("NodeMetric", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ObjectValidationError, match=r"^Pod web-0: kind: unknown kind"):
        validate_object("Pod", {"metadata": {"name": "web-0"}})


def test_quantity_error_lists_the_alternatives() -> None:
    obj = copy.deepcopy(ELASTIC_QUOTA)
    obj["spec"]["min"]["cpu"] = {"value": 4}
    with pytest.raises(ObjectValidationError) as info:
        validate_object("ElasticQuota", obj)
    assert info.value.path == "spec.min.cpu"
    assert "valid string" in info.value.detail and "valid integer" in info.value.detail
