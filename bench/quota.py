"""Benchmark of the ElasticQuota plugin's precomputed state.

What it measures
    A 3-level quota tree (``--top`` parents under the root, ``--mid`` parents under each, ``--leaves``
    leaf quotas under each: 10 x 10 x 9 = 1,010 quotas by default) and ``--pods`` pods (50,000)
    spread over the leaves (half bound to ``--nodes`` nodes, half pending), loaded into a real
    ClusterCache with the real plugin listening.

    - ``rebuild_ms``: the one-pass rebuild after the quota objects arrived (tree, calculators,
      per-quota sums over every pod).
    - ``incremental_update_ms`` (p50, p99): one pod watch event applied to the cache (a new pending
      pod, or a pending pod bound to a node) plus the runtime refresh of its quota, i.e. the request
      propagated to the root and the runtime recomputed along the path.
    - ``prefilter_ms`` (p50, p99): ``pre_filter`` for one pending pod (quota lookup, runtime refresh,
      comparison) in steady state.
    - ``refresh_all_ms``: recompute every quota's runtime after a change at the root level.

Targets
    incremental update <= 5 ms, PreFilter <= 0.2 ms (p50).

Run from the repository root::

    .venv/bin/python bench/quota.py [--top 10] [--mid 10] [--leaves 9] [--pods 50000] [--nodes 500]

The result is one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cache.snapshot import ClusterCache
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.plugins.elasticquota.plugin import ElasticQuota, new_elastic_quota
from app.plugins.elasticquota.statuswriter import StatusWriter
from app.sources.events import Event, EventType
from app.sources.mergepatch import apply_merge_patch

LABEL = "quota.scheduling.koordinator.sh/"


def _quota(name: str, parent: str, is_parent: bool, min_cpu: int, max_cpu: int) -> dict[str, Any]:
    labels = {LABEL + "parent": parent} if parent else {}
    if is_parent:
        labels[LABEL + "is-parent"] = "true"
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "koordinator-system", "labels": labels},
        "spec": {
            "min": {"cpu": str(min_cpu), "memory": f"{min_cpu * 2}Gi"},
            "max": {"cpu": str(max_cpu), "memory": f"{max_cpu * 2}Gi"},
        },
    }


def _pod(i: int, quota: str, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"u{i}", "labels": {LABEL + "name": quota}},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered) * 1000, 4),
        "p99": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 4),
    }


def main() -> None:
    """Build the tree and pods, measure, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--mid", type=int, default=10)
    ap.add_argument("--leaves", type=int, default=9)
    ap.add_argument("--pods", type=int, default=50_000)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--events", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    opts = ap.parse_args()
    rng = random.Random(opts.seed)

    cache = ClusterCache()
    plugin: ElasticQuota = new_elastic_quota({}, Handle(cache))
    for n in range(opts.nodes):
        node = {"metadata": {"name": f"n{n}"}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}
        cache.apply(Event("Node", EventType.ADDED, node))
    leaves: list[str] = []
    for t in range(opts.top):
        cache.apply(Event("ElasticQuota", EventType.ADDED, _quota(f"t{t}", "", True, 100, 100000)))
        for m in range(opts.mid):
            cache.apply(Event("ElasticQuota", EventType.ADDED, _quota(f"t{t}m{m}", f"t{t}", True, 10, 100000)))
            for leaf in range(opts.leaves):
                name = f"t{t}m{m}l{leaf}"
                leaves.append(name)
                cache.apply(Event("ElasticQuota", EventType.ADDED, _quota(name, f"t{t}m{m}", False, 1, 100000)))
    for i in range(opts.pods):
        bound = f"n{rng.randrange(opts.nodes)}" if i % 2 else ""
        cache.apply(Event("Pod", EventType.ADDED, _pod(i, leaves[i % len(leaves)], bound)))
    mgr = plugin.manager
    gc.collect()  # time the rebuild, not a full collection the loading above happened to leave due
    start = time.perf_counter()
    mgr.ensure()
    rebuild = time.perf_counter() - start
    start = time.perf_counter()
    mgr.refresh_all()
    first_refresh = time.perf_counter() - start

    updates: list[float] = []
    next_id = opts.pods
    for k in range(opts.events):
        if k % 2:
            i = 2 * rng.randrange(opts.pods // 2)  # a pending pod gets bound
            obj = _pod(i, leaves[i % len(leaves)], f"n{rng.randrange(opts.nodes)}")
            etype = EventType.MODIFIED
        else:
            obj = _pod(next_id, leaves[rng.randrange(len(leaves))], "")
            next_id += 1
            etype = EventType.ADDED
        quota = obj["metadata"]["labels"][LABEL + "name"]
        t0 = time.perf_counter()
        cache.apply(Event("Pod", etype, obj))
        mgr.refresh_runtime(quota)
        updates.append(time.perf_counter() - t0)

    pending = [p for p in list(cache.pods.values())[:2000] if not p.node_name]
    prefilter: list[float] = []
    for p in pending * 2:
        t0 = time.perf_counter()
        plugin.pre_filter(CycleState(0.0), p)
        prefilter.append(time.perf_counter() - t0)

    extra = {"metadata": {"name": "n-extra"}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}
    cache.apply(Event("Node", EventType.ADDED, extra))
    t0 = time.perf_counter()
    mgr.refresh_all()
    refresh_all = time.perf_counter() - t0

    # status write-back rounds (upstream's 1 s controller): every patch goes back in as a watch event
    class _Applier:
        async def patch(self, kind: str, name: str, patch: dict[str, Any], *, namespace: str | None = None) -> None:
            cache.apply(Event(kind, EventType.MODIFIED, apply_merge_patch(mgr.objects[name], patch)))

    writer = StatusWriter(mgr)
    t0 = time.perf_counter()
    written = asyncio.run(writer.sync_once(_Applier()))
    status_first = time.perf_counter() - t0
    asyncio.run(writer.sync_once(_Applier()))  # checks the written objects once
    t0 = time.perf_counter()
    rewritten = asyncio.run(writer.sync_once(_Applier()))
    status_steady = time.perf_counter() - t0

    result = {
        "quotas": len(mgr.quotas) - 3,
        "pods": len(cache.pods),
        "nodes": len(cache.nodes),
        "rebuild_ms": round(rebuild * 1000, 2),
        "first_refresh_all_ms": round(first_refresh * 1000, 2),
        "incremental_update_ms": _ms(updates),
        "prefilter_ms": _ms(prefilter),
        "refresh_all_ms": round(refresh_all * 1000, 2),
        "status_round_first_ms": round(status_first * 1000, 2),
        "status_patches_first": written,
        "status_round_steady_ms": round(status_steady * 1000, 2),
        "status_patches_steady": rewritten,
        "tree_rebuilt_by_status": mgr.dirty,
        "targets": {"incremental_update_ms": 5.0, "prefilter_ms": 0.2},
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
