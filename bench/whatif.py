"""Benchmark of ``koord snapshot`` and ``koord sim whatif`` (issue 31), printing JSON.

What it measures
    ``snapshot``: reading a cluster of ``--nodes`` nodes and ``--pods`` bound pods (plus ``--pending``
    pending pods, their NodeMetrics) from a fake kube-apiserver over real HTTP (bench/fakeapi.py's
    :class:`FakeAPI`, in its own process, paginated LISTs of 500 as client-go), through the project's
    client, trimming and writing the cluster files: ``read_s``, ``write_s``, ``total_s``, the files'
    ``bytes``. ``whatif``: ``koord sim whatif --pending`` on those files under two configurations that differ
    in LoadAwareScheduling's cpu threshold (65 % and 80 %): per configuration ``load_s`` (a service started on
    the files), ``schedule_s`` (the pending pods through kube-scheduler's filters and /filter, /prioritize,
    /bind), ``cpu_s`` (the configuration's CPU time in its process: its wall time on an idle core), placed and
    unschedulable; ``total_s`` for both, and how many pods were placed differently.

Targets (issue 31): the snapshot of 5,000 nodes and 50,000 pods <= 60 s; the whatif of 1,000 pending pods
under two configurations on it <= 60 s. ``load_1m`` is the machine's load average when it starts (shared
machine: note it beside the figures).

Run from the repository root::

    .venv/bin/python bench/whatif.py [--nodes 5000] [--pods 50000] [--pending 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONFIGS = {"cpu65": 65, "cpu80": 80}


def build_objects(n_nodes: int, n_pods: int, n_pending: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """bench/extender.py's cluster cut to ``n_pods`` bound pods spread evenly over the nodes, plus ``n_pending``
    pending LS pods (0.5-4 cpu, 1-8 GiB), NodeMetrics stamped now."""
    from bench.extender import build_cluster, rfc3339
    from bench.fakeapi import kubelet_fields

    cluster = build_cluster(n_nodes, seed)
    stamp = rfc3339(time.time())
    per_node, extra = divmod(n_pods, n_nodes)
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in cluster.objects["Pod"]:
        by_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
    pods: list[dict[str, Any]] = []
    for i, name in enumerate(cluster.names):
        kept = by_node.get(name, [])[: per_node + (1 if i < extra else 0)]
        for pod in kept:
            pod["metadata"]["creationTimestamp"] = stamp
            pod["metadata"]["managedFields"] = [dict(kubelet_fields(stamp))]
        pods.extend(kept)
    rng = random.Random(seed + 1)
    for i in range(n_pending):
        cpu, mem = rng.choice((500, 1000, 2000, 4000)), rng.choice((1, 2, 4, 8))
        requests = {"cpu": f"{cpu}m", "memory": f"{mem}Gi"}
        pods.append(
            {
                "metadata": {
                    "name": f"pending-{i:05d}",
                    "namespace": "whatif",
                    "labels": {"app": "pending", "koordinator.sh/qosClass": "LS"},
                    "creationTimestamp": stamp,
                },
                "spec": {
                    "priority": 9500,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/app:1",
                            "env": [{"name": "TOKEN", "value": "not-for-the-snapshot"}],
                            "resources": {"requests": requests, "limits": dict(requests)},
                        }
                    ],
                },
                "status": {"phase": "Pending", "qosClass": "Guaranteed"},
            }
        )
    for metric in cluster.objects["NodeMetric"]:
        metric["status"]["updateTime"] = stamp
        metric.pop("kind", None)
        metric.pop("apiVersion", None)
    return {"Node": cluster.objects["Node"], "Pod": pods, "NodeMetric": cluster.objects["NodeMetric"]}


def serve(port: int, n_nodes: int, n_pods: int, n_pending: int, seed: int, ready: Any) -> None:
    """Process entry point: seed a :class:`bench.fakeapi.FakeAPI` and serve it on ``port`` forever."""
    from bench.fakeapi import NODEMETRICS, NODES, PODS, FakeAPI

    objects = build_objects(n_nodes, n_pods, n_pending, seed)
    fake = FakeAPI()
    fake.seed(NODES, objects["Node"])
    fake.seed(PODS, objects["Pod"])
    fake.seed(NODEMETRICS, objects["NodeMetric"])
    del objects

    async def main() -> None:
        server = await asyncio.start_server(fake.serve_connection, "127.0.0.1", port, limit=1 << 24)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(path: Path, port: int) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "bench", "user": {"token": "bench"}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        "current-context": "bench",
    }
    path.write_bytes(orjson.dumps(cfg))
    return path


def bench_snapshot(kubeconfig: Path, out: Path) -> tuple[dict[str, Any], Any]:
    """Read the fake cluster and write the files; the figures and the snapshot's summary."""
    from app.client.sync import Client
    from app.sim.snapshot import read_cluster, write_snapshot

    t0 = time.perf_counter()
    with Client.from_config(str(kubeconfig), timeout=120) as client:
        snap = read_cluster(client)
    t1 = time.perf_counter()
    written = write_snapshot(snap, out)
    t2 = time.perf_counter()
    figures = {
        "read_s": round(t1 - t0, 2),
        "write_s": round(t2 - t1, 2),
        "total_s": round(t2 - t0, 2),
        "objects": snap.counts(),
        "bytes": sum(p.stat().st_size for p in written),
        "dropped_env": snap.dropped.get("spec.containers[].env", 0),
    }
    return figures, snap


def bench_whatif(cluster: Path, seed: int, jobs: int) -> dict[str, Any]:
    """Both configurations on ``cluster``'s pending pods; per configuration and total figures."""
    from app.framework.config import parse_config
    from app.plugins.registry import default_registry
    from app.sim.whatif import Configuration, RunOptions, run_whatif

    known = default_registry().names()
    configurations = [
        Configuration(
            name,
            parse_config(
                {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": cpu}}}]},
                known,
            ),
        )
        for name, cpu in CONFIGS.items()
    ]
    t0 = time.perf_counter()
    result = run_whatif(cluster, configurations, None, RunOptions(seed), jobs=jobs)
    total = time.perf_counter() - t0
    runs = {
        c.name: {
            "load_s": round(c.load_seconds, 2),
            "schedule_s": round(c.wall_seconds, 2),
            "cpu_s": round(c.cpu_seconds, 2),
            "pods": len(c.placements),
            "placed": c.placed,
            "unschedulable": len(c.placements) - c.placed,
            "nodes_over_threshold": (c.figures.estimated["nodesOverThreshold"] if c.figures else None),
        }
        for c in result.configurations
    }
    return {"total_s": round(total, 2), "configurations": runs, "changed": len(result.changed())}


def main() -> None:
    """Start the fake API server, snapshot it, run the whatif on the files, print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000, help="Bound pods.")
    parser.add_argument("--pending", type=int, default=1000, help="Pending pods the whatif places.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="Configurations at once (koord sim whatif --jobs).")
    args = parser.parse_args()
    load_1m = round(os.getloadavg()[0], 2)
    port = _free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=serve, args=(port, args.nodes, args.pods, args.pending, args.seed, ready), daemon=True)
    proc.start()
    try:
        if not ready.wait(600):
            raise SystemExit("the fake API server did not start")
        with tempfile.TemporaryDirectory(prefix="koord-whatif-bench-") as tmp:
            out = Path(tmp) / "snapshot"
            snapshot, _ = bench_snapshot(_kubeconfig(Path(tmp) / "kubeconfig", port), out)
            proc.terminate()
            whatif = bench_whatif(out, args.seed, args.jobs)
    finally:
        proc.terminate()
        proc.join(10)
    result = {
        "nodes": args.nodes,
        "pods": args.pods,
        "pending": args.pending,
        "load_1m": load_1m,
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
        "snapshot": snapshot,
        "whatif": whatif,
        "targets": {"snapshot_s": 60, "whatif_s": 60},
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
