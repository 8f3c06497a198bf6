"""Builders for the NodeNUMAResource tests: NodeResourceTopology objects made by the agent's own report
code from the fake sysfs shapes (tests/agent/fakesysfs.py), Nodes, LSR pods, and a plugin over a cache."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.collectors.cputopology import read_machine_topology
from agent.topologyreport import build_topology_status, new_object
from app.api.topology import ANNOTATION_KUBELET_CPU_MANAGER_POLICY
from app.cache.snapshot import ClusterCache
from app.framework.handle import Handle
from app.plugins.nodenumaresource.args import decode_args
from app.plugins.nodenumaresource.plugin import NodeNUMAResource
from app.sources.events import Event, EventType
from tests.agent.fakesysfs import four_numa_no_ht, one_socket_eight_cores_ht, two_sockets_two_numa_ht

SHAPES: dict[str, Callable[[Path], Path]] = {
    "one-socket-ht": one_socket_eight_cores_ht,
    "two-numa-ht": two_sockets_two_numa_ht,
    "four-numa": four_numa_no_ht,
}


def nrt(
    name: str,
    shape: str,
    *,
    kubelet_policy: dict[str, Any] | None = None,
    topology_policies: list[str] | None = None,
) -> dict[str, Any]:
    """The NodeResourceTopology the agent publishes for fake machine ``shape`` (a key of :data:`SHAPES`)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        machine = read_machine_topology(SHAPES[shape](root / "sys"), root)
        node_obj = {"metadata": {"name": name, "annotations": {}}}
        obj = build_topology_status(machine, None, [], node_obj).apply_to(new_object(name, node_obj))
    obj = json.loads(json.dumps(obj))
    if kubelet_policy is not None:
        obj["metadata"]["annotations"][ANNOTATION_KUBELET_CPU_MANAGER_POLICY] = json.dumps(kubelet_policy)
    if topology_policies is not None:
        obj["topologyPolicies"] = topology_policies
    obj.setdefault("apiVersion", "topology.node.k8s.io/v1alpha1")
    obj.setdefault("kind", "NodeResourceTopology")
    return obj


def node(name: str, cpu: str = "32", memory: str = "64Gi", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Node."""
    res = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {"allocatable": res, "capacity": res},
    }


def pod(
    name: str,
    cpu: str = "4",
    *,
    qos: str | None = "LSR",
    memory: str = "1Gi",
    annotations: dict[str, str] | None = None,
    node_name: str = "",
    uid: str | None = None,
) -> dict[str, Any]:
    """A pod requesting ``cpu`` / ``memory`` (requests = limits), labelled with koordinator QoS ``qos``."""
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    res = {"cpu": cpu, "memory": memory}
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid or f"uid-{name}",
            "labels": labels,
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def cache_with(*objs: dict[str, Any]) -> ClusterCache:
    """A cache holding ``objs`` (Nodes first)."""
    cache = ClusterCache()
    for obj in sorted(objs, key=lambda o: o["kind"] != "Node"):
        cache.apply(Event(obj["kind"], EventType.ADDED, obj))
    return cache


def plugin(cache: ClusterCache, args: dict[str, Any] | None = None) -> NodeNUMAResource:
    """The plugin over ``cache``."""
    return NodeNUMAResource(decode_args(args or {}), Handle(cache))


def run_cycle(p: NodeNUMAResource, pod_obj: dict[str, Any], node_name: str) -> tuple[str, str]:
    """PreFilter, Filter on ``node_name`` and Reserve, as a binding cycle runs them.

    Returns:
        (the reserved cpuset, "" on success) or ("", the failing reason).
    """
    import numpy as np

    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState
    from app.framework.interfaces import NodeBatch

    info = parse_pod(pod_obj)
    state = CycleState(0.0)
    status = p.pre_filter(state, info)
    if not (status.is_success() or status.is_skip()):
        return "", status.message
    row = p.handle.snapshot.row(node_name)
    assert row is not None
    failures = p.filter_nodes(state, info, NodeBatch(np.array([row], dtype=np.int64), [node_name]))
    if 0 in failures:
        return "", failures[0].message
    status = p.reserve(state, info, node_name)
    if not status.is_success():
        return "", status.message
    found = p.pod_cpus(info.uid)
    return (found["cpuset"] if found else ""), ""


def synthetic_nrt(
    name: str, sockets: int, numa_per_socket: int, cores_per_numa: int, threads: int, memory_gib_per_numa: int = 64
) -> dict[str, Any]:
    """A NodeResourceTopology of a regular machine, numbered as Linux does: the first threads of every core
    first (cpu = core), then the siblings (cpu = core + cores)."""
    from agent.topologyreport import new_object as _new

    cores = sockets * numa_per_socket * cores_per_numa
    detail = []
    for t in range(threads):
        for core in range(cores):
            numa = core // cores_per_numa
            detail.append({"id": t * cores + core, "core": core, "socket": numa // numa_per_socket, "node": numa})
    detail.sort(key=lambda d: d["id"])
    per_numa = cores_per_numa * threads
    mem = f"{memory_gib_per_numa}Gi"
    zones = [
        {
            "name": f"node-{i}",
            "type": "Node",
            "resources": [
                {"name": "cpu", "capacity": str(per_numa), "allocatable": str(per_numa), "available": str(per_numa)},
                {"name": "memory", "capacity": mem, "allocatable": mem, "available": mem},
            ],
        }
        for i in range(sockets * numa_per_socket)
    ]
    obj = _new(name, None)
    obj["apiVersion"] = "topology.node.k8s.io/v1alpha1"
    obj["kind"] = "NodeResourceTopology"
    obj["metadata"]["annotations"] = {"node.koordinator.sh/cpu-topology": json.dumps({"detail": detail})}
    obj["topologyPolicies"] = ["None"]
    obj["zones"] = zones
    return obj
