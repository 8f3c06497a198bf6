"""Simulated LowNodeLoad rebalance on the Alibaba GPU trace (cluster-trace-gpu-v2023, "openb").

What it does
    Places the trace's pods first-fit by cpu/memory requests into the first --packed fraction of the
    nodes (packed head, idle tail: a skewed placement with hot spots), gives each pod a usage of
    ``requests x factor`` (factor uniform in [--min-factor, 1], seeded) and a node system usage of 2 %
    of its cpu, then runs descheduler rounds: NodeMetrics from the current placement, one
    LowNodeLoad plan (the real planner, nodeFit on, anomaly detection off so every round acts),
    and every planned eviction is applied as a move to the target nodeFit chose. It stops when a
    round plans nothing (stable) or after --max-rounds.

What it reports (JSON)
    cpu usage percent over nodes before and after (max, p90, stddev, mean), nodes over the high
    threshold before and after, pods moved, rounds, wall seconds, why the last round stopped,
    and ``over_high_after_move``: moves that pushed a target node over its high
    threshold (must be 0).

Run from the repository root::

    .venv/bin/python bench/descheduler.py [--nodes CSV] [--pods CSV] [--limit-nodes 300]
        [--high 70] [--low 40] [--seed 42]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "alibaba-gpu-v2023" / "csv"
sys.path.insert(0, str(REPO))

from app.api.timeparse import format_time  # noqa: E402
from app.cache.podinfo import parse_pod  # noqa: E402
from app.descheduler.config import parse_low_node_load_args  # noqa: E402
from app.descheduler.lownodeload import LowNodeLoad  # noqa: E402
from app.descheduler.model import ClusterView, NodeView, PodView  # noqa: E402
from app.sim.trace import load_nodes, load_pods  # noqa: E402

MIB = 1024 * 1024
OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}]


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {
        "max": round(ordered[-1], 2),
        "p90": round(p90, 2),
        "stddev": round(statistics.pstdev(ordered), 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=Path, default=DATA / "openb_node_list_gpu_node.csv")
    parser.add_argument("--pods", type=Path, default=DATA / "openb_pod_list_default.csv")
    parser.add_argument("--limit-nodes", type=int, default=300)
    parser.add_argument("--high", type=float, default=70.0, help="cpu/memory high threshold percent")
    parser.add_argument("--low", type=float, default=40.0, help="cpu/memory low threshold percent")
    parser.add_argument("--min-factor", type=float, default=0.4, help="usage = requests x U(min-factor, 1)")
    parser.add_argument("--packed", type=float, default=0.7, help="fraction of nodes the placement fills")
    parser.add_argument("--max-rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=42)
    opts = parser.parse_args()

    trace_nodes = load_nodes(opts.nodes)[: opts.limit_nodes]
    trace_pods = load_pods(opts.pods, {n.model for n in trace_nodes if n.model})
    rng = random.Random(opts.seed)
    nodes = {
        n.name: NodeView(
            n.name, {"kubernetes.io/hostname": n.name}, {"cpu": n.cpu_milli, "memory": n.memory_mib * MIB, "pods": 110}
        )
        for n in trace_nodes
    }
    order = list(nodes)
    requested = {n: {"cpu": 0, "memory": 0} for n in order}
    placement: dict[str, str] = {}
    pods: dict[str, PodView] = {}
    usage: dict[str, dict[str, int]] = {}
    head = order[: max(1, int(opts.packed * len(order)))]
    for tp in trace_pods:  # first-fit into the head: packed head, idle tail
        req = {"cpu": tp.cpu_milli, "memory": tp.memory_mib * MIB}
        for n in head:
            alloc = nodes[n].allocatable
            if all(requested[n][r] + req[r] <= alloc[r] for r in req):
                break
        else:
            continue
        obj = {
            "metadata": {
                "name": tp.name,
                "namespace": "trace",
                "uid": tp.name,
                "ownerReferences": OWNER,
                "creationTimestamp": format_time(1_700_000_000 + (tp.creation_time or 0)),
            },
            "spec": {
                "nodeName": n,
                "containers": [
                    {
                        "name": "c",
                        "resources": {"requests": {"cpu": f"{tp.cpu_milli}m", "memory": f"{tp.memory_mib}Mi"}},
                    }
                ],
            },
            "status": {"phase": "Running"},
        }
        pods[tp.name] = PodView(parse_pod(obj), obj)
        placement[tp.name] = n
        for r in req:
            requested[n][r] += req[r]
        factor = rng.uniform(opts.min_factor, 1.0)
        usage[tp.name] = {r: int(v * factor) for r, v in req.items()}
    system = {n: {"cpu": int(0.02 * nodes[n].allocatable["cpu"]), "memory": 0} for n in order}

    def cpu_percent() -> list[float]:
        used = {n: system[n]["cpu"] for n in order}
        for p, n in placement.items():
            used[n] += usage[p]["cpu"]
        return [100.0 * used[n] / nodes[n].allocatable["cpu"] for n in order]

    args = parse_low_node_load_args(
        {
            "highThresholds": {"cpu": opts.high, "memory": opts.high},
            "lowThresholds": {"cpu": opts.low, "memory": opts.low},
            "anomalyCondition": {"consecutiveAbnormalities": 1},
        }
    )
    plugin = LowNodeLoad(args)
    before_pct = cpu_percent()
    before = _spread(before_pct)
    last_messages: list[str] = []
    moved = rounds = over = 0
    now = 1_800_000_000.0
    started = time.perf_counter()
    for rounds in range(1, opts.max_rounds + 1):  # noqa: B007
        by_node: dict[str, list[PodView]] = {n: [] for n in order}
        metrics: dict[str, dict[str, Any]] = {
            n: {
                "metadata": {"name": n},
                "status": {
                    "updateTime": format_time(now),
                    "nodeMetric": {"systemUsage": {"resources": {"cpu": f"{system[n]['cpu']}m", "memory": "0"}}},
                    "podsMetric": [],
                },
            }
            for n in order
        }
        for n in order:
            nodes[n].requested = {"cpu": 0, "memory": 0}
        for p, n in placement.items():
            pods[p].info.node_name = n
            by_node[n].append(pods[p])
            metrics[n]["status"]["podsMetric"].append(
                {
                    "namespace": "trace",
                    "name": p,
                    "podUsage": {"resources": {"cpu": f"{usage[p]['cpu']}m", "memory": str(usage[p]["memory"])}},
                }
            )
            for r in ("cpu", "memory"):
                nodes[n].requested[r] += pods[p].info.requests.get(r, 0)
        result = plugin.balance(ClusterView(nodes, by_node, metrics, [], now))
        last_messages = list(result.messages)
        reasons: dict[str, int] = {}
        for skipped in result.skipped:
            reasons[skipped.reason] = reasons.get(skipped.reason, 0) + 1
        last_messages += [f"{count} pods skipped: {reason}" for reason, count in sorted(reasons.items())]
        if not result.evictions:
            break
        high = {n.name: n.high for n in result.nodes}
        for e in result.evictions:
            placement[e.name] = e.target
            moved += 1
        target_used: dict[str, dict[str, int]] = {}
        for p, n in placement.items():
            t = target_used.setdefault(n, dict(system[n]))
            for r in ("cpu", "memory"):
                t[r] += usage[p][r]
        over += sum(
            1
            for e in result.evictions
            if any(target_used[e.target][r] > high[e.target][r] for r in ("cpu", "memory") if r in high[e.target])
        )
        now += 120
    after_pct = cpu_percent()
    after = _spread(after_pct)
    report = {
        "nodes": len(order),
        "pods": len(placement),
        "thresholds": {"low": opts.low, "high": opts.high},
        "cpu_usage_percent_before": before,
        "cpu_usage_percent_after": after,
        "nodes_over_high_cpu_before": sum(1 for v in before_pct if v > opts.high),
        "nodes_over_high_cpu_after": sum(1 for v in after_pct if v > opts.high),
        "pods_moved": moved,
        "rounds": rounds,
        "over_high_after_move": over,
        "wall_s": round(time.perf_counter() - started, 2),
        "why_stopped": last_messages,
    }
    sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")


if __name__ == "__main__":
    main()
