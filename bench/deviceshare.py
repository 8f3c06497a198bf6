"""Benchmark of DeviceShare Filter and Score over 1,213 GPU nodes (the Alibaba GPU trace's node list).

What it measures
    In-process latency (p50, p99, ms) of ``filter_nodes`` and ``score_nodes`` of the DeviceShare
    plugin for one pod against every GPU node at once (one NodeBatch, as one /filter or /prioritize
    call with 1,213 candidates), for a GPU share (50 %) and a whole-GPU pod, under the
    LeastAllocated, MostAllocated and FragmentationAware strategies. The cluster is the trace's
    ``openb_node_list_gpu_node.csv`` (Nodes with their GPU model label, Devices) with about half of
    the trace's pods already bound through the plugin's own Reserve, so GPUs are partly used; the
    FragmentationAware workload is learned from those pods (151 distinct shapes on the default trace).
    HTTP is not included (see bench/extender.py for the wire overhead).

    FragmentationAware memoises per node row (GPU terms and the before-placement fragmentation) and
    recomputes only rows that changed, so it also reports:

    - ``score_churn``: score latency when every call follows one more trace pod bound through
      Reserve (one row changes per call, the learned workload is rebuilt every 2 % of the window),
      the pattern of ``koord sim``;
    - ``score_cold``: score latency with the per-row memo emptied first (the first call after a
      workload rebuild).

Run from the repository root::

    .venv/bin/python bench/deviceshare.py [--calls 300] [--pods 4000]

The result is one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cache.podinfo import parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import NodeBatch
from app.plugins.deviceshare.fragmentation import RowMemo
from app.plugins.deviceshare.plugin import new_device_share
from app.sources.events import Event, EventType

TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-v2023" / "csv"
CORE, RATIO, MEM = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio", "koordinator.sh/gpu-memory"


def trace_nodes() -> list[tuple[str, int, int, int, str]]:
    """(name, cpu milli, memory MiB, GPUs, model) of the GPU nodes (synthetic 1,213 nodes without the trace)."""
    path = TRACE / "openb_node_list_gpu_node.csv"
    if not path.exists():
        return [(f"node-{i}", 64000, 262144, 8 if i % 2 else 2, "G2" if i % 2 else "T4") for i in range(1213)]
    with path.open() as f:
        return [
            (r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"]) for r in csv.DictReader(f)
        ]


def trace_pods(limit: int) -> list[tuple[int, int, int, int]]:
    """(cpu milli, memory MiB, num GPUs, GPU milli) of the first ``limit`` trace pods."""
    path = TRACE / "openb_pod_list_default.csv"
    if not path.exists():
        rng = np.random.default_rng(1)
        return [(4000, 8192, 1, int(rng.choice([250, 500, 1000]))) for _ in range(limit)]
    with path.open() as f:
        rows = list(csv.DictReader(f))[:limit]
    return [(int(r["cpu_milli"]), int(r["memory_mib"]), int(r["num_gpu"]), int(r["gpu_milli"])) for r in rows]


def pod_obj(name: str, cpu: int, mem_mib: int, gpus: int, milli: int) -> dict[str, Any]:
    req: dict[str, str] = {"cpu": f"{cpu}m", "memory": f"{mem_mib}Mi"}
    if gpus == 1 and milli < 1000:
        req[CORE] = req[RATIO] = str(max(1, milli // 10))
    elif gpus:
        req["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"containers": [{"name": "c", "resources": {"requests": req}}]},
    }


def build(strategy: str, pods: int) -> tuple[ClusterCache, Any, list[str]]:
    cache = ClusterCache()
    names = []
    for name, cpu, mem, gpus, model in trace_nodes():
        names.append(name)
        alloc = {"cpu": f"{cpu}m", "memory": f"{mem}Mi", "pods": "256", "nvidia.com/gpu": str(gpus)}
        node = {"kind": "Node", "metadata": {"name": name, "labels": {"node.koordinator.sh/gpu-model": model}}}
        cache.apply(Event("Node", EventType.ADDED, {**node, "status": {"allocatable": alloc}}))
        devs = [
            {
                "type": "gpu",
                "id": f"{name}-{m}",
                "minor": m,
                "health": True,
                "resources": {CORE: "100", RATIO: "100", MEM: "16Gi"},
            }
            for m in range(gpus)
        ]
        cache.apply(
            Event("Device", EventType.ADDED, {"kind": "Device", "metadata": {"name": name}, "spec": {"devices": devs}})
        )
    args: dict[str, Any] = {"scoringStrategy": {"type": strategy, "resources": [{"name": RATIO, "weight": 1}]}}
    plugin = new_device_share(args, Handle(cache))
    rng = np.random.default_rng(7)
    for i, (cpu, mem, gpus, milli) in enumerate(trace_pods(pods)):
        place(cache, plugin, names, pod_obj(f"bound-{i}", cpu, mem, gpus, milli), rng)
    return cache, plugin, names


def place(cache: ClusterCache, plugin: Any, names: list[str], obj: dict[str, Any], rng: np.random.Generator) -> None:
    """Add pod ``obj`` and bind it through Reserve on the first of 8 random nodes that passes Filter."""
    cache.apply(Event("Pod", EventType.ADDED, obj))
    info = cache.pods[obj["metadata"]["uid"]]
    state = CycleState(0.0)
    plugin.pre_filter(state, info)
    for _ in range(8):
        target = names[int(rng.integers(len(names)))]
        rows, _ = cache.table.rows_of([target])
        if plugin.filter_nodes(state, info, NodeBatch(rows, [target])):
            continue
        assumed = cache.assume(info, target)
        plugin.reserve(state, assumed, target)
        return


def timed(fn: Any, calls: int) -> dict[str, float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return percentiles(samples)


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 / p99 of millisecond samples."""
    arr = np.array(samples)
    return {"p50_ms": round(float(np.percentile(arr, 50)), 3), "p99_ms": round(float(np.percentile(arr, 99)), 3)}


def churn(cache: ClusterCache, plugin: Any, names: list[str], score: Any, calls: int, tag: str) -> dict[str, float]:
    """Score latency when each call follows one more trace pod bound through Reserve."""
    rng = np.random.default_rng(11)
    extra = trace_pods(4000 + calls)[4000:] or trace_pods(calls)
    samples = []
    for i in range(calls):
        cpu, mem, gpus, milli = extra[i % len(extra)]
        place(cache, plugin, names, pod_obj(f"churn-{tag}-{i}", cpu, mem, gpus, milli), rng)
        start = time.perf_counter()
        score()
        samples.append((time.perf_counter() - start) * 1000)
    return percentiles(samples)


def cold(plugin: Any, score: Any, calls: int) -> dict[str, float]:
    """Score latency with FragmentationAware's per-row memo emptied before each call."""
    samples = []
    for _ in range(calls):
        plugin._memo = RowMemo()
        start = time.perf_counter()
        score()
        samples.append((time.perf_counter() - start) * 1000)
    return percentiles(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--pods", type=int, default=4000)
    opts = parser.parse_args()
    result: dict[str, Any] = {}
    for strategy in ("LeastAllocated", "MostAllocated", "FragmentationAware"):
        cache, plugin, names = build(strategy, opts.pods)
        rows, _ = cache.table.rows_of(names)
        batch = NodeBatch(rows, names)
        per: dict[str, Any] = {}
        scorers: dict[str, Any] = {}
        for label, (gpus, milli) in {"share": (1, 500), "whole": (1, 1000)}.items():
            info = parse_pod(pod_obj(f"probe-{label}", 4000, 8192, gpus, milli))
            state = CycleState(0.0)
            plugin.pre_filter(state, info)
            feasible = len(names) - len(plugin.filter_nodes(state, info, batch))
            score = lambda i=info, s=state, p=plugin, b=batch: p.score_nodes(s, i, b)  # noqa: E731
            per[label] = {
                "filter": timed(lambda i=info, s=state, p=plugin, b=batch: p.filter_nodes(s, i, b), opts.calls),
                "score": timed(score, opts.calls),
                "feasible_nodes": feasible,
            }
            if strategy == "FragmentationAware":
                per[label]["score_cold"] = cold(plugin, score, max(10, opts.calls // 5))
                scorers[label] = score
        for label, score in scorers.items():  # last: churn binds more pods
            per[label]["score_churn"] = churn(cache, plugin, names, score, opts.calls, label)
        if strategy == "FragmentationAware":
            workload = plugin.workload()
            per["workload_shapes"] = len(workload) if workload is not None else 0
        result[strategy] = per
    result["nodes"] = len(names)
    result["bound_pods"] = sum(1 for p in cache.pods.values() if p.node_name)
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
