"""Benchmark of the scheduling cycle's own code, without HTTP: the service's CPU per pod in one process.

What it measures
    ``bench/cycle.py`` measures the real thing (service, fake API server and driver in three
    processes over loopback HTTP), but on a small shared VM its figure moves by 20-30 % from run to
    run, more than most changes to the code. This bench runs the same work in one process and times
    only the service's code, so two builds can be compared run against run:

    - the service (``create_app`` over the bench cluster of bench/extender.py: nodes, ~20 running
      pods per node, NodeMetrics) with its verbs called through the same handlers the HTTP front
      calls (``app.server.extender_routes._answer``, request bytes in, answer bytes out);
    - the pod events of a real API server, made by the fake of bench/fakeapi.py (the same objects
      and managedFields): ``ADDED`` when the pod is created, ``MODIFIED`` when it is bound and
      ``MODIFIED`` when the kubelet reports it Running. Each event line is decoded as the
      Kubernetes source decodes it (``app.client.watch.decode_event``, managedFields dropped) and
      applied to the cache.

    Per pod: its ADDED event, ``/filter`` (the window of nodes kube-scheduler passes on),
    ``/prioritize`` over the nodes that passed, ``/bind`` to the best (the in-memory source records
    the Binding instead of POSTing it), then the two MODIFIED events. ``cpu_ms_per_pod`` is the
    process CPU time spent in those calls only (the fake's and driver's own work is not counted),
    the median of ``--rounds`` rounds of ``--pods`` pods; ``per_pod_us`` splits it by step.
    ``cpu_ms_per_pod_mean`` is the mean of the rounds: the median can leave out a round that paid
    for a full garbage collection, the mean counts it. The garbage collector is set as the service
    sets it after its first load (:func:`app.server.app.freeze_after_load`).

    ``--gap-ms G`` sleeps G ms before each timed step (the sleep is not timed). The service does not
    run its steps back to back: it waits in its event loop for the next request or watch event, and
    on this 2-CPU VM a step that follows an idle wait costs 1.6-1.8x the CPU of the same step run
    hot (0.5 ms gaps: 1.29-1.62 -> 2.26-2.39 ms per pod), which is most of the difference between
    this bench and ``bench/cycle.py`` (the same handlers, timed inside the real service, cost about
    twice their figure here).

    Not counted, by design: HTTP (``bench/cycle.py``'s ``http_floor``), the watch stream's reads,
    the Binding POST.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/cyclecode.py [--nodes 500] [--pods 500] [--rounds 5]

One JSON object is printed on stdout; a wrong answer exits non-zero with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from app.client.watch import decode_event
from app.server import extender_routes
from app.server.app import create_app, freeze_after_load
from app.sources.events import EVENT_TYPES, Event
from bench.cycle import interpreter, new_pods, num_feasible_nodes_to_find, require_at_least
from bench.extender import BenchFailure, InMemorySource, build_cluster
from bench.fakeapi import PODS, FakeAPI

STEPS = ("watch", "filter", "prioritize", "bind")


async def _disconnect() -> dict[str, Any]:
    """The ASGI ``receive`` of a call whose client stays: the bind handler only asks if it left."""
    await asyncio.sleep(3600)
    return {"type": "http.disconnect"}


class CodeCycle:
    """The service and the fake's event maker in one process; :meth:`round` schedules pods and times the service.

    Args:
        nodes: cluster size (bench/extender.py ``build_cluster``).
        seed: the cluster's random seed.
        gap_ms: milliseconds the process sleeps before each timed step (not timed), as the service
            waits for its next request or event (0: the steps run back to back).
    """

    def __init__(self, nodes: int, seed: int, gap_ms: float = 0.0) -> None:
        self.gap_s = gap_ms / 1000.0
        cluster = build_cluster(nodes, seed)
        self.names = cluster.names
        self.source = InMemorySource(cluster)
        self.app = create_app(self.source)
        self.state = self.app.state.service
        self.fake = FakeAPI(kubelet_delay=0.0)
        self.window = num_feasible_nodes_to_find(nodes)
        self._start = 0
        self._seen = 0  # events of the fake's pod log already applied

    async def load(self) -> None:
        """Fill the cache with the cluster (a full list per kind, as after the first LIST), then settle
        the garbage collector as the service's lifespan does once its first load is in
        (:func:`app.server.app.freeze_after_load`): without it, full collections walk the bench's own
        copy of the cluster and the fake's pods, which the service process does not hold."""
        await self.source.start(self.state.cache)
        await freeze_after_load(self.source)

    def _apply_new_events(self, spent: dict[str, float]) -> None:
        """Decode and apply the fake's pod events not applied yet, timing only the service's part."""
        log = self.fake.log.get(PODS, [])
        cache = self.state.cache
        clock = time.process_time
        for _, line in log[self._seen :]:
            self._idle()
            t0 = clock()
            event = decode_event(line)
            meta = event.object.get("metadata")
            if isinstance(meta, dict):  # what the Kubernetes source's fill() drops on arrival
                meta.pop("managedFields", None)
            cache.apply(Event("Pod", EVENT_TYPES[event.type], event.object))
            spent["watch"] += clock() - t0
        self._seen = len(log)

    def _idle(self) -> None:
        """Sleep ``gap_ms`` (blocking, so the CPU really goes idle, as the service's loop does between
        its reads), before a timed step."""
        if self.gap_s > 0:
            time.sleep(self.gap_s)

    async def _verb(self, path: str, body: dict[str, Any], spent: dict[str, float]) -> Any:
        verb, handler = extender_routes.VERBS[path]
        data = orjson.dumps(body)
        self._idle()
        t0 = time.process_time()
        code, answer = await extender_routes._answer(self.state, verb, handler, data, _disconnect)
        spent[verb] += time.process_time() - t0
        if code != 200:
            raise BenchFailure(f"{path}: HTTP {code}: {answer[:300]!r}")
        return orjson.loads(answer)

    async def round(self, count: int, number: int) -> dict[str, float]:
        """Schedule ``count`` new pods; seconds of process CPU spent in the service per step."""
        spent = dict.fromkeys(STEPS, 0.0)
        pods = [self.fake.create_pod("default", pod) for pod in new_pods(count, number)]
        self._apply_new_events(spent)
        nodes = len(self.names)
        for pod in pods:
            candidates = [self.names[(self._start + k) % nodes] for k in range(self.window)]
            self._start = (self._start + self.window) % nodes
            res = await self._verb("/filter", {"Pod": pod, "Nodes": None, "NodeNames": candidates}, spent)
            feasible = res.get("NodeNames") or []
            if res.get("Error") or not feasible:
                raise BenchFailure(f"/filter {pod['metadata']['name']}: {orjson.dumps(res)[:300]!r}")
            scores = await self._verb("/prioritize", {"Pod": pod, "Nodes": None, "NodeNames": feasible}, spent)
            best = max(scores, key=lambda e: e["Score"])["Host"]
            meta = pod["metadata"]
            body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": best}
            res = await self._verb("/bind", body, spent)
            if res.get("Error"):
                raise BenchFailure(f"/bind {meta['name']} to {best}: {res['Error']}")
            # the API server's answer to the service's Binding: MODIFIED (bound), then the kubelet's (Running)
            binding = {"metadata": {"uid": meta["uid"]}, "target": {"name": best}}
            status, answer = self.fake.bind(meta["namespace"], meta["name"], binding)
            if status != 201:
                raise BenchFailure(f"fake bind of {meta['name']}: {status} {answer}")
            while self.fake.pending_kubelet:  # the kubelet's update is due at once (kubelet_delay 0)
                await asyncio.sleep(0)
            self._apply_new_events(spent)
        return spent


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load the cluster, play a warm-up round and ``args.rounds`` measured rounds; the result object."""
    cycle = CodeCycle(args.nodes, args.seed, args.gap_ms)
    await cycle.load()
    await cycle.round(max(1, args.pods // 2), 0)  # warm-up: first-use caches and allocations
    rounds = [await cycle.round(args.pods, i + 1) for i in range(args.rounds)]
    per_pod_ms = [sum(r.values()) / args.pods * 1e3 for r in rounds]
    median = statistics.median(per_pod_ms)
    return {
        "nodes": args.nodes,
        "pods": args.pods,
        "candidates_per_filter": cycle.window,
        "gap_ms": args.gap_ms,
        "cpu_ms_per_pod": round(median, 3),
        "cpu_ms_per_pod_mean": round(statistics.fmean(per_pod_ms), 3),
        "cpu_ms_per_pod_rounds": [round(x, 3) for x in per_pod_ms],
        "per_pod_us": {s: round(statistics.median(r[s] for r in rounds) / args.pods * 1e6, 1) for s in STEPS},
        "watch_events_per_pod": 3,
        "python": interpreter(),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=500, help="nodes (default 500)")
    p.add_argument("--pods", type=int, default=500, help="pods per round (default 500)")
    p.add_argument("--rounds", type=int, default=5, help="measured rounds; the median is reported (default 5)")
    p.add_argument("--seed", type=int, default=1, help="the cluster's random seed (default 1)")
    p.add_argument(
        "--gap-ms",
        type=float,
        default=0.0,
        help="sleep this long before each timed step, as the service idles between requests (default 0)",
    )
    args = p.parse_args(argv)
    require_at_least(p, args, 1, ("nodes", "pods", "rounds"))
    require_at_least(p, args, 0, ("gap_ms",))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench and print its JSON; exit 1 with the reason on a wrong answer."""
    args = parse_args(argv)
    try:
        result = asyncio.run(run(args))
    except BenchFailure as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
