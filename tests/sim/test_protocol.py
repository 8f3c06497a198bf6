"""Objects, node fit and arrival sequences of the simulator (no service)."""

from __future__ import annotations

import numpy as np

from app.cache.podinfo import parse_pod
from app.sim.fit import MIB, REASON_AFFINITY, NodeFit, pod_vector
from app.sim.objects import device_object, node_object, pod_object
from app.sim.trace import TraceNode, TracePod
from app.sim.workload import EventKind, static_arrivals, timed_events


def pod(name: str, num_gpu: int, gpu_milli: int, models: tuple[str, ...] | None = None, **kw: int) -> TracePod:
    return TracePod(
        name, kw.get("cpu", 4000), kw.get("mem", 1024), num_gpu, gpu_milli, models, "LS",
        kw.get("created", 0), kw.get("deleted"), 2,
    )  # fmt: skip


NODES = [
    TraceNode("a", 8000, 16384, 2, "T4"),
    TraceNode("b", 8000, 16384, 8, "V100M32"),
    TraceNode("c", 4000, 4096, 0, ""),
]


def test_node_and_device_objects_as_koordlet_reports_them() -> None:
    node = node_object(NODES[1])
    assert node["status"]["allocatable"] == {
        "cpu": "8000m",
        "memory": "16384Mi",
        "nvidia.com/gpu": "8",
        "koordinator.sh/gpu": "800",
        "koordinator.sh/gpu-core": "800",
        "koordinator.sh/gpu-memory": str(8 * 32 << 30),
        "koordinator.sh/gpu-memory-ratio": "800",
    }
    assert node["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "V100M32"
    device = device_object(NODES[1])
    assert device is not None and device["metadata"]["name"] == "b"
    gpus = device["spec"]["devices"]
    assert [g["minor"] for g in gpus] == list(range(8))
    assert all(g["health"] is True and g["type"] == "gpu" and g["id"].startswith("GPU-") for g in gpus)
    assert len({g["id"] for g in gpus}) == 8
    assert gpus[0]["resources"] == {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "32Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    assert device_object(NODES[2]) is None
    assert "nvidia.com/gpu" not in node_object(NODES[2])["status"]["allocatable"]


def test_pod_objects_follow_the_trace_mapping() -> None:
    shared = parse_pod(pod_object(pod("s", 1, 460, ("V100M16", "V100M32")), "s", "u1"))
    assert shared.requests == {
        "cpu": 4000,
        "memory": 1024 * MIB,
        "koordinator.sh/gpu-core": 46,
        "koordinator.sh/gpu-memory-ratio": 46,
    }
    assert shared.qos.value == "LS"
    whole = pod_object(pod("w", 4, 1000), "w", "u2")
    assert parse_pod(whole).requests["nvidia.com/gpu"] == 4
    assert whole["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    affinity = pod_object(pod("s", 1, 460, ("V100M16", "V100M32")), "s", "u1")["spec"]["affinity"]
    term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term == {
        "matchExpressions": [
            {"key": "node.koordinator.sh/gpu-model", "operator": "In", "values": ["V100M16", "V100M32"]}
        ]
    }
    assert "affinity" not in whole["spec"]


def test_node_fit_checks_resources_and_models() -> None:
    fit = NodeFit(NODES)
    big = pod("big", 4, 1000)
    assert fit.feasible(big, pod_vector(big)).tolist() == [1]
    share = pod("share", 1, 500, ("T4",))
    assert fit.feasible(share, pod_vector(share)).tolist() == [0]
    cpu_only = pod("cpu", 0, 0, cpu=6000)
    assert fit.feasible(cpu_only, pod_vector(cpu_only)).tolist() == [0, 1]
    fit.add(1, pod_vector(big))
    fit.add(1, pod_vector(big))  # node b: all 8 GPUs and 8000m cpu requested
    assert fit.feasible(big, pod_vector(big)).tolist() == []
    assert fit.reasons(big, pod_vector(big)) == {
        "Insufficient cpu": 1,
        "Insufficient nvidia.com/gpu": 2,
    }  # first failure per node
    assert fit.reasons(share, pod_vector(share)) == {REASON_AFFINITY: 2}
    fit.remove(1, pod_vector(big))
    assert fit.feasible(pod("g", 4, 1000, cpu=1), pod_vector(pod("g", 4, 1000, cpu=1))).tolist() == [1]


def test_static_arrivals_inflate_and_are_seeded() -> None:
    pods = [pod(f"p{i}", 1, 500) for i in range(10)] + [pod("cpu", 0, 0)]
    capacity = 10_000  # ten GPUs
    events = static_arrivals(pods, capacity, 1.3, seed=42)
    total = sum(e.arrival.pod.gpu_total_milli for e in events)
    assert total >= 13_000 and total - 500 < 13_000  # stops at the first pod reaching the target
    assert {e.arrival.pod.name for e in events[:11]} == {p.name for p in pods}  # the whole list, shuffled, first
    names = [e.arrival.name for e in events]
    assert len(set(names)) == len(names) and any("-clone-" in n for n in names)
    assert [e.arrival.name for e in static_arrivals(pods, capacity, 1.3, seed=42)] == names
    assert [e.arrival.name for e in static_arrivals(pods, capacity, 1.3, seed=43)] != names
    assert all(e.kind is EventKind.ARRIVE for e in events)


def test_timed_events_depart_before_arrivals_of_the_same_second() -> None:
    pods = [pod("a", 1, 500, created=0, deleted=10), pod("b", 1, 500, created=10, deleted=None), pod("c", 0, 0)]
    events = [(e.time, e.kind.value, e.arrival.name) for e in timed_events(pods, seed=1)]
    assert events == [(0, "arrive", "a"), (0, "arrive", "c"), (10, "depart", "a"), (10, "arrive", "b")]


def test_fit_vectors_units() -> None:
    assert pod_vector(pod("s", 1, 460)).tolist() == [4000, 1024 * MIB, 0, 46, 46]
    assert pod_vector(pod("w", 2, 1000)).tolist() == [4000, 1024 * MIB, 2, 0, 0]
    assert np.array_equal(pod_vector(pod("c", 0, 0)), np.array([4000, 1024 * MIB, 0, 0, 0]))
