"""Benchmark of the whole scheduling cycle: the service's CPU per pod, watch events included.

What it measures
    The real service (``create_app`` with :class:`app.sources.kubernetes.KubernetesSource`, one
    uvicorn worker, httptools, uvloop) runs in its own process, reading a kubeconfig that points at
    a fake kube-apiserver (``bench/fakeapi.py``) in a third process. The fake serves the LIST and
    WATCH wire of every watched kind and holds the bench cluster of bench/extender.py (nodes with
    managedFields, ~20 running pods per node, NodeMetrics). The driver (this process) then plays
    kube-scheduler v1.26 for ``--pods`` small pods (the captured pod of
    ``tests/fixtures/wire-samples/filter.json``, 100m / 64Mi):

    1. all pods are created at once (the fake emits ``ADDED`` for each);
    2. for each pod, one after the other on one kept-alive connection: ``POST /filter`` with
       nodeCacheCapable bodies (``NodeNames``: as many nodes as kube-scheduler's
       ``numFeasibleNodesToFind`` passes on, a rotating window), ``POST /prioritize`` over the
       nodes the filter kept, ``POST /bind`` (``{PodName, PodNamespace, PodUID, Node}``) to the
       best-scored node. The service POSTs the Binding to the fake, which emits ``MODIFIED``
       (``spec.nodeName``) and, 2 ms later, the kubelet's ``MODIFIED`` (phase Running);
    3. the driver waits until the service is idle again (every event applied).

    ``cpu_ms_per_pod`` is the service process's CPU time (user + system, psutil) over steps 1-3
    divided by the pods, minus its idle CPU over the same wall time (``idle_cpu_ms_per_s``, the
    background loops). ``--repeat R`` plays R rounds of ``--pods`` new pods on the same service and
    reports the median round (each in ``cpu_ms_per_pod_rounds``; latencies pool every round): one
    round's figure moves by 10-20 % with what else the 2-CPU machine runs. Wall latencies are what
    the driver observed per call. The watch phase then has the fake emit ``--touches`` ``MODIFIED``
    events on running pods (an annotation changes) and reports the service's CPU per event and
    events applied per second (until idle).
    ``filter_cpu_ms_per_call`` / ``prioritize_cpu_ms_per_call`` are the service's CPU per call of
    each verb alone (500 calls each with the cycle's bodies, the watch quiet).
    ``http_floor`` is the CPU a do-nothing ASGI app (it reads the body and answers 2 KB) costs per
    request under the same uvicorn, httptools and uvloop, for the cycle's /filter body, in its own
    process (``cpu_ms_per_request``), and what one bind's POST to it costs the service's API client
    lane (``client_cpu_ms_per_bind``): the part of a pod's cycle no code of ours can remove;
    ``cpu_ms_per_pod`` counts three verb calls and one bind (the watch streams' reads come on top).
    ``noop_extender`` is the same cycle played, round for round in alternation with the service's
    rounds, against the no-op extender of ``bench/noopextender.py``: the same uvicorn process and
    application class, a route set that decodes every body in full, keeps every node, scores 0 and
    POSTs the Binding through the same API client to a fake API server of its own (the same fake and
    cluster; the service never sees the no-op's pods). ``floor_ratio`` is its CPU per pod over the
    service's: the service's throughput as a fraction of the no-op's on a CPU-bound control plane
    (issue 29's target: >= 0.90). ``--no-floor`` leaves it out.
    ``decision_digest`` is a hash of every bind decision of the service's rounds (``<pod>=<node>``, in
    order): two builds that decide alike print the same digest for the same ``--nodes``, ``--pods``,
    ``--repeat`` and ``--seed``.
    ``--pin`` runs the service (and the no-op) on a CPU of its own.
    ``--memory`` instead loads ``--memory-nodes`` nodes (~20 pods each) and reports the service's
    RSS once the load is in.

Targets (issue 29): floor_ratio >= 0.90; cpu_ms_per_pod <= 1.2 at 500 nodes, <= 1.4 at 1,000 nodes,
on the 2-CPU VM of the issue; RSS <= 500 MB for 5,000 nodes / 100,000 pods.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/cycle.py [--nodes 500] [--pods 1000] [--touches 5000]
    PYTHONPATH=$PWD .venv/bin/python bench/cycle.py --memory [--memory-nodes 5000]
    PYTHONPATH=$PWD .venv/bin/python bench/cycle.py --profile /tmp/cycle.prof   # cProfile of steps 1-3

One JSON object is printed on stdout; a wrong answer exits non-zero with the reason.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import importlib.util
import json
import multiprocessing as mp
import os
import platform
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
import psutil  # noqa: E402

from bench.extender import HEADERS, BenchFailure, free_port, load_wire_pod  # noqa: E402
from bench.fakeapi import serve as serve_fake  # noqa: E402

#: Seconds to wait for the service's /readyz (the memory run lists 100k pods).
READY_TIMEOUT_S = 900.0
#: The service counts as idle once it used less than this CPU (seconds) over one poll window.
IDLE_CPU_S = 0.003
#: Seconds of one idle poll window.
IDLE_WINDOW_S = 0.25


def interpreter() -> dict[str, str]:
    """The Python that ran the bench, for its JSON: ``{"version": "3.11.7", "executable": path, "compiler":
    "GCC 12.2.0"}``. The same code costs ~7 % less CPU on a CPython built with profile-guided and link-time
    optimisation (the ``python:3.11-slim`` image's, a distribution's) than on a plain source build such as
    pyenv's default (docs/performance.md, round 17), so a figure is compared only with figures of the same
    interpreter."""
    return {
        "version": platform.python_version(),
        "executable": sys.executable,
        "compiler": platform.python_compiler(),
    }


def num_feasible_nodes_to_find(all_nodes: int) -> int:
    """How many feasible nodes kube-scheduler v1.26 looks for before stopping (percentageOfNodesToScore
    unset: adaptive 50 % - nodes/125, at least 5 %, at least 100 nodes); mirrors
    pkg/scheduler/schedule_one.go ``numFeasibleNodesToFind``."""
    if all_nodes < 100:
        return all_nodes
    pct = max(5, 50 - all_nodes // 125)
    return max(100, all_nodes * pct // 100)


# ---------------------------------------------------------------------------- processes
def run_service(kubeconfig: str, port: int) -> None:
    """Service process entry point: the app with the Kubernetes source under uvicorn.

    SIGUSR1 starts a cProfile of the process, SIGUSR2 stops it and dumps the stats to
    ``$CYCLE_PROFILE`` (a path).
    """
    import cProfile

    from app.server.app import create_app
    from app.sources.kubernetes import KubernetesSource

    prof = cProfile.Profile()

    def start(*_: Any) -> None:
        prof.enable()

    def stop(*_: Any) -> None:
        prof.disable()
        prof.dump_stats(os.environ["CYCLE_PROFILE"])

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    serve_asgi(create_app(KubernetesSource(kubeconfig=kubeconfig)), port, lifespan="on")


def serve_asgi(app: Any, port: int, lifespan: str) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` as the service runs here: uvicorn, one worker, the service's
    httptools protocol (:class:`~app.server.httpprotocol.ServiceProtocol`: each answer in one write), uvloop,
    no access log; ``lifespan`` is uvicorn's setting (``on`` / ``off``).

    With ``$CYCLE_SERVER`` = ``granian`` (``--server granian``), Granian's embedded ASGI server instead,
    in this process (one Rust runtime thread, HTTP/1.1, uvloop, no access log), so the process's CPU
    is still the whole of the serving.
    """
    if os.environ.get("CYCLE_SERVER", "uvicorn") == "granian":
        serve_granian(app, port, lifespan)
        return
    import uvicorn

    from app.server.httpprotocol import ServiceProtocol

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        http=ServiceProtocol,
        loop="uvloop",
        log_level="warning",
        access_log=False,
        lifespan=lifespan,
    )


def serve_granian(app: Any, port: int, lifespan: str) -> None:
    """Serve ``app`` under Granian's embedded server (``granian.server.embed``) in this process, on uvloop;
    SIGINT stops it. ``lifespan`` ``on`` runs the ASGI lifespan, ``off`` does not."""
    import uvloop
    from granian.constants import HTTPModes, Interfaces
    from granian.server.embed import Server

    interface = Interfaces.ASGI if lifespan == "on" else Interfaces.ASGINL
    server = Server(app, address="127.0.0.1", port=port, interface=interface, http=HTTPModes.http1, log_enabled=False)

    async def main() -> None:
        import asyncio

        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, server.stop)
        await server.serve()

    uvloop.run(main())


async def noop_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that reads the request body and answers a fixed 2 KB JSON: the floor of the HTTP work."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False) and message["type"] == "http.request"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", b"2048"), (b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": b'"' + b"x" * 2046 + b'"'})


def run_noop_extender(kubeconfig: str, port: int) -> None:
    """No-op extender process entry point: :func:`bench.noopextender.create_noop_app` under the service's
    uvicorn settings (:func:`serve_asgi`), its Bindings going to the API server of ``kubeconfig``."""
    from bench.noopextender import create_noop_app

    serve_asgi(create_noop_app(kubeconfig), port, lifespan="on")


def run_noop(port: int) -> None:
    """Floor process entry point: :func:`noop_app` under uvicorn as the service runs (httptools, uvloop)."""
    serve_asgi(noop_app, port, lifespan="off")


def http_floor(body: bytes, calls: int, directory: str) -> tuple[float, float]:
    """CPU (ms) per request of the HTTP work alone, against :func:`noop_app` in its own process:

    - the server's, for ``calls`` POSTs of ``body`` on one kept-alive connection: what uvicorn, uvloop
      and the kernel cost per verb call before any of our code runs;
    - the client's (this process), for ``calls`` Binding-sized POSTs through the service's own API
      client lane (:class:`app.client.lane.Lane`, aiohttp, a kubeconfig in ``directory``): what each
      bind's request to the API server costs before any of our code runs.

    Raises:
        BenchFailure: the process did not answer.
    """
    port = free_port()
    proc = mp.get_context("spawn").Process(target=run_noop, args=(port,), daemon=True)
    proc.start()
    try:
        ps = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while True:
            try:
                post(conn, "/", body)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise BenchFailure("the no-op server did not start") from None
                conn.close()
                time.sleep(0.1)
        for _ in range(200):
            post(conn, "/", body)
        t = ps.cpu_times()
        c0 = t.user + t.system
        for _ in range(calls):
            post(conn, "/", body)
        t = ps.cpu_times()
        conn.close()
        server = (t.user + t.system - c0) / calls * 1000
        return server, lane_floor(write_kubeconfig(directory, port), calls)
    finally:
        proc.kill()
        proc.join(5)


def lane_floor(kubeconfig: str, calls: int) -> float:
    """This process's CPU (ms) per POST of a Binding-sized body through :class:`app.client.lane.Lane`
    to the server of ``kubeconfig`` (answer read whole), on uvloop as the service runs."""
    import uvloop

    from app.client.config import connection_settings, load_configuration
    from app.client.lane import Lane

    body = orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "cycle-0", "namespace": "default", "uid": str(uuid.uuid4())},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-00000"},
        }
    )

    async def measure() -> float:
        lane = Lane(connection_settings(load_configuration(kubeconfig)))
        try:
            path = "/api/v1/namespaces/default/pods/cycle-0/binding"
            for _ in range(200):
                await lane.request("POST", path, body)
            c0 = time.process_time()
            for _ in range(calls):
                await lane.request("POST", path, body)
            return (time.process_time() - c0) / calls * 1000
        finally:
            await lane.aclose()

    return uvloop.run(measure())


def write_kubeconfig(directory: str, port: int) -> str:
    """A kubeconfig for the fake at ``http://127.0.0.1:port`` (bearer token)."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "bench", "user": {"token": "bench-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "bench"}}],
        "current-context": "fake",
    }
    path = os.path.join(directory, "kubeconfig")
    Path(path).write_text(json.dumps(cfg))
    return path


class Stack:
    """The fake API server and the service, each in its own (spawned) process; with ``noop``, also the
    no-op extender (:mod:`bench.noopextender`) on a fake API server of its own (the same fake, the same
    cluster), so the service never sees the no-op's pods."""

    def __init__(
        self, nodes: int, seed: int, profile: str | None = None, pin: bool = False, noop: bool = False
    ) -> None:
        self.ctx = mp.get_context("spawn")
        self.tmp = tempfile.TemporaryDirectory(prefix="cycle-")
        self.fake_port, self.port = free_port(), free_port()
        self.fake = self.start_fake(self.fake_port, nodes, seed)
        self.noop_fake: Any = None
        self.noop: Any = None
        self.noop_proc: psutil.Process | None = None
        if noop:
            self.noop_fake_port, self.noop_port = free_port(), free_port()
            self.noop_fake = self.start_fake(self.noop_fake_port, nodes, seed)
        if profile:
            os.environ["CYCLE_PROFILE"] = profile
        kubeconfig = write_kubeconfig(self.tmp.name, self.fake_port)
        self.service = self.ctx.Process(target=run_service, args=(kubeconfig, self.port), daemon=True)
        self.service.start()
        assert self.service.pid is not None
        self.proc = psutil.Process(self.service.pid)
        if noop:
            noop_dir = os.path.join(self.tmp.name, "noop")
            os.mkdir(noop_dir)
            noop_config = write_kubeconfig(noop_dir, self.noop_fake_port)
            self.noop = self.ctx.Process(target=run_noop_extender, args=(noop_config, self.noop_port), daemon=True)
            self.noop.start()
            assert self.noop.pid is not None
            self.noop_proc = psutil.Process(self.noop.pid)
        if pin:
            pin_service(self.proc, psutil.Process(self.fake.pid))
            if self.noop_proc is not None:
                pin_service(self.noop_proc, psutil.Process(self.noop_fake.pid))

    def start_fake(self, port: int, nodes: int, seed: int) -> Any:
        """Start a fake API server (bench/fakeapi.py) on ``port``; its process once it listens.

        Raises:
            BenchFailure: it did not start in time.
        """
        ready = self.ctx.Event()
        fake = self.ctx.Process(target=serve_fake, args=(port, nodes, seed, ready), daemon=True)
        fake.start()
        if not ready.wait(600):
            raise BenchFailure("the fake API server did not start")
        return fake

    def cpu(self, proc: psutil.Process | None = None) -> float:
        """CPU seconds (user + system) the service process (or ``proc``) used so far."""
        t = (proc or self.proc).cpu_times()
        return float(t.user + t.system)

    def rss(self) -> int:
        """Resident set size of the service process, bytes."""
        return int(self.proc.memory_info().rss)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until the service's /readyz answers 200 and every watch is open.

        Raises:
            BenchFailure: a process died or the service was not ready in time.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.service.is_alive() or not self.fake.is_alive():
                raise BenchFailure("the service or the fake API server exited (see stderr)")
            try:
                status, _ = get(self.port, "/readyz")
                if status == 200 and self.fake_stats()["watchers"].get("/api/v1/pods"):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise BenchFailure(f"service not ready after {timeout:.0f} s")

    def wait_noop_ready(self, timeout: float = 120.0) -> None:
        """Until the no-op extender's /readyz answers 200.

        Raises:
            BenchFailure: it exited or was not ready in time.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.noop.is_alive() or not self.noop_fake.is_alive():
                raise BenchFailure("the no-op extender or its fake API server exited (see stderr)")
            try:
                if get(self.noop_port, "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise BenchFailure(f"no-op extender not ready after {timeout:.0f} s")

    def fake_stats(self, port: int | None = None) -> dict[str, Any]:
        """The fake's (or the fake on ``port``'s) counters (events sent, binds, kubelet updates pending,
        open watches)."""
        _, data = get(port or self.fake_port, "/bench/stats")
        stats: dict[str, Any] = orjson.loads(data)
        return stats

    def wait_idle(self, timeout: float = 120.0, proc: psutil.Process | None = None) -> float:
        """Until the service (or ``proc``) used less than :data:`IDLE_CPU_S` over one window; returns the
        monotonic time at the start of that quiet window (when the work ended, within one window)."""
        deadline = time.monotonic() + timeout
        last, t_last = self.cpu(proc), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(IDLE_WINDOW_S)
            now, t_now = self.cpu(proc), time.monotonic()
            if now - last < IDLE_CPU_S:
                return t_last
            last, t_last = now, t_now
        raise BenchFailure("the service never became idle")

    def idle_rate(self, seconds: float = 2.0, proc: psutil.Process | None = None) -> float:
        """CPU seconds per second the idle service (or ``proc``) uses (expiry sweep, background plugins)."""
        c0, t0 = self.cpu(proc), time.monotonic()
        time.sleep(seconds)
        return (self.cpu(proc) - c0) / (time.monotonic() - t0)

    def close(self) -> None:
        """Stop the service and the no-op (SIGINT: uvicorn shuts down) and the fakes."""
        for p in (self.service, self.noop):
            if p is not None and p.is_alive() and p.pid:
                os.kill(p.pid, signal.SIGINT)
                p.join(10)
        for p in (self.service, self.fake, self.noop, self.noop_fake):
            if p is not None and p.is_alive():
                p.kill()
                p.join(5)
        self.tmp.cleanup()


def pin_service(service: psutil.Process, fake: psutil.Process) -> None:
    """Give the service a CPU of its own and leave the others to the fake and the driver (``--pin``).

    On a 2-CPU machine the three processes otherwise share both CPUs, and the service's CPU time per
    pod varies by 20-30 % from run to run with where the scheduler puts them; pinned, it varies far
    less. A machine with one CPU is left alone.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return
    service.cpu_affinity([cpus[-1]])
    fake.cpu_affinity(cpus[:-1])
    psutil.Process().cpu_affinity(cpus[:-1])


# ---------------------------------------------------------------------------- HTTP
def get(port: int, path: str) -> tuple[int, bytes]:
    """One GET on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, bytes]:
    """One POST on a kept-alive connection: (status, body)."""
    conn.request("POST", path, body, HEADERS)
    resp = conn.getresponse()
    return resp.status, resp.read()


def new_pods(count: int, round_: int = 0, prefix: str = "cycle") -> list[dict[str, Any]]:
    """``count`` copies of the captured pod as new pods to create (``<prefix>-<i>``, ``<prefix>-<round>-<i>``
    after the first round; uid set by the fake)."""
    template = load_wire_pod()
    pods = []
    for i in range(count):
        pod = orjson.loads(orjson.dumps(template))
        meta = pod["metadata"]
        meta["name"] = f"{prefix}-{i}" if round_ == 0 else f"{prefix}-{round_}-{i}"
        meta["uid"] = str(uuid.uuid4())
        for key in ("resourceVersion", "creationTimestamp"):
            meta.pop(key, None)
        pod["spec"].pop("nodeName", None)
        pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
        pods.append(pod)
    return pods


# ---------------------------------------------------------------------------- phases
def drive(
    stack: Stack, nodes: int, pods: list[dict[str, Any]], decisions: list[str] | None = None, noop: bool = False
) -> dict[str, list[float]]:
    """Create ``pods`` and schedule each through filter -> prioritize -> bind; per-verb wall times (seconds).

    With ``noop``, against the no-op extender and its fake instead of the service. Each bind decision
    (``<pod>=<node>``) is appended to ``decisions`` when given.

    Raises:
        BenchFailure: a non-200 answer, an Error, or a pod that fits nowhere.
    """
    names = [f"node-{i:05d}" for i in range(nodes)]
    window = num_feasible_nodes_to_find(nodes)
    times: dict[str, list[float]] = {"filter": [], "prioritize": [], "bind": []}
    fake = http.client.HTTPConnection("127.0.0.1", stack.noop_fake_port if noop else stack.fake_port, timeout=120)
    conn = http.client.HTTPConnection("127.0.0.1", stack.noop_port if noop else stack.port, timeout=60)
    perf = time.perf_counter
    start = 0
    try:
        created: list[dict[str, Any]] = []
        for i in range(0, len(pods), 200):  # created in parallel: the ADDED events arrive as a burst
            status, data = post(fake, "/bench/create", orjson.dumps({"pods": pods[i : i + 200]}))
            if status != 201:
                raise BenchFailure(f"creating pods: HTTP {status}: {data[:200]!r}")
            created += orjson.loads(data)["items"]
        pods[:] = created  # kube-scheduler sends the pod as its informer holds it (resourceVersion and all)
        for pod in pods:
            candidates = [names[(start + k) % nodes] for k in range(window)]
            start = (start + window) % nodes
            t0 = perf()
            status, data = post(conn, "/filter", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": candidates}))
            times["filter"].append(perf() - t0)
            res = orjson.loads(data)
            if status != 200 or res.get("Error") or not res.get("NodeNames"):
                raise BenchFailure(f"/filter {pod['metadata']['name']}: HTTP {status}: {data[:300]!r}")
            feasible = res["NodeNames"]
            t0 = perf()
            status, data = post(conn, "/prioritize", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": feasible}))
            times["prioritize"].append(perf() - t0)
            if status != 200:
                raise BenchFailure(f"/prioritize {pod['metadata']['name']}: HTTP {status}: {data[:300]!r}")
            scores = orjson.loads(data)
            best = max(scores, key=lambda e: e["Score"])["Host"] if scores else feasible[0]
            meta = pod["metadata"]
            body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": best}
            if decisions is not None:
                decisions.append(f"{meta['name']}={best}")
            t0 = perf()
            status, data = post(conn, "/bind", orjson.dumps(body))
            times["bind"].append(perf() - t0)
            if status != 200 or orjson.loads(data).get("Error"):
                raise BenchFailure(f"/bind {meta['name']} to {best}: HTTP {status}: {data[:300]!r}")
    finally:
        conn.close()
        fake.close()
    return times


def verb_cpu(stack: Stack, nodes: int, pods: list[dict[str, Any]], calls: int, noop: bool = False) -> dict[str, float]:
    """Service (or, with ``noop``, no-op extender) CPU (ms) per call of /filter and of /prioritize alone,
    ``calls`` each, with the bodies of the cycle (the watch is quiet meanwhile). What remains of
    ``cpu_ms_per_pod`` is the bind and the pod's watch events.

    Raises:
        BenchFailure: a non-200 answer.
    """
    names = [f"node-{i:05d}" for i in range(nodes)]
    window = num_feasible_nodes_to_find(nodes)
    bodies = [
        orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [names[(i * window + k) % nodes] for k in range(window)]})
        for i, pod in enumerate(pods[:calls])
    ]
    out = {}
    proc = stack.noop_proc if noop else None
    conn = http.client.HTTPConnection("127.0.0.1", stack.noop_port if noop else stack.port, timeout=60)
    try:
        for verb in ("filter", "prioritize"):
            for body in bodies[:20]:  # warm the connection and the parse caches as the cycle did
                post(conn, f"/{verb}", body)
            stack.wait_idle(proc=proc)
            c0 = stack.cpu(proc)
            for body in bodies:
                status, data = post(conn, f"/{verb}", body)
                if status != 200:
                    raise BenchFailure(f"/{verb}: HTTP {status}: {data[:300]!r}")
            out[f"{verb}_cpu_ms_per_call"] = round((stack.cpu(proc) - c0) / len(bodies) * 1000, 3)
    finally:
        conn.close()
    return out


def check_applied(stack: Stack, pods: list[dict[str, Any]]) -> None:
    """The service's cache holds the last pod as bound (its watch events were applied, not only assumed).

    Raises:
        BenchFailure: the pod is missing or still only assumed.
    """
    meta = pods[-1]["metadata"]
    _, data = get(stack.fake_port, f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
    node = orjson.loads(data)["spec"].get("nodeName")
    deadline = time.monotonic() + 30
    while node and time.monotonic() < deadline:
        info = orjson.loads(get(stack.port, f"/apis/v1/nodes/{node}")[1])
        if any(p["uid"] == meta["uid"] for p in info["pods"]) and not info["assumedPods"]:
            return
        time.sleep(0.1)
    raise BenchFailure(f"the service never applied the bind of {meta['name']} (node {node})")


class Round:
    """One round's figures: CPU per pod (ms) net of the idle rate and raw, wall seconds, watch events sent,
    and the pods as created (as kube-scheduler sent them)."""

    def __init__(self, net: float, raw: float, wall: float, events: int, pods: list[dict[str, Any]]) -> None:
        self.net, self.raw, self.wall, self.events, self.pods = net, raw, wall, events, pods


def play_round(
    stack: Stack,
    args: argparse.Namespace,
    round_: int,
    idle: float,
    times: dict[str, list[float]],
    decisions: list[str] | None = None,
    noop: bool = False,
) -> Round:
    """Schedule ``args.pods`` new pods through the service (or the no-op extender) and wait until it is
    idle again; the round's CPU per pod. Wall latencies are appended to ``times``.

    Raises:
        BenchFailure: as :func:`drive`, or the service never applied its binds.
    """
    proc = stack.noop_proc if noop else None
    fake_port = stack.noop_fake_port if noop else stack.fake_port
    pods = new_pods(args.pods, round_, "noop" if noop else "cycle")
    sent0 = stack.fake_stats(fake_port)["events_sent"]
    c0, t0 = stack.cpu(proc), time.monotonic()
    for verb, values in drive(stack, args.nodes, pods, decisions, noop).items():
        times.setdefault(verb, []).extend(values)
    while stack.fake_stats(fake_port)["pending_kubelet"]:
        time.sleep(0.01)
    t1 = stack.wait_idle(proc=proc)
    cpu = stack.cpu(proc) - c0 - IDLE_CPU_S  # the quiet window's own CPU is (at most) IDLE_CPU_S
    events = stack.fake_stats(fake_port)["events_sent"] - sent0
    if not noop:
        check_applied(stack, pods)
    return Round(max(0.0, cpu - idle * (t1 - t0)) / args.pods * 1000, cpu / args.pods * 1000, t1 - t0, events, pods)


def latencies(times: dict[str, list[float]]) -> dict[str, Any]:
    """Per verb: ``{"p50_ms", "p99_ms"}`` of wall times in seconds."""
    out: dict[str, Any] = {}
    for verb, values in times.items():
        p50, p99 = np.percentile(np.array(values), [50, 99]) * 1000
        out[verb] = {"p50_ms": round(float(p50), 3), "p99_ms": round(float(p99), 3)}
    return out


def run_cycle(args: argparse.Namespace) -> dict[str, Any]:
    """The cycle and watch phases at ``args.nodes`` nodes, alternating each round with a round of the
    no-op extender (unless ``args.no_floor``); the result object."""
    with_noop = not args.no_floor
    stack = Stack(args.nodes, args.seed, args.profile, pin=args.pin, noop=with_noop)
    try:
        stack.wait_ready()
        stack.wait_idle()
        idle = stack.idle_rate(args.idle_seconds)
        noop_idle = 0.0
        if with_noop:
            stack.wait_noop_ready()
            stack.wait_idle(proc=stack.noop_proc)
            noop_idle = stack.idle_rate(args.idle_seconds, proc=stack.noop_proc)
            # warm the no-op as the service is warmed by its load: first-use imports and connections
            play_round(stack, argparse.Namespace(**{**vars(args), "pods": 20}), 10_000, noop_idle, {}, noop=True)
        if args.profile:
            assert stack.service.pid is not None
            os.kill(stack.service.pid, signal.SIGUSR1)
        rounds: list[Round] = []
        noop_rounds: list[Round] = []
        times: dict[str, list[float]] = {}
        noop_times: dict[str, list[float]] = {}
        decisions: list[str] = []
        for round_ in range(args.repeat):
            rounds.append(play_round(stack, args, round_, idle, times, decisions))
            if with_noop:
                noop_rounds.append(play_round(stack, args, round_, noop_idle, noop_times, noop=True))
        raw = [r.raw for r in rounds]
        wall = sum(r.wall for r in rounds)
        events = sum(r.events for r in rounds)
        pods = rounds[-1].pods
        if args.profile:
            assert stack.service.pid is not None
            os.kill(stack.service.pid, signal.SIGUSR2)
            time.sleep(1.0)
        verbs = latencies(times)
        verbs["candidates_per_filter"] = num_feasible_nodes_to_find(args.nodes)

        split = verb_cpu(stack, args.nodes, pods, min(len(pods), 500))
        noop_split = verb_cpu(stack, args.nodes, pods, min(len(pods), 500), noop=True) if with_noop else {}
        filter_body = orjson.dumps(
            {
                "Pod": pods[0],
                "Nodes": None,
                "NodeNames": [f"node-{i:05d}" for i in range(num_feasible_nodes_to_find(args.nodes))],
            }
        )
        stack.wait_idle()
        c0, t0 = stack.cpu(), time.monotonic()
        status, data = post(
            http.client.HTTPConnection("127.0.0.1", stack.fake_port, timeout=120),
            "/bench/touch",
            orjson.dumps({"count": args.touches}),
        )
        if status != 200:
            raise BenchFailure(f"touch: HTTP {status}")
        touched = orjson.loads(data)["touched"]
        t1 = stack.wait_idle()
        wcpu = stack.cpu() - c0 - IDLE_CPU_S
        wwall = max(1e-6, t1 - t0)
        floor, client_floor = http_floor(filter_body, args.floor_calls, stack.tmp.name)
    finally:
        stack.close()
    cpu_ms = float(np.median([r.net for r in rounds]))
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.pods,
        "server": args.server,
        "cpu_ms_per_pod": round(cpu_ms, 3),
        "cpu_ms_per_pod_rounds": [round(r.net, 3) for r in rounds],
        "cpu_ms_per_pod_raw": round(float(np.median(raw)), 3),
        "idle_cpu_ms_per_s": round(idle * 1000, 3),
        "wall_s": round(wall, 3),
        "watch_events_per_pod": round(events / (args.pods * args.repeat), 2),
        **verbs,
        **split,
        "http_floor": {
            "cpu_ms_per_request": round(floor, 3),
            "client_cpu_ms_per_bind": round(client_floor, 3),
            "cpu_ms_per_pod": round(3 * floor + client_floor, 3),
        },
        "watch": {
            "events": touched,
            "cpu_us_per_event": round(max(0.0, wcpu - idle * wwall) / max(1, touched) * 1e6, 1),
            "events_per_second": round(touched / wwall, 1),
        },
        "decisions": len(decisions),
        "decision_digest": hashlib.sha256("\n".join(decisions).encode()).hexdigest()[:16],
        "python": interpreter(),
    }
    if with_noop:
        noop_ms = float(np.median([r.net for r in noop_rounds]))
        result["noop_extender"] = {
            "cpu_ms_per_pod": round(noop_ms, 3),
            "cpu_ms_per_pod_rounds": [round(r.net, 3) for r in noop_rounds],
            "cpu_ms_per_pod_raw": round(float(np.median([r.raw for r in noop_rounds])), 3),
            "idle_cpu_ms_per_s": round(noop_idle * 1000, 3),
            **latencies(noop_times),
            **noop_split,
        }
        # the no-op's CPU per pod over ours: on a CPU-bound control plane, our throughput over the no-op's
        result["floor_ratio"] = round(noop_ms / cpu_ms, 3) if cpu_ms > 0 else None
    return result


def run_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Load ``args.memory_nodes`` nodes (~20 pods each) through LIST; the service's RSS once loaded."""
    stack = Stack(args.memory_nodes, args.seed)
    try:
        t0 = time.monotonic()
        stack.wait_ready()
        loaded = time.monotonic() - t0
        stack.wait_idle(timeout=300)
        rss = stack.rss()
        _, data = get(stack.port, "/metrics")
        pods = None
        for line in data.decode().splitlines():
            if line.startswith('koord_cache_objects{kind="Pod"}'):
                pods = int(float(line.split()[-1]))
    finally:
        stack.close()
    return {
        "memory": {
            "nodes": args.memory_nodes,
            "pods_in_cache": pods,
            "rss_mb": round(rss / 1e6, 1),
            "load_s": round(loaded, 1),
        },
        "python": interpreter(),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=500, help="nodes of the cycle run (default 500)")
    p.add_argument("--pods", type=int, default=1000, help="pods scheduled (default 1000)")
    p.add_argument("--touches", type=int, default=5000, help="MODIFIED events of the watch phase (default 5000)")
    p.add_argument("--memory", action="store_true", help="measure RSS of a big load instead")
    p.add_argument("--memory-nodes", type=int, default=5000, help="nodes of the memory run (default 5000)")
    p.add_argument("--profile", help="write a cProfile of the cycle phase (service process) to this path")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="cycle rounds of --pods new pods each; CPU per pod is their median (default 1)",
    )
    p.add_argument(
        "--server",
        choices=("uvicorn", "granian"),
        default="uvicorn",
        help="the ASGI server of the service, the no-op extender and the HTTP floor (default uvicorn)",
    )
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="leave out the no-op extender's rounds (noop_extender, floor_ratio)",
    )
    p.add_argument(
        "--floor-calls",
        type=int,
        default=2000,
        help="requests of each HTTP floor measure (http_floor; default 2000; fewer: a quicker, rougher floor)",
    )
    p.add_argument(
        "--idle-seconds",
        type=float,
        default=2.0,
        help="seconds over which the idle CPU rate is measured (idle_cpu_ms_per_s; default 2.0)",
    )
    p.add_argument(
        "--pin", action="store_true", help="run the service on a CPU of its own (steadier CPU figures on 2 CPUs)"
    )
    args = p.parse_args(argv)
    require_at_least(p, args, 1, ("nodes", "pods", "touches", "memory_nodes", "repeat", "floor_calls"))
    require_at_least(p, args, 0.1, ("idle_seconds",))
    if args.server == "granian" and importlib.util.find_spec("granian") is None:
        p.error("--server granian needs the granian package (not a dependency of the service): pip install granian")
    return args


def require_at_least(p: argparse.ArgumentParser, args: argparse.Namespace, least: float, flags: Sequence[str]) -> None:
    """Exit 2 with ``--flag must be >= least`` (argparse's usage error) for the first of ``flags``
    (attribute names, ``_`` for ``-``) whose value in ``args`` is below ``least``."""
    for flag in flags:
        if getattr(args, flag) < least:
            p.error(f"--{flag.replace('_', '-')} must be >= {least}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the result JSON; exit 1 with the reason on a failure."""
    args = parse_args(argv)
    os.environ["CYCLE_SERVER"] = args.server  # read by serve_asgi in the spawned processes
    try:
        result = run_memory(args) if args.memory else run_cycle(args)
    except BenchFailure as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
