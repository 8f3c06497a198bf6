"""Benchmark of one large gang (issue 14): a 1,000-member gang on 5,000 nodes, every member held at Permit.

What it measures
    The real service (``create_app`` with the default plugins, Coscheduling among them, one uvicorn worker,
    httptools, uvloop) runs in its own process, over the in-memory source of bench/extender.py (accepting
    the members' PreBind annotation patches as the API server would) holding the
    bench cluster (``--nodes`` nodes with ~20 running pods each and NodeMetrics) plus the gang's
    ``--members`` pending pods (the captured pod of ``tests/fixtures/wire-samples/filter.json``, 100m /
    64Mi, renamed, with the lightweight gang annotations: ``min-available`` = ``total-number`` =
    ``--members``, Strict, ``waiting-time`` 10m). The driver (this process) plays kube-scheduler:

    1. for each member, one after the other on one kept-alive connection: ``POST /filter`` over the
       ``numFeasibleNodesToFind`` candidates of a rotating window (500 at 5,000 nodes), ``POST /prioritize``
       over the survivors, then ``POST /bind`` to the best-scored node, sent on its own connection and
       left open (kube-scheduler's binding goroutine waits in it: the member waits at Permit);
    2. before the last member's ``/bind``, the driver waits until the gang's REST view
       (``/apis/v1/plugins/Coscheduling/gang/default/bench-gang``) shows every other member waiting,
       and reads the service's RSS (``rss_waiting_mb``: ``--members - 1`` binds open and held);
    3. it sends the last ``/bind`` and measures until every ``/bind`` has answered
       (``release_seconds``: the whole gang allowed, PreBind and Bind run for each member, all answered).

    ``schedule_service_cpu_s`` / ``schedule_driver_cpu_s`` are the CPU seconds the service and this driver
    spent over ``schedule_seconds`` (on 2 CPUs the two share the machine: what the wall time is made of).
    ``rss_idle_mb`` is the service's RSS (psutil) once loaded and idle, before any member is sent;
    ``rss_above_idle_mb`` = ``rss_waiting_mb - rss_idle_mb``; ``rss_peak_mb`` is the highest RSS sampled
    (every 20 ms) from the first ``/filter`` to the last answer. ``decision_digest`` is a hash of every
    member's decision (``<pod>=<node>``, in order): equal digests, equal placements. ``schedule_seconds``
    is the wall time of step 1 (filter and prioritize of every member, binds sent).

    The driver plays a compiled kube-scheduler: its CPU is an artifact of the bench that, on 2 CPUs, the
    wall time measures too, so it is kept lean (issue 29), over aiohttp as it is (no HTTP code of our own):
    ``/filter`` and ``/prioritize`` over the simulator's :class:`~app.sim.transport.AsyncPoster` (one
    kept-alive connection, URL parsed once, one watchdog timer instead of aiohttp's timer per request); bodies
    built by orjson around the pod encoded once per member and the candidate window encoded once per
    window (``orjson.Fragment``); answers decoded into the simulator's msgspec structs
    (:mod:`app.sim.answers`: the fields read, no dict per node). With
    httpx's asynchronous client the driver spent more CPU than the service (8.98 against 5.11 s). The
    binds go over aiohttp with no connection limit (``TCPConnector(limit=0)``), each on its own
    connection: a limit (httpx's default is 100 connections) would hold the 101st bind back and the gang
    could never complete, and httpx's pool, unlimited, made the client the bottleneck with 1,000
    connections open (a release of 5.8 s, while the service's own CPU over it was 0.4 s, as ``--profile``
    shows), which the release time would measure instead of the service. They carry no timer each: one
    deadline (:data:`BIND_TIMEOUT_S`) covers all of them.

Targets (issue 14): ``release_seconds`` <= 1 s and ``rss_above_idle_mb`` <= 50 MB, 1,000 members on
5,000 nodes; issue 29: ``schedule_seconds`` <= 2 s.

``--profile PATH`` writes a cProfile (CPU time: ``time.process_time``) of the service over the release,
or with ``--profile-phase schedule`` over step 1.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/gang.py [--nodes 5000] [--members 1000] [--seed 1]

One JSON object is printed on stdout; a wrong answer (an HTTP error, a bind refused, a gang that does not
complete) exits 1 with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import hashlib
import multiprocessing as mp
import signal
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import aiohttp  # noqa: E402
import httpx  # noqa: E402
import orjson  # noqa: E402
import psutil  # noqa: E402
from yarl import URL  # noqa: E402

from app.api import coscheduling as n  # noqa: E402
from app.sim.answers import AnswerError, decode_bind, decode_filter, decode_prioritize  # noqa: E402
from app.sim.transport import AsyncPoster  # noqa: E402
from bench.cycle import num_feasible_nodes_to_find  # noqa: E402
from bench.extender import HEADERS, BenchFailure, InMemorySource, bench_main, free_port, load_wire_pod  # noqa: E402

GANG = "bench-gang"
NAMESPACE = "default"
#: The members' waiting-time annotation: far above the bench's run, below bindHTTPTimeout (16m).
WAIT_TIME = "10m"
#: Seconds to wait for the service's /readyz (it builds and lists the whole cluster first).
READY_TIMEOUT_S = 600.0
#: Seconds to wait for every other member to be held at Permit before the last bind.
WAITING_TIMEOUT_S = 120.0
#: Seconds between two RSS samples of the service.
RSS_SAMPLE_S = 0.02
#: Seconds the idle service is left alone before its idle RSS is read.
SETTLE_S = 1.0
MB = 1024 * 1024
#: Seconds one /filter or /prioritize may take (the verbs' poster keeps it with one watchdog timer).
VERB_TIMEOUT_S = 60.0
#: aiohttp timeout of no limit: the binds wait under one deadline (the gather's), not a timer each.
NO_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None)
#: Seconds, from the last member's bind, within which every bind must have answered.
BIND_TIMEOUT_S = 900.0
VERB_PATHS = {"filter": "/filter", "prioritize": "/prioritize"}
_SCORE = attrgetter("Score")


def member_pods(members: int) -> list[dict[str, Any]]:
    """The gang's pending members: the wire pod renamed ``bench-gang-<i>`` with fresh uids and the gang annotations."""
    base = load_wire_pod()
    base["metadata"].pop("managedFields", None)
    base.get("spec", {}).pop("nodeName", None)
    base["status"] = {"phase": "Pending"}
    pods = []
    for i in range(members):
        pod = copy.deepcopy(base)
        meta = pod["metadata"]
        meta.update(name=f"{GANG}-{i:04d}", namespace=NAMESPACE, uid=str(uuid.UUID(int=i + 1, version=4)))
        meta["annotations"] = {
            n.ANNOTATION_GANG_NAME: GANG,
            n.ANNOTATION_GANG_MIN_NUM: str(members),
            n.ANNOTATION_GANG_TOTAL_NUM: str(members),
            n.ANNOTATION_GANG_MODE: n.MODE_STRICT,
            n.ANNOTATION_GANG_WAIT_TIME: WAIT_TIME,
        }
        pods.append(pod)
    return pods


class PatchingSource(InMemorySource):
    """The in-memory source accepting merge patches (the members' PreBind bind-gang annotations), as the
    API server would; the patch is counted and answered with an empty object, no watch event follows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.patches = 0

    async def patch(
        self,
        kind: str,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Count the patch; answer an empty object."""
        self.patches += 1
        return {}


def run_service(port: int, nodes: int, members: int, seed: int, profile: str | None) -> None:
    """Service process entry point: the bench cluster plus the gang's members in the in-memory source,
    the app with its default plugins under uvicorn (httptools, uvloop).

    With ``profile`` (a path), SIGUSR1 starts a cProfile of the process and SIGUSR2 stops it and dumps the
    stats there (the driver brackets the release of the gang, or with ``--profile-phase schedule`` the
    scheduling phase, with them).
    """
    import cProfile
    import signal

    import uvicorn

    from app.server.app import create_app
    from bench.extender import build_cluster

    cluster = build_cluster(nodes, seed)
    cluster.objects["Pod"].extend(member_pods(members))
    if profile is not None:
        # CPU time, not wall: the 2 CPUs are shared with the driver, and a wall-clock profile charges the
        # time the service sat preempted (after waking the driver with a write) to the call it sat in
        prof = cProfile.Profile(time.process_time)

        def stop(*_: Any) -> None:
            prof.disable()
            prof.dump_stats(profile)

        signal.signal(signal.SIGUSR1, lambda *_: prof.enable())
        signal.signal(signal.SIGUSR2, stop)
    app = create_app(PatchingSource(cluster))
    uvicorn.run(app, host="127.0.0.1", port=port, http="httptools", loop="uvloop", log_level="warning")


class RssSampler:
    """Samples a process's RSS every :data:`RSS_SAMPLE_S` seconds in a thread; :attr:`peak` is the highest (bytes)."""

    def __init__(self, proc: psutil.Process) -> None:
        self.proc = proc
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self._stop.wait(RSS_SAMPLE_S)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds (user + system) ``proc`` used so far."""
    t = proc.cpu_times()
    return float(t.user + t.system)


async def _wait_ready(client: aiohttp.ClientSession, service: mp.process.BaseProcess) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not service.is_alive():
            raise BenchFailure("the service process exited before becoming ready")
        try:
            async with client.get("/readyz") as answer:
                await answer.read()
                if answer.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise BenchFailure(f"the service was not ready after {READY_TIMEOUT_S:.0f} s")


async def _verb(poster: AsyncPoster, verb: str, body: bytes) -> bytes:
    """``POST /<verb>`` of the encoded ``body`` on the verbs' connection; the answer's body.

    Raises:
        BenchFailure: the service cannot be reached, answered with an HTTP error, or not within the poster's timeout.
    """
    try:
        status, content = await poster.post(VERB_PATHS[verb], body)
    except httpx.HTTPError as exc:
        raise BenchFailure(f"/{verb}: {exc}") from exc
    if status != 200:
        raise BenchFailure(f"/{verb} answered {status}: {content[:300].decode(errors='replace')}")
    return content


async def _waiting(client: aiohttp.ClientSession) -> int:
    async with client.get(f"/apis/v1/plugins/Coscheduling/gang/{NAMESPACE}/{GANG}") as answer:
        content = await answer.read()
    if answer.status != 200:
        raise BenchFailure(f"the gang's REST view answered {answer.status}: {content[:300].decode(errors='replace')}")
    return len(orjson.loads(content)["waitingForBindChildren"])


async def _bind(session: aiohttp.ClientSession, url: URL, body: bytes) -> tuple[float, str]:
    """``POST /bind`` of the encoded ``body`` on a connection of its own (the session's pool has no limit,
    and every earlier bind still waits in its own); (the time it answered, its ``Error`` or "")."""
    async with session.post(url, data=body, allow_redirects=False) as answer:
        content = await answer.read()
        if answer.status != 200:
            raise BenchFailure(f"/bind answered {answer.status}: {content[:300].decode(errors='replace')}")
    try:
        error = decode_bind(content).Error
    except AnswerError as exc:
        raise BenchFailure(str(exc)) from exc
    return time.perf_counter(), error or ""


def _verb_body(pod: orjson.Fragment, names: orjson.Fragment) -> bytes:
    """The ``ExtenderArgs`` body (nodeCacheCapable) of the pod and node names, both encoded already."""
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


async def _place(poster: AsyncPoster, i: int, pod: orjson.Fragment, candidates: orjson.Fragment) -> str:
    """Member ``i``'s node: ``/filter`` of its encoded ``pod`` over the encoded ``candidates``, ``/prioritize``
    over the survivors, the first best-scored (the first survivor when no score came back).

    Raises:
        BenchFailure: an HTTP error, an answer that is not the verb's, or no node kept.
    """
    try:
        filtered = decode_filter(await _verb(poster, "filter", _verb_body(pod, candidates)))
        survivors = filtered.NodeNames
        if filtered.Error or not survivors:
            why = filtered.Error or next(iter(filtered.failed().values()), "no node passed")
            raise BenchFailure(f"member {i}: /filter kept no node: {why}")
        names = orjson.Fragment(orjson.dumps(survivors))
        scores = decode_prioritize(await _verb(poster, "prioritize", _verb_body(pod, names)))
    except AnswerError as exc:
        raise BenchFailure(f"member {i}: {exc}") from exc
    return max(scores, key=_SCORE).Host if scores else survivors[0]


async def drive(
    args: argparse.Namespace, port: int, proc: psutil.Process, service: mp.process.BaseProcess
) -> dict[str, Any]:
    """Steps 1-3 of the module docstring against the service on ``port``; the result JSON.

    Raises:
        BenchFailure: an HTTP error, a member no node passes, a refused bind, or a gang that does not complete.
    """
    url = f"http://127.0.0.1:{port}"
    bind_url = URL(url + "/bind")
    poster = AsyncPoster("127.0.0.1", port, timeout=VERB_TIMEOUT_S)
    async with (
        aiohttp.ClientSession(base_url=url, headers=HEADERS, timeout=aiohttp.ClientTimeout(total=60.0)) as inspect,
        aiohttp.ClientSession(
            headers=HEADERS,
            connector=aiohttp.TCPConnector(limit=0),
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("Accept-Encoding",),
            auto_decompress=False,
            timeout=NO_TIMEOUT,  # one deadline for them all (the gather's below), no timer per bind
        ) as binds,
    ):
        try:
            await _wait_ready(inspect, service)
            await asyncio.sleep(SETTLE_S)
            rss_idle = proc.memory_info().rss
            names = [f"node-{i:05d}" for i in range(args.nodes)]
            window = num_feasible_nodes_to_find(args.nodes)
            windows: dict[int, orjson.Fragment] = {}  # first candidate -> the window's names, encoded
            pods = member_pods(args.members)
            gc.freeze()  # the driver's long-lived objects: out of every collection during the loop
            tasks: list[asyncio.Task[tuple[float, str]]] = []
            decisions: list[str] = []
            with RssSampler(proc) as sampler:
                start = time.perf_counter()
                cpu0, driver0 = _cpu(proc), time.process_time()
                if args.profile and args.profile_phase == "schedule":
                    proc.send_signal(signal.SIGUSR1)
                for i, pod in enumerate(pods):
                    first = (i * window) % args.nodes
                    candidates = windows.get(first)
                    if candidates is None:
                        candidates = windows[first] = orjson.Fragment(
                            orjson.dumps((names + names)[first : first + window])
                        )
                    node = await _place(poster, i, orjson.Fragment(orjson.dumps(pod)), candidates)
                    meta = pod["metadata"]
                    uid = meta["uid"]
                    decisions.append(f"{meta['name']}={node}")
                    if i == len(pods) - 1:
                        waited = time.monotonic() + WAITING_TIMEOUT_S
                        while (held := await _waiting(inspect)) < len(pods) - 1:
                            if time.monotonic() > waited:
                                raise BenchFailure(f"only {held} of {len(pods) - 1} members reached Permit")
                            await asyncio.sleep(0.01)
                        rss_waiting = proc.memory_info().rss
                        schedule_seconds = time.perf_counter() - start
                        schedule_cpu = _cpu(proc) - cpu0, time.process_time() - driver0
                        if args.profile:
                            # schedule phase: stop (and dump) now; release phase: start now.
                            proc.send_signal(signal.SIGUSR2 if args.profile_phase == "schedule" else signal.SIGUSR1)
                        last = time.perf_counter()
                    body = orjson.dumps(
                        {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": uid, "Node": node}
                    )
                    tasks.append(asyncio.create_task(_bind(binds, bind_url, body)))
                try:
                    async with asyncio.timeout(BIND_TIMEOUT_S):
                        answers = await asyncio.gather(*tasks)
                except TimeoutError:
                    raise BenchFailure(f"the binds were not all answered within {BIND_TIMEOUT_S:.0f} s") from None
                if args.profile and args.profile_phase == "release":
                    proc.send_signal(signal.SIGUSR2)
                    await asyncio.sleep(1.0)  # let the service write the stats
        finally:
            gc.unfreeze()
            await poster.aclose()
        done = max(t for t, _ in answers)
        errors = [e for _, e in answers if e]
        if errors:
            raise BenchFailure(f"{len(errors)} binds refused, e.g. {errors[0]}")
    return {
        "nodes": args.nodes,
        "members": args.members,
        "candidates_per_filter": window,
        "schedule_seconds": round(schedule_seconds, 3),
        "schedule_service_cpu_s": round(schedule_cpu[0], 3),
        "schedule_driver_cpu_s": round(schedule_cpu[1], 3),
        "waiting_binds": len(pods) - 1,
        "release_seconds": round(done - last, 4),
        "rss_idle_mb": round(rss_idle / MB, 1),
        "rss_waiting_mb": round(rss_waiting / MB, 1),
        "rss_above_idle_mb": round((rss_waiting - rss_idle) / MB, 1),
        "rss_peak_mb": round(sampler.peak / MB, 1),
        "decision_digest": hashlib.sha256("\n".join(decisions).encode()).hexdigest()[:16],
        "targets": {"release_seconds": 1.0, "rss_above_idle_mb": 50.0},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the service process, drive the gang, stop the service; the result JSON.

    Raises:
        BenchFailure: see :func:`drive`.
    """
    port = free_port()
    ctx = mp.get_context("spawn")
    service = ctx.Process(
        target=run_service, args=(port, args.nodes, args.members, args.seed, args.profile), daemon=True
    )
    service.start()
    try:
        assert service.pid is not None
        return asyncio.run(drive(args, port, psutil.Process(service.pid), service))
    finally:
        service.terminate()
        service.join(timeout=15)
        if service.is_alive():
            service.kill()
            service.join()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line flags (``--nodes``, ``--members``, ``--seed``, ``--profile``; sizes must be >= 1, else exit 2)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000, help="nodes of the cluster (default 5000)")
    p.add_argument("--members", type=int, default=1000, help="members of the gang (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the cluster (default 1)")
    p.add_argument("--profile", help="write a cProfile of the service during the release to this path")
    p.add_argument(
        "--profile-phase",
        choices=("release", "schedule"),
        default="release",
        help="the phase --profile covers: the release (default) or the scheduling of every member (step 1)",
    )
    args = p.parse_args(argv)
    for flag in ("nodes", "members"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the result JSON; exit 1 with the reason on a failure."""
    return bench_main(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
