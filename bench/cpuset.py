"""Benchmark of NodeNUMAResource's cpuset allocation, in process (no HTTP).

What it measures (p50 / p99 wall ms per call, on this machine):

- ``one_node``: on one 256-cpu node (2 sockets x 4 NUMA nodes x 16 cores x 2 threads, Linux numbering),
  an LSR pod of ``--cpus`` cpus (FullPCPUs by default) through ``filter`` (PreFilter + Filter),
  ``score`` (PreScore + Score) and ``reserve`` (the accumulator choosing the cpus and holding them);
  the node fills pod by pod and is emptied when full, so every fill level is sampled.
- ``nodes``: ``--nodes`` such nodes, each already holding a random share of its cpus; ``filter`` and
  ``score`` of one LSR pod over a ``--window`` of candidate nodes (kube-scheduler's
  ``numFeasibleNodesToFind`` at 500 nodes is 230) and over all nodes; ``numa_filter``: an LS pod with
  ``numaTopologyPolicy: SingleNUMANode`` (hints over the 8 NUMA nodes) over the window.
- ``framework``: the whole framework's PreFilter + Filter (every default plugin) over the window, for a
  plain pod (NodeNUMAResource skips it at PreFilter) and for the LSR pod: what the cpuset costs a
  ``/filter`` call beside the other plugins.
- ``plain_pre_filter_us``: NodeNUMAResource's PreFilter for a plain pod (its whole per-pod cost).

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/cpuset.py [--nodes 500] [--window 230] [--calls 200]

One JSON object is printed on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from app.cache.podinfo import PodInfo
from app.cache.snapshot import ClusterCache
from app.framework.config import default_config
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import NodeBatch
from app.framework.runtime import Framework
from app.plugins.nodenumaresource.plugin import NodeNUMAResource
from app.plugins.registry import default_registry
from app.sources.events import Event, EventType

SOCKETS, NUMA_PER_SOCKET, CORES_PER_NUMA, THREADS = 2, 4, 16, 2
CPUS = SOCKETS * NUMA_PER_SOCKET * CORES_PER_NUMA * THREADS


def nrt(name: str) -> dict[str, Any]:
    """The NodeResourceTopology of a 256-cpu, 8-NUMA-node machine."""
    cores = SOCKETS * NUMA_PER_SOCKET * CORES_PER_NUMA
    detail = [
        {"id": t * cores + c, "core": c, "socket": c // CORES_PER_NUMA // NUMA_PER_SOCKET, "node": c // CORES_PER_NUMA}
        for t in range(THREADS)
        for c in range(cores)
    ]
    per = str(CORES_PER_NUMA * THREADS)
    zones = [
        {
            "name": f"node-{i}",
            "type": "Node",
            "resources": [
                {"name": "cpu", "capacity": per, "allocatable": per, "available": per},
                {"name": "memory", "capacity": "128Gi", "allocatable": "128Gi", "available": "128Gi"},
            ],
        }
        for i in range(SOCKETS * NUMA_PER_SOCKET)
    ]
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name, "annotations": {"node.koordinator.sh/cpu-topology": json.dumps({"detail": detail})}},
        "topologyPolicies": ["None"],
        "zones": zones,
    }


def node(name: str) -> dict[str, Any]:
    res = {"cpu": str(CPUS), "memory": "1Ti", "pods": "512"}
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": res, "capacity": res}}


def pod(name: str, cpu: int, *, qos: str = "LSR", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    res = {"cpu": str(cpu), "memory": "1Gi"}
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": name,
            "labels": {"koordinator.sh/qosClass": qos},
            "annotations": annotations or {},
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
        "status": {"phase": "Pending"},
    }


def percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.array(samples)
    return {"p50_ms": round(float(np.percentile(arr, 50)), 4), "p99_ms": round(float(np.percentile(arr, 99)), 4)}


def timed(fn: Callable[[], object], calls: int) -> dict[str, float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return percentiles(samples)


def build(nodes: int) -> tuple[ClusterCache, Framework, NodeNUMAResource, list[str]]:
    cache = ClusterCache()
    names = [f"node-{i:04d}" for i in range(nodes)]
    for name in names:
        cache.apply(Event("Node", EventType.ADDED, node(name)))
        cache.apply(Event("NodeResourceTopology", EventType.ADDED, nrt(name)))
    registry = default_registry()
    fw = Framework(default_config(registry.names()), registry, Handle(cache))
    plugin = next(p for p in fw.plugins if isinstance(p, NodeNUMAResource))
    return cache, fw, plugin, names


def info_of(cache: ClusterCache, obj: dict[str, Any]) -> PodInfo:
    cache.apply(Event("Pod", EventType.ADDED, obj))
    return cache.pods[obj["metadata"]["uid"]]


def batch(cache: ClusterCache, names: list[str]) -> NodeBatch:
    rows, _ = cache.table.rows_of(names)
    return NodeBatch(rows, list(names))


def one_node(calls: int, cpus: int) -> dict[str, Any]:
    cache, _, plugin, names = build(1)
    target = batch(cache, names)
    filt, score, reserve = [], [], []
    held: list[PodInfo] = []
    for i in range(calls):
        info = info_of(cache, pod(f"p{i}", cpus))
        state = CycleState(0.0)
        t0 = time.perf_counter()
        plugin.pre_filter(state, info)
        failed = plugin.filter_nodes(state, info, target)
        t1 = time.perf_counter()
        plugin.pre_score(state, info, target)
        plugin.score_nodes(state, info, target)
        t2 = time.perf_counter()
        if failed:  # full: empty the node and go on
            for h in held:
                plugin.manager.release(h.uid)
            held.clear()
            continue
        status = plugin.reserve(state, info, names[0])
        t3 = time.perf_counter()
        assert status.is_success(), status.message
        held.append(info)
        filt.append((t1 - t0) * 1000)
        score.append((t2 - t1) * 1000)
        reserve.append((t3 - t2) * 1000)
    return {"filter": percentiles(filt), "score": percentiles(score), "reserve": percentiles(reserve)}


def fill(plugin: NodeNUMAResource, cache: ClusterCache, names: list[str], rng: np.random.Generator) -> None:
    """Give each node a random share (0-75 %) of its cpus in 4-cpu pods, through Reserve."""
    for name in names:
        for k in range(int(rng.integers(0, CPUS * 3 // 4 // 4))):
            info = info_of(cache, pod(f"{name}-fill-{k}", 4))
            state = CycleState(0.0)
            plugin.pre_filter(state, info)
            assert plugin.reserve(state, info, name).is_success()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--window", type=int, default=230)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cpus", type=int, default=4, help="cpus of the LSR pod")
    opts = parser.parse_args(argv)
    if opts.nodes < 1 or opts.window < 1 or opts.calls < 1 or opts.cpus < 1:
        parser.error("--nodes, --window, --calls and --cpus must be at least 1")
    result: dict[str, Any] = {"cpus_per_node": CPUS, "numa_nodes_per_node": SOCKETS * NUMA_PER_SOCKET}
    result["one_node"] = one_node(opts.calls, opts.cpus)

    cache, fw, plugin, names = build(opts.nodes)
    fill(plugin, cache, names, np.random.default_rng(7))
    window = batch(cache, names[: min(opts.window, len(names))])
    every = batch(cache, names)
    lsr = info_of(cache, pod("lsr", opts.cpus))
    numa = info_of(
        cache,
        pod(
            "numa",
            opts.cpus,
            qos="LS",
            annotations={"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy":"SingleNUMANode"}'},
        ),
    )
    plain = info_of(cache, pod("plain", 1, qos="LS"))

    def plugin_filter(info: PodInfo, b: NodeBatch) -> Callable[[], object]:
        def run() -> object:
            state = CycleState(0.0)
            plugin.pre_filter(state, info)
            return plugin.filter_nodes(state, info, b)

        return run

    def plugin_score(info: PodInfo, b: NodeBatch) -> Callable[[], object]:
        state = CycleState(0.0)
        plugin.pre_filter(state, info)

        def run() -> object:
            plugin.pre_score(state, info, b)
            return plugin.score_nodes(state, info, b)

        return run

    def framework_filter(info: PodInfo, b: NodeBatch) -> Callable[[], object]:
        def run() -> object:
            state = fw.new_cycle()
            fw.run_pre_filter(state, info)
            return fw.run_filters(state, info, b)

        return run

    calls = opts.calls
    result["nodes"] = {
        "count": opts.nodes,
        "window": len(window),
        "filter_window": timed(plugin_filter(lsr, window), calls),
        "score_window": timed(plugin_score(lsr, window), calls),
        "filter_all_nodes": timed(plugin_filter(lsr, every), max(10, calls // 10)),
        "numa_filter_window": timed(plugin_filter(numa, window), max(10, calls // 10)),
    }
    result["framework"] = {
        "plain_pod_filter_window": timed(framework_filter(plain, window), calls),
        "lsr_pod_filter_window": timed(framework_filter(lsr, window), calls),
    }
    state = CycleState(0.0)
    start = time.perf_counter()
    for _ in range(calls * 10):
        plugin.pre_filter(state, plain)
    result["plain_pre_filter_us"] = round((time.perf_counter() - start) / (calls * 10) * 1e6, 2)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
