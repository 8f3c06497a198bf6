"""Benchmark of the extender verbs over real HTTP, as kube-scheduler drives them.

What it measures
    Client-observed latency (p50, p99) and throughput (calls per second) of ``POST /filter`` and
    ``POST /prioritize`` served by the real app (``create_app``) under a real uvicorn server
    (one worker, httptools, uvloop), against a synthetic 5,000-node snapshot (Nodes, NodeMetrics,
    ~20 bound pods per node). Every call is sent on ONE keep-alive connection, one after the other,
    as kube-scheduler's extender client does. Bodies carry the pod of the captured wire sample
    (``tests/fixtures/wire-samples/filter.json``) and 500 candidate ``NodeNames``
    (nodeCacheCapable). A no-op endpoint ``POST /bench-noop``, registered on the same app, decodes
    and validates the same bodies and answers them re-encoded: it is the floor that HTTP, JSON and
    validation alone cost, and ``ratio_to_noop`` is ``p50(verb) / p50(noop)``.
    ``filter_full_nodes`` is /filter with nodeCacheCapable=false bodies (``Nodes`` holds the 500
    candidates as full Node objects), measured with fewer calls.
    ``bind`` is ``POST /bind`` of ``--binds`` distinct pending pods (the wire sample's pod with new
    names and uids, kept in the snapshot), each to one of the nodes a /filter call found feasible
    for it, one after the other: the whole binding cycle (re-check of the node, assume, Reserve,
    Permit, PreBind, and the Binding recorded by the in-memory source). ``refused`` counts binds the
    re-check turned down because earlier binds filled the node (answered in ``Error``).

Targets (per verb, nodeCacheCapable, 5,000 nodes, 500 candidates, one uvicorn worker)
    p50 <= 0.6 ms, p99 <= 2 ms, >= 1,200 calls/s, ratio to no-op <= 1.5.

Notes
    The client (stdlib ``http.client``) runs in the main thread of the same process as the server
    thread, so both share one GIL; the client does little work per call. ``calls_per_second`` is
    the number of calls divided by the wall time of the measured loop, minus the time the client
    spends checking answers (decoding JSON and comparing keys, done after each call's timing).

Run from the repository root::

    .venv/bin/python bench/extender.py [--nodes 5000] [--candidates 500] [--calls 3000] [--seed 1]

The result is one JSON object on stdout; a wrong answer (not HTTP 200, or missing keys) exits
non-zero with the reason.
"""

from __future__ import annotations

import argparse
import copy
import http.client
import random
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import uvicorn
from fastapi import FastAPI, Request, Response

from app.api.extender import ExtenderArgs
from app.server.app import create_app
from app.server.wire import decode, json_response
from app.sources.base import WATCHED_KINDS, Source
from app.sources.events import EventSink

REPO = Path(__file__).resolve().parents[1]
WIRE_SAMPLES = REPO / "tests" / "fixtures" / "wire-samples"

GI = 1024**3
MI = 1024**2
#: Distinct request bodies generated per verb; calls cycle through them.
DISTINCT_BODIES = 50
#: How long to wait for the server's /readyz (loading 100k pods takes a while).
READY_TIMEOUT_S = 600.0
HEADERS = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "Go-http-client/1.1"}


class BenchFailure(RuntimeError):
    """The server answered something a correct extender would not (status or shape)."""


# ---------------------------------------------------------------------------- cluster objects
def rfc3339(epoch: float) -> str:
    """``epoch`` as ``metav1.Time`` prints it (second precision, ``Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _managed_fields(ts: str) -> list[dict[str, Any]]:
    return [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": ts,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                    "f:labels": {
                        ".": {},
                        "f:kubernetes.io/arch": {},
                        "f:kubernetes.io/hostname": {},
                        "f:kubernetes.io/os": {},
                        "f:topology.kubernetes.io/zone": {},
                    },
                }
            },
        }
    ]


def make_node(rng: random.Random, name: str, created: str) -> dict[str, Any]:
    """A v1 Node shaped like the items of ``filter.nodecache-false.json`` (metadata, spec, status)."""
    cores = rng.choice((32, 48, 64, 96))
    mem_gi = rng.choice((128, 256, 384, 512))
    batch_milli = int(cores * 1000 * rng.uniform(0.2, 0.5)) // 100 * 100
    batch_mem_gi = int(mem_gi * rng.uniform(0.2, 0.5))
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": f"zone-{'abc'[rng.randrange(3)]}",
    }
    capacity = {"cpu": str(cores), "memory": f"{mem_gi}Gi", "pods": "110"}
    allocatable = {
        **capacity,
        "kubernetes.io/batch-cpu": str(batch_milli),
        "kubernetes.io/batch-memory": f"{batch_mem_gi}Gi",
    }
    ready = {
        "type": "Ready",
        "status": "True",
        "lastHeartbeatTime": created,
        "lastTransitionTime": created,
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    applied = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"annotations": {}, "labels": labels, "name": name},
        "status": {"allocatable": allocatable, "capacity": capacity, "conditions": [ready]},
    }
    return {
        "metadata": {
            "name": name,
            "uid": _uid(rng),
            "resourceVersion": str(rng.randrange(100, 10_000_000)),
            "creationTimestamp": created,
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": orjson.dumps(applied).decode() + "\n"},
            "managedFields": _managed_fields(created),
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [ready],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.26.0",
                "kubeProxyVersion": "v1.26.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def make_pod(
    rng: random.Random, node: str, index: int, cpu_milli: int, mem: int, scheduled: str, batch: bool
) -> dict[str, Any]:
    """A bound, running pod requesting ``cpu_milli``/``mem`` (or batch-cpu/batch-memory for ``batch``)."""
    name = f"{node}-pod-{index:02d}"
    if batch:
        requests = {"kubernetes.io/batch-cpu": str(cpu_milli), "kubernetes.io/batch-memory": str(mem)}
        resources = {"requests": requests, "limits": dict(requests)}
        labels = {"app": "spark", "koordinator.sh/qosClass": "BE"}
        priority, qos = 5500, "BestEffort"
    else:
        requests = {"cpu": f"{cpu_milli}m", "memory": str(mem)}
        resources = {"requests": requests, "limits": {"cpu": f"{cpu_milli * 2}m", "memory": str(mem * 2)}}
        labels = {"app": f"svc-{rng.randrange(200)}", "koordinator.sh/qosClass": "LS"}
        priority, qos = 9500, "Burstable"
    return {
        "metadata": {
            "name": name,
            "namespace": "batch" if batch else "default",
            "uid": _uid(rng),
            "resourceVersion": str(rng.randrange(100, 10_000_000)),
            "labels": labels,
        },
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "main", "image": "registry.invalid/app:1", "resources": resources}],
        },
        "status": {
            "phase": "Running",
            "qosClass": qos,
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": scheduled},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled},
            ],
        },
    }


def make_node_metric(
    name: str, cpu_milli: int, mem: int, pods: list[tuple[dict[str, Any], int, int]]
) -> dict[str, Any]:
    """A NodeMetric reporting ``cpu_milli``/``mem`` node usage and per-pod usage; updateTime is stamped at load."""
    pods_metric = [
        {
            "namespace": pod["metadata"]["namespace"],
            "name": pod["metadata"]["name"],
            "priority": "koord-batch" if pod["metadata"]["namespace"] == "batch" else "koord-prod",
            "qos": pod["metadata"]["labels"]["koordinator.sh/qosClass"],
            "podUsage": {"resources": {"cpu": f"{pcpu}m", "memory": str(pmem)}},
        }
        for pod, pcpu, pmem in pods
    ]
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}},
        "status": {
            "updateTime": None,
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": f"{cpu_milli}m", "memory": str(mem)}},
                "systemUsage": {"resources": {"cpu": f"{cpu_milli // 20}m", "memory": str(mem // 20)}},
            },
            "podsMetric": pods_metric,
        },
    }


@dataclass(slots=True)
class Cluster:
    """The synthetic cluster: node names in order and the objects per kind."""

    names: list[str]
    nodes: dict[str, dict[str, Any]]
    objects: dict[str, list[dict[str, Any]]]


def build_cluster(n_nodes: int, seed: int) -> Cluster:
    """``n_nodes`` nodes; 2 % without NodeMetric, 8 % hot (70-90 % cpu), the rest 10-70 % cpu.

    Each node carries 16-24 bound pods (two of them batch pods) whose requests fill 40-85 % of the
    node; the NodeMetric reports every pod, so no pod is counted as an estimate on top of it.
    """
    rng = random.Random(seed)
    now = time.time()
    created, scheduled = rfc3339(now - 30 * 86400), rfc3339(now - 86400)
    names = [f"node-{i:05d}" for i in range(n_nodes)]
    nodes: dict[str, dict[str, Any]] = {}
    pods: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    for name in names:
        node = make_node(rng, name, created)
        nodes[name] = node
        alloc = node["status"]["allocatable"]
        cores, mem = int(alloc["cpu"]), int(alloc["memory"].removesuffix("Gi")) * GI
        batch_milli = int(alloc["kubernetes.io/batch-cpu"])
        batch_mem = int(alloc["kubernetes.io/batch-memory"].removesuffix("Gi")) * GI
        kind = rng.random()
        cpu_frac = rng.uniform(0.70, 0.90) if kind < 0.08 else rng.uniform(0.10, 0.70)
        used_cpu, used_mem = int(cores * 1000 * cpu_frac), int(mem * rng.uniform(0.20, 0.80))
        n_pods = rng.randint(16, 24)
        fill = rng.uniform(0.40, 0.85)
        per_cpu = max(50, int(cores * 1000 * fill / n_pods) // 10 * 10)
        per_mem = max(64 * MI, int(mem * fill / n_pods) // MI * MI)
        node_pods: list[tuple[dict[str, Any], int, int]] = []
        for i in range(n_pods):
            batch = i >= n_pods - 2
            cpu_req = max(100, batch_milli // 8 // 100 * 100) if batch else per_cpu
            mem_req = max(64 * MI, batch_mem // 8 // MI * MI) if batch else per_mem
            pod = make_pod(rng, name, i, cpu_req, mem_req, scheduled, batch)
            pods.append(pod)
            node_pods.append((pod, used_cpu // (n_pods + 1), used_mem // (n_pods + 1)))
        if kind < 0.98:
            metrics.append(make_node_metric(name, used_cpu, used_mem, node_pods))
    return Cluster(names, nodes, {"Node": list(nodes.values()), "Pod": pods, "NodeMetric": metrics})


class InMemorySource(Source):
    """Serves a fixed :class:`Cluster`: one full list per watched kind at start, then nothing.

    NodeMetrics get ``status.updateTime`` = now at start, so they are fresh while the bench runs.
    Bindings are recorded, never refused.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.bindings: list[tuple[str, str, str, str]] = []
        self._ready = False

    async def start(self, sink: EventSink) -> None:
        """Stamp the NodeMetrics and replace every watched kind in ``sink``."""
        stamp = rfc3339(time.time())
        for metric in self.cluster.objects["NodeMetric"]:
            metric["status"]["updateTime"] = stamp
        for kind in WATCHED_KINDS:
            sink.replace(kind, self.cluster.objects.get(kind, []))
        self._ready = True

    async def stop(self) -> None:
        """Nothing runs in the background."""

    def ready(self) -> bool:
        """True once :meth:`start` loaded everything."""
        return self._ready

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Record the binding."""
        self.bindings.append((namespace, name, uid, node))

    @property
    def description(self) -> str:
        """``bench:in-memory(<n> nodes)``."""
        return f"bench:in-memory({len(self.cluster.names)} nodes)"


# ---------------------------------------------------------------------------- request bodies
def load_wire_pod() -> dict[str, Any]:
    """The Pod of the captured filter request (kube-scheduler v1.26, nodeCacheCapable)."""
    sample = orjson.loads((WIRE_SAMPLES / "filter.json").read_bytes())
    pod: dict[str, Any] = sample["Pod"]
    return pod


def candidate_sets(names: Sequence[str], candidates: int, count: int, seed: int) -> list[list[str]]:
    """``count`` random draws of ``candidates`` distinct node names."""
    rng = random.Random(seed + 1)
    k = min(candidates, len(names))
    return [rng.sample(list(names), k) for _ in range(count)]


def node_names_body(pod: dict[str, Any], names: list[str]) -> bytes:
    """ExtenderArgs as kube-scheduler sends them to a nodeCacheCapable extender."""
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def full_nodes_body(pod: dict[str, Any], nodes: list[dict[str, Any]]) -> bytes:
    """ExtenderArgs as kube-scheduler sends them when nodeCacheCapable is false (a NodeList)."""
    return orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})


# ---------------------------------------------------------------------------- server
def add_noop_route(app: FastAPI) -> None:
    """``POST /bench-noop``: decode and validate like the verbs, answer the same args re-encoded."""

    @app.post("/bench-noop")
    async def bench_noop(request: Request) -> Response:
        args = decode(await request.body(), ExtenderArgs)
        nodes = args.Nodes.model_dump() if args.Nodes is not None else None
        return json_response({"Pod": args.Pod, "Nodes": nodes, "NodeNames": args.NodeNames})


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BackgroundServer:
    """uvicorn (one worker, httptools, uvloop) serving ``app`` in a daemon thread."""

    def __init__(self, app: FastAPI, port: int) -> None:
        self.port = port
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            workers=1,
            http="httptools",
            loop="uvloop",
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Start serving and wait until ``GET /readyz`` answers 200.

        Raises:
            BenchFailure: the server thread died or did not become ready in time.
        """
        self.thread.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.thread.is_alive():
                raise BenchFailure("the uvicorn thread exited before becoming ready (see stderr)")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/readyz")
                status = conn.getresponse().status
                conn.close()
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise BenchFailure(f"server not ready after {timeout:.0f} s")

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for its thread."""
        self.server.should_exit = True
        self.thread.join(timeout=30)


# ---------------------------------------------------------------------------- measuring
Check = Callable[[bytes], None]


@dataclass(slots=True)
class Measurement:
    """Client-observed seconds per call and the loop's wall time (answer checks excluded)."""

    latencies: np.ndarray
    wall: float

    def summary(self) -> dict[str, float]:
        """p50/p99 in ms and calls per second, rounded to 3 decimals."""
        p50, p99 = np.percentile(self.latencies, [50, 99]) * 1000
        return {
            "p50_ms": round(float(p50), 3),
            "p99_ms": round(float(p99), 3),
            "calls_per_second": round(len(self.latencies) / self.wall, 3),
        }


def call(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, bytes]:
    """One POST on the kept-alive connection: (status, body)."""
    conn.request("POST", path, body, HEADERS)
    resp = conn.getresponse()
    return resp.status, resp.read()


def run_loop(conn: http.client.HTTPConnection, path: str, bodies: list[bytes], calls: int, check: Check) -> Measurement:
    """``calls`` sequential POSTs cycling through ``bodies``; every answer must be 200 and pass ``check``."""
    latencies = np.empty(calls, dtype=np.float64)
    checking = 0.0
    perf = time.perf_counter
    start = perf()
    for i in range(calls):
        body = bodies[i % len(bodies)]
        t0 = perf()
        conn.request("POST", path, body, HEADERS)
        resp = conn.getresponse()
        data = resp.read()
        t1 = perf()
        latencies[i] = t1 - t0
        if resp.status != 200:
            raise BenchFailure(f"POST {path} call {i}: HTTP {resp.status}: {data[:500]!r}")
        try:
            check(data)
        except (AssertionError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
            raise BenchFailure(f"POST {path} call {i}: unexpected answer ({exc!r}): {data[:500]!r}") from None
        checking += perf() - t1
    return Measurement(latencies, perf() - start - checking)


def check_filter(candidates: int, full_nodes: bool) -> Check:
    """An ExtenderFilterResult with no Error that accounts for every candidate."""

    def check(data: bytes) -> None:
        res = orjson.loads(data)
        assert isinstance(res, dict), "not an object"
        for key in ("Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"):
            assert key in res, f"missing {key}"
        assert res["Error"] == "", f"Error: {res['Error']}"
        passing = res["Nodes"]["items"] if full_nodes else res["NodeNames"]
        assert isinstance(passing, list), "no passing list"
        total = len(passing) + len(res["FailedNodes"]) + len(res["FailedAndUnresolvableNodes"])
        assert total == candidates, f"{total} nodes answered, {candidates} asked"

    return check


def check_prioritize(candidates: int) -> Check:
    """A HostPriorityList with one 0..10 score per candidate."""

    def check(data: bytes) -> None:
        res = orjson.loads(data)
        assert isinstance(res, list) and len(res) == candidates, "not one entry per candidate"
        for entry in res:
            assert 0 <= entry["Score"] <= 10 and entry["Host"], f"bad entry {entry}"

    return check


def check_noop(candidates: int) -> Check:
    """The request echoed back."""

    def check(data: bytes) -> None:
        res = orjson.loads(data)
        assert "Pod" in res and len(res["NodeNames"]) == candidates, "not the request echoed"

    return check


def measure(
    conn: http.client.HTTPConnection, path: str, bodies: list[bytes], warmup: int, calls: int, check: Check
) -> Measurement:
    """Warm up with ``warmup`` calls, then measure ``calls``."""
    if warmup:
        run_loop(conn, path, bodies, warmup, check)
    return run_loop(conn, path, bodies, calls, check)


# ---------------------------------------------------------------------------- main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000, help="nodes in the snapshot (default 5000)")
    p.add_argument("--candidates", type=int, default=500, help="candidate nodes per request (default 500)")
    p.add_argument("--calls", type=int, default=3000, help="measured calls per verb (default 3000)")
    p.add_argument("--full-calls", type=int, default=300, help="measured calls of filter_full_nodes (default 300)")
    p.add_argument("--binds", type=int, default=1000, help="measured binds of distinct pending pods (default 1000)")
    p.add_argument("--warmup", type=int, default=200, help="warm-up calls before each measurement (default 200)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    args = p.parse_args(argv)
    for flag in ("nodes", "candidates", "calls", "full_calls", "binds"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    return args


def pending_pods(template: dict[str, Any], count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` copies of ``template`` as distinct pending pods (``bench-bind-<i>``, new uids)."""
    rng = random.Random(seed + 2)
    out = []
    for i in range(count):
        pod = copy.deepcopy(template)
        meta = pod.setdefault("metadata", {})
        meta.update({"name": f"bench-bind-{i}", "namespace": "default", "uid": _uid(rng)})
        meta.pop("generateName", None)
        pod.setdefault("spec", {}).pop("nodeName", None)
        pod["status"] = {"phase": "Pending"}
        out.append(pod)
    return out


def measure_binds(
    conn: http.client.HTTPConnection, pods: list[dict[str, Any]], sets: list[list[str]]
) -> tuple[Measurement, int]:
    """Filter each pod over one candidate set (not timed), then time its /bind to a feasible node.

    Returns the bind measurement and how many binds the re-check refused (node filled meanwhile).

    Raises:
        BenchFailure: a non-200 answer, a pod feasible nowhere, or an Error other than a filter refusal.
    """
    latencies = np.empty(len(pods), dtype=np.float64)
    refused = 0
    spent = 0.0
    perf = time.perf_counter
    for i, pod in enumerate(pods):
        status, data = call(conn, "/filter", node_names_body(pod, sets[i % len(sets)]))
        feasible = orjson.loads(data)["NodeNames"] if status == 200 else None
        if not feasible:
            raise BenchFailure(f"POST /filter for {pod['metadata']['name']}: no feasible node ({data[:300]!r})")
        meta = pod["metadata"]
        body = orjson.dumps(
            {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": feasible[0]}
        )
        t0 = perf()
        status, data = call(conn, "/bind", body)
        took = perf() - t0
        latencies[i] = took
        spent += took
        if status != 200:
            raise BenchFailure(f"POST /bind {meta['name']}: HTTP {status}: {data[:300]!r}")
        error = orjson.loads(data).get("Error", "")
        if error:
            if not any(mark in error for mark in ("Insufficient", "exceed", "usage")):
                raise BenchFailure(f"POST /bind {meta['name']}: {error}")
            refused += 1
    return Measurement(latencies, spent), refused


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the cluster, serve it, measure every verb and return the result object."""
    cluster = build_cluster(args.nodes, args.seed)
    pod = load_wire_pod()
    sets = candidate_sets(cluster.names, args.candidates, DISTINCT_BODIES, args.seed)
    candidates = len(sets[0])
    name_bodies = [node_names_body(pod, s) for s in sets]
    full_bodies = [full_nodes_body(pod, [cluster.nodes[n] for n in s]) for s in sets]

    bind_pods = pending_pods(pod, args.binds, args.seed)
    cluster.objects["Pod"].extend(bind_pods)
    app = create_app(InMemorySource(cluster))
    add_noop_route(app)
    server = BackgroundServer(app, free_port())
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            w, n = args.warmup, args.calls
            filt = measure(conn, "/filter", name_bodies, w, n, check_filter(candidates, False))
            prio = measure(conn, "/prioritize", name_bodies, w, n, check_prioritize(candidates))
            noop = measure(conn, "/bench-noop", name_bodies, w, n, check_noop(candidates))
            full = measure(conn, "/filter", full_bodies, w, args.full_calls, check_filter(candidates, True))
            binds, refused = measure_binds(conn, bind_pods, sets)
        finally:
            conn.close()
    finally:
        server.stop()

    base = noop.summary()

    def with_ratio(m: Measurement) -> dict[str, float]:
        out = m.summary()
        out["ratio_to_noop"] = round(out["p50_ms"] / base["p50_ms"], 3) if base["p50_ms"] > 0 else 0.0
        return out

    return {
        "filter": with_ratio(filt),
        "prioritize": with_ratio(prio),
        "noop": base,
        "filter_full_nodes": with_ratio(full),
        "bind": {**binds.summary(), "refused": refused},
        "nodes": args.nodes,
        "candidates_per_request": candidates,
        "calls": args.calls,
    }


def bench_main(args: argparse.Namespace, run_bench: Callable[[argparse.Namespace], dict[str, Any]]) -> int:
    """The benches' entry point: print ``run_bench(args)`` as indented JSON on stdout and return 0, or
    print ``bench failed: <reason>`` on stderr and return 1 on a :class:`BenchFailure`."""
    try:
        result = run_bench(args)
    except BenchFailure as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the result JSON; exit 1 with the reason on a wrong answer."""
    return bench_main(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
