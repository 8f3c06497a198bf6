"""Benchmark of ``koord sim``: one seed of a trace per policy, every pod over HTTP, printing JSON.

What it measures
    For each policy: the wall seconds of the scheduling loop (service start and cluster load
    excluded), pods arrived and scheduled, the allocation ratio at 100 % arrived, and where the
    time goes per verb: ``client_s`` (waiting on the HTTP call, client side) against ``server_s``
    (inside the handler, from the service's latency histogram); the difference is HTTP, ASGI and
    client overhead. ``other_s`` is the rest of the loop (pod creation in the source, node fit,
    metrics). With ``--profile`` it adds the top functions by own time of the server's thread, where
    the sim's client runs too, as a coroutine on the server's loop (``--profile-dump PREFIX`` also
    writes the profile for ``python -m pstats``). ``figures`` holds what the run decided, to check
    that a speed-up changes no decision: the allocation ratio at 100 % and 130 %, the fragmentation
    ratio at 70 % and 90 %, the failed pods, and a digest of the whole allocation curve.

Targets: issue #3, the default trace at inflate 1.3, one seed, <= 90 s wall per policy on one core;
issue 13, one FragmentationAware seed <= 30 s on one core (``--cpu N`` pins the whole process, service
and client, to CPU N: the figure of one core, steadier than an unpinned run on a shared machine).

Run from the repository root::

    .venv/bin/python bench/sim.py [--policy FragmentationAware ...] [--seed 42] [--inflate 1.3]
        [--nodes ../shared/data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv]
        [--pods ../shared/data/alibaba-gpu-v2023/csv/openb_pod_list_default.csv] [--limit N] [--profile]
        [--cpu N]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import pstats
import sys
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "alibaba-gpu-v2023" / "csv"
sys.path.insert(0, str(REPO))

from app.sim.experiment import default_tie_break, events_for, load_trace  # noqa: E402
from app.sim.fragmentation import deviceshare_fragmentation  # noqa: E402
from app.sim.policies import POLICIES, builtin_policy, with_trace_workload  # noqa: E402
from app.sim.run import Simulation  # noqa: E402
from app.sim.service import InProcessService  # noqa: E402


def _top(profile: cProfile.Profile, n: int = 12) -> list[str]:
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(n)
    lines = [ln.strip() for ln in out.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.startswith("ncalls")), 0)
    return lines[start + 1 : start + 1 + n]


def bench(policy_name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One run of ``policy_name``; the JSON record described in the module docstring."""
    trace = load_trace(args.nodes, args.pods, "static")
    events = events_for(trace, "static", args.seed, args.inflate)[: args.limit or None]
    policy = with_trace_workload(builtin_policy(policy_name), trace.pods)  # as run_one does
    with InProcessService(policy.config) as service:
        sim = Simulation(
            service,
            trace.nodes,
            policy,
            args.seed,
            deviceshare_fragmentation(trace.pods),
            tie_break=args.tie_break or default_tie_break("static"),
        )
        sim.load_cluster()
        prof = cProfile.Profile()
        if args.profile:
            service.read(prof.enable)  # the loop's thread: the service and the sim's client
        result = sim.run(events)
        if args.profile:
            service.read(prof.disable)
            if args.profile_dump:
                prof.dump_stats(f"{args.profile_dump}-{policy_name}.prof")
    verbs = {
        v: {"client_s": round(result.client_seconds[v], 2), "server_s": round(result.server_seconds[v], 2)}
        for v in result.client_seconds
    }
    summary = result.to_json()
    record: dict[str, Any] = {
        "policy": policy_name,
        "seed": args.seed,
        "pods_arrived": result.arrived_pods,
        "pods_scheduled": result.scheduled_pods,
        "wall_seconds": round(result.wall_seconds, 2),
        "allocation_at_100": None if result.allocation_at(100) is None else round(result.allocation_at(100) or 0, 2),
        "verbs": verbs,
        "other_s": round(result.wall_seconds - sum(result.client_seconds.values()), 2),
        "problems": len(result.problems),
        # the run's decisions, to check a speed-up changes none: the whole allocation curve's digest
        "figures": {
            "gpu_allocation_ratio": summary["gpu_allocation_ratio"],
            "frag_ratio": summary["frag_ratio"],
            "failed_pods": sum(result.failed.values()),
            "curve_digest": hashlib.sha256(orjson.dumps(result.curve)).hexdigest()[:16],
        },
    }
    if args.profile:
        record["profile"] = {"loop": _top(prof, 24)}
    return record


def main() -> None:
    """Parse the arguments, run each policy, print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", action="append", choices=POLICIES)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--inflate", type=float, default=1.3)
    parser.add_argument("--nodes", type=Path, default=DATA / "openb_node_list_gpu_node.csv")
    parser.add_argument("--pods", type=Path, default=DATA / "openb_pod_list_default.csv")
    parser.add_argument("--limit", type=int, default=0, help="only the first N arrivals (0: all)")
    parser.add_argument("--tie-break", choices=("order", "name", "random"), help="default: order (static)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-dump", metavar="PREFIX", help="with --profile: PREFIX-<policy>.prof")
    parser.add_argument("--cpu", type=int, help="pin the process (service and client threads) to this CPU")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})  # before the service's thread starts: it inherits the mask
    runs = [bench(p, args) for p in args.policy or list(POLICIES)]
    sys.stdout.write(orjson.dumps({"runs": runs}, option=orjson.OPT_INDENT_2).decode() + "\n")


if __name__ == "__main__":
    main()
