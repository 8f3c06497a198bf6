"""Benchmark of the Reservation plugin's cost on the extender verbs.

What it measures
    p50 / p99 of ``POST /filter`` and ``POST /prioritize`` over real HTTP (one keep-alive connection,
    500 candidate ``NodeNames`` per request, the wire sample's pod) on the synthetic 5,000-node snapshot of
    ``bench/extender.py``, twice: without Reservations (``baseline``) and with ``--reservations`` (2,000)
    Available Reservations pinned to random nodes, each holding 1-4 cpu and 2-8 Gi and owned by pods
    labelled ``app: resv-<i>`` (``with_reservations``). The wire pod owns none of them, so every call pays
    the non-owner check (reserved capacity counts as used). ``owner`` is the same pod labelled to own one
    reservation (its node is among the candidates), which adds the owner fit and the reservation score.
    ``ratio`` is ``p50(with) / p50(baseline)`` per verb.

Targets
    ratio <= 1.2 for filter and prioritize (non-owner).

Run from the repository root::

    .venv/bin/python bench/reservation.py [--nodes 5000] [--reservations 2000] [--calls 2000] [--seed 1]

The result is one JSON object on stdout; a wrong answer exits non-zero with the reason.
"""

from __future__ import annotations

import argparse
import copy
import http.client
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from app.server.app import create_app  # noqa: E402
from bench.extender import (  # noqa: E402
    BackgroundServer,
    Cluster,
    InMemorySource,
    bench_main,
    build_cluster,
    candidate_sets,
    check_filter,
    check_prioritize,
    free_port,
    load_wire_pod,
    measure,
    node_names_body,
)


def make_reservations(names: list[str], count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` Available Reservations on random nodes (see the module docstring)."""
    rng = random.Random(seed + 7)
    out = []
    for i in range(count):
        cpu, mem = rng.randint(1, 4), rng.randint(2, 8)
        requests = {"cpu": str(cpu), "memory": f"{mem}Gi"}
        node = rng.choice(names)
        out.append(
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Reservation",
                "metadata": {"name": f"resv-{i}", "uid": f"resv-uid-{i}"},
                "spec": {
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}},
                    "owners": [{"labelSelector": {"matchLabels": {"app": f"resv-{i}"}}}],
                    "ttl": "0s",
                    "allocateOnce": False,
                },
                "status": {"phase": "Available", "nodeName": node, "allocatable": requests},
            }
        )
    return out


def serve_and_measure(
    cluster: Cluster, bodies: dict[str, list[bytes]], candidates: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Serve ``cluster`` and measure filter/prioritize for each body set; returns per set per verb summaries."""
    app = create_app(InMemorySource(cluster))
    server = BackgroundServer(app, free_port())
    server.start()
    out: dict[str, Any] = {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            for label, set_bodies in bodies.items():
                w, n = args.warmup, args.calls
                out[label] = {
                    "filter": measure(conn, "/filter", set_bodies, w, n, check_filter(candidates, False)).summary(),
                    "prioritize": measure(
                        conn, "/prioritize", set_bodies, w, n, check_prioritize(candidates)
                    ).summary(),
                }
        finally:
            conn.close()
    finally:
        server.stop()
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000, help="nodes in the snapshot (default 5000)")
    p.add_argument("--reservations", type=int, default=2000, help="Available reservations (default 2000)")
    p.add_argument("--candidates", type=int, default=500, help="candidate nodes per request (default 500)")
    p.add_argument("--calls", type=int, default=2000, help="measured calls per verb (default 2000)")
    p.add_argument("--warmup", type=int, default=200, help="warm-up calls before each measurement (default 200)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    args = p.parse_args(argv)
    for flag in ("nodes", "reservations", "candidates", "calls"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be >= 1")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure without and with reservations and return the result object."""
    cluster = build_cluster(args.nodes, args.seed)
    pod = load_wire_pod()
    sets = candidate_sets(cluster.names, args.candidates, 50, args.seed)
    candidates = len(sets[0])
    plain = [node_names_body(pod, s) for s in sets]
    baseline = serve_and_measure(cluster, {"plain": plain}, candidates, args)["plain"]

    reservations = make_reservations(cluster.names, args.reservations, args.seed)
    cluster.objects["Reservation"] = reservations
    # the owner pod owns resv-0; its node is put into every candidate set
    owner = copy.deepcopy(pod)
    owner["metadata"]["labels"] = {**(owner["metadata"].get("labels") or {}), "app": "resv-0"}
    resv_node = reservations[0]["status"]["nodeName"]
    owner_sets = [s if resv_node in s else [resv_node, *s[1:]] for s in sets]
    owner_bodies = [node_names_body(owner, s) for s in owner_sets]
    measured = serve_and_measure(cluster, {"plain": plain, "owner": owner_bodies}, candidates, args)
    with_resv = measured["plain"]

    def ratio(verb: str) -> float:
        """p50 with reservations over p50 without, for ``verb``."""
        base = baseline[verb]["p50_ms"]
        return round(with_resv[verb]["p50_ms"] / base, 3) if base > 0 else 0.0

    return {
        "baseline": baseline,
        "with_reservations": with_resv,
        "owner": measured["owner"],
        "ratio": {"filter": ratio("filter"), "prioritize": ratio("prioritize")},
        "nodes": args.nodes,
        "reservations": args.reservations,
        "candidates_per_request": candidates,
        "calls": args.calls,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the result JSON; exit 1 with the reason on a wrong answer."""
    return bench_main(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
