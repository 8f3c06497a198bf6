"""How much prod memory the Mid tier reclaims on the GenAI pod-usage trace, against the current-usage figure.

What it does
    Replays ``pod_memory_util_anon.csv`` of the Alibaba GenAI 2026 trace (1-minute samples of each pod's memory
    utilisation, 208 pods over ~22.8 h; read from the tarball in place, never copied) through the agent's
    Prediction (:mod:`agent.prediction`: decaying histograms, 24 h memory half-life, p98 with the 10 % safety
    margin) and the manager's MidResource formula (:mod:`app.manager.mid`, default colocation strategy).

Assumptions (the trace has memory only, as a fraction of each pod's limit)
    - every pod is a koord-prod pod whose memory request = limit = ``--request-gib`` (16 GiB); its usage is
      ``value x request``; no cpu is replayed, so only memory figures are printed;
    - pods are placed in trace order ``--pods-per-node`` (8) to a node whose capacity is the sum of their
      requests (a node fully allocated to prod: everything Mid gets is reclaimed from prod); no system usage;
    - ``cold_start``: upstream's 24 h cold start counts from each pod's creation. The trace starts with the pods
      already running, so the main figure treats them as older than 24 h (``assume_warm``); with pods created
      at the trace's start nothing could be lent during the whole 22.8 h trace, which the output says too.

Figures, each as a percentage of the prod memory requested, over the hourly checkpoints after ``--warmup-hours``
    ``mid_pct``: kubernetes.io/mid-memory (prod reclaimable by prediction, capped by the node's unused memory);
    ``unused_now_pct``: request minus the usage of that minute: what a current-usage figure frees from prod;
    ``batch_pct``: kubernetes.io/batch-memory by upstream's default batch formula (reclaim 65 %, policy usage).
    ``mid_pods_fit``: Mid pods of ``--mid-pod-gib`` (4 GiB) that fit the nodes' mid-memory (average of the hourly
    checkpoints): how many more pods the Mid tier places on nodes prod has fully allocated (prod alone: 0);
    ``mid_shortfall_minutes``: node-minutes in which usage rose above request - mid-memory (Mid pods using
    all they were lent would have met prod's peak); ``unused_shortfall_minutes`` likewise for ``unused_now``.

Run from the repository root::

    .venv/bin/python bench/midtrace.py [--trace PATH] [--hours 23] [--nodes 0] [--pods-per-node 8] [--cold]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
import tarfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.prediction.peak import PodView, prod_reclaimable  # noqa: E402
from agent.prediction.server import PodUsage, PredictionConfig, PredictServer  # noqa: E402
from app.api.koordext import PriorityClass, QoSClass  # noqa: E402
from app.manager.batch import MetricInput, NodeInput, PodInput, calculate_batch  # noqa: E402
from app.manager.colocation import ColocationStrategy  # noqa: E402
from app.manager.mid import calculate_mid  # noqa: E402

GI = 1 << 30
SHARED = Path(os.environ.get("KOORD_SHARED_DIR") or REPO.parent / "shared")
TRACE = SHARED / "data" / "alibaba-genai-v2026-pod-usage" / "pod_memory_util_anon.tar.gz"


def load(path: Path, hours: float) -> tuple[dict[str, dict[int, float]], int]:
    """``{pod: {minute: utilisation}}`` of the first ``hours`` hours, and the first minute.

    The CSV is in time order (checked while reading): reading stops at the first row past ``hours``.

    Raises:
        FileNotFoundError: no trace at ``path``.
        ValueError: the tarball holds no CSV of the expected columns.
    """
    rows: list[tuple[int, str, float]] = []
    with tarfile.open(path, "r:gz") as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith(".csv")), None)
        if member is None:
            raise ValueError(f"{path}: no CSV inside")
        fh = tar.extractfile(member)
        if fh is None:
            raise ValueError(f"{path}: {member.name} is not a file")
        reader = csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8"))
        if not reader.fieldnames or not {"value", "timestamp_anon", "container_ip"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: expected columns value, timestamp_anon, container_ip")
        for row in reader:
            minute = int(float(row["timestamp_anon"]) // 60)
            if rows and minute < rows[-1][0]:
                raise ValueError(f"{path}: rows are not in time order at minute {minute}")
            if rows and minute - rows[0][0] >= hours * 60:
                break
            rows.append((minute, row["container_ip"], float(row["value"])))
    if not rows:
        raise ValueError(f"{path}: no rows")
    start = rows[0][0]
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for minute, pod, value in rows:
        if minute - start < hours * 60:
            series[pod][minute] = min(max(value, 0.0), 1.0)
    return dict(series), start


def replay(
    series: dict[str, dict[int, float]],
    start: int,
    *,
    hours: float,
    pods_per_node: int,
    nodes: int,
    request: int,
    warmup_hours: float,
    assume_warm: bool,
    mid_pod: int = 4 * GI,
) -> dict[str, Any]:
    """Replay the trace minute by minute; the figures of the module docstring."""
    pod_names = sorted(series, key=lambda p: (min(series[p]), p))
    groups = [pod_names[i : i + pods_per_node] for i in range(0, len(pod_names), pods_per_node)]
    if nodes:
        groups = groups[:nodes]
    strategy = ColocationStrategy.of({"enable": True})
    created = (start * 60.0 - 86400.0 - 60.0) if assume_warm else start * 60.0
    totals: dict[str, list[float]] = defaultdict(list)
    shortfall = {"mid": 0, "unused_now": 0}
    node_minutes = 0
    last_mid: dict[int, int] = {}
    minutes = int(hours * 60)
    servers = [PredictServer(PredictionConfig(checkpoint_dir=Path("/nonexistent-midtrace"))) for _ in groups]
    for m in range(minutes):
        minute = start + m
        now = minute * 60.0
        hourly = m > 0 and m % 60 == 0 and m >= warmup_hours * 60
        sums = {"request": 0.0, "mid": 0.0, "unused_now": 0.0, "batch": 0.0, "fit": 0.0}
        for i, pods in enumerate(groups):
            usage = {p: series[p][minute] * request for p in pods if minute in series[p]}
            if not usage:
                continue
            server = servers[i]
            samples = [PodUsage(p, PriorityClass.PROD, 0.0, u) for p, u in usage.items()]
            total_used = sum(usage.values())
            server.train(samples, (0.0, total_used), now)
            node_minutes += 1
            cap = request * len(pods)
            if i in last_mid and total_used > cap - last_mid[i]:
                shortfall["mid"] += 1
            if not hourly and i in last_mid:
                continue
            views = [PodView(p, p, PriorityClass.PROD, 0, request, created) for p in pods if p in server.models]
            try:
                _, reclaim_mem = prod_reclaimable(server, views, (0, cap), now)
            except LookupError:
                reclaim_mem = 0
            metric = MetricInput(
                update_time=now,
                system_usage={"cpu": 0, "memory": 0},
                pods={f"d/{p}": ("koord-prod", {"cpu": 0, "memory": int(u)}) for p, u in usage.items()},
                node_usage={"cpu": 0, "memory": int(total_used)},
                prod_reclaimable={"cpu": 0, "memory": reclaim_mem},
            )
            node = NodeInput(capacity={"cpu": 0, "memory": cap}, allocatable={"cpu": 0, "memory": cap})
            pod_in = [
                PodInput(f"d/{p}", "Running", PriorityClass.PROD, QoSClass.LS, {"cpu": 0, "memory": request})
                for p in pods
            ]
            mid = calculate_mid(strategy, node, pod_in, metric, now).memory
            last_mid[i] = mid
            if hourly:
                batch = calculate_batch(strategy, node, pod_in, metric, now).memory
                sums["request"] += cap
                sums["mid"] += mid
                sums["unused_now"] += cap - total_used
                sums["batch"] += batch
                sums["fit"] += mid // mid_pod
        if hourly and sums["request"]:
            for key in ("mid", "unused_now", "batch"):
                totals[key].append(100.0 * sums[key] / sums["request"])
            totals["fit"].append(sums["fit"])
        # a current-usage figure lends what is unused now; it falls short when usage rises next minute
        for pods in groups:
            nxt = [series[p][minute + 1] for p in pods if minute + 1 in series[p] and minute in series[p]]
            cur = [series[p][minute] for p in pods if minute + 1 in series[p] and minute in series[p]]
            if len(nxt) == len(pods) and sum(nxt) > sum(cur):
                shortfall["unused_now"] += 1

    def avg(xs: list[float]) -> float | None:
        return round(sum(xs) / len(xs), 2) if xs else None

    return {
        "trace_hours": hours,
        "nodes": len(groups),
        "pods": sum(len(g) for g in groups),
        "assume_warm": assume_warm,
        "hourly_points": len(totals["mid"]),
        "mid_pct": avg(totals["mid"]),
        "unused_now_pct": avg(totals["unused_now"]),
        "batch_pct": avg(totals["batch"]),
        "mid_pct_last": round(totals["mid"][-1], 2) if totals["mid"] else None,
        "mid_pods_fit": avg(totals["fit"]),
        "mid_shortfall_minutes": shortfall["mid"],
        "unused_shortfall_minutes": shortfall["unused_now"],
        "node_minutes": node_minutes,
    }


def main() -> None:
    """Parse the options, replay, print one JSON object (exit 2 when the trace is absent)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--hours", type=float, default=23.0)
    parser.add_argument("--nodes", type=int, default=0, help="replay only the first N nodes (0: all)")
    parser.add_argument("--pods-per-node", type=int, default=8)
    parser.add_argument("--request-gib", type=int, default=16)
    parser.add_argument("--warmup-hours", type=float, default=6.0)
    parser.add_argument("--mid-pod-gib", type=int, default=4, help="memory of one Mid pod, for mid_pods_fit")
    parser.add_argument("--cold", action="store_true", help="pods created at the trace's start (24 h cold start)")
    args = parser.parse_args()
    if not args.trace.is_file():
        sys.stderr.write(f"no trace at {args.trace}\n")
        raise SystemExit(2)
    series, start = load(args.trace, args.hours)
    result = replay(
        series,
        start,
        hours=args.hours,
        pods_per_node=args.pods_per_node,
        nodes=args.nodes,
        request=args.request_gib * GI,
        warmup_hours=args.warmup_hours,
        assume_warm=not args.cold,
        mid_pod=args.mid_pod_gib * GI,
    )
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
