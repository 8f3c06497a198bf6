"""The curve of an extender's CPU per pod against the candidate nodes kube-scheduler hands it, from real runs.

Reads the JSON lines of real-control-plane runs (one object per run, as the round-18 rotation script of
``docs/performance.md`` and ``bench/rig_rotations.py`` print them: ``nodes``, ``rotation``, ``mode``
(``plain``, ``noop``, or ``prod``, which ``bench/rig_rotations.py`` calls ``koord``), ``pods_per_s``,
``extender_cpu_ms_per_pod``), and draws, per mode with an extender, the CPU per pod of each run (dots) and the
median per node count (a line) against kube-scheduler v1.26's number of candidates for that many nodes
(``numFeasibleNodesToFind``: all below 100 nodes, else ``max(5, 50 - nodes / 125)`` percent, at least 100;
:func:`bench.cycle.num_feasible_nodes_to_find`). Writes an SVG and prints one JSON object with the medians.

    python bench/candidates_curve.py RUNS.jsonl docs/img/cpu-per-candidate.svg
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cycle import num_feasible_nodes_to_find  # noqa: E402

LABELS = {"noop": "Go no-op extender", "prod": "koord scheduler --role extender"}
#: other names of a series: ``bench/rig_rotations.py`` calls round 18's ``prod`` mode ``koord``
ALIASES = {"koord": "prod"}


def series(run: dict[str, Any]) -> str:
    """The series (a key of :data:`LABELS`, or a mode drawn in none) that ``run`` belongs to."""
    mode = str(run["mode"])
    return ALIASES.get(mode, mode)


def candidates(nodes: int) -> int:
    """The candidates kube-scheduler v1.26 hands the extender at ``nodes`` nodes
    (:func:`bench.cycle.num_feasible_nodes_to_find`)."""
    return num_feasible_nodes_to_find(nodes)


def read_runs(path: Path) -> list[dict[str, Any]]:
    """The runs of a JSON-lines file (blank lines and lines not starting with ``{`` skipped).

    Raises:
        ValueError: a line that is not a JSON object with ``nodes``, ``mode`` and ``extender_cpu_ms_per_pod``.
    """
    runs = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("{"):
            continue
        run = json.loads(line)
        if not isinstance(run, dict) or not {"nodes", "mode", "extender_cpu_ms_per_pod"} <= run.keys():
            raise ValueError(f"{path}:{number}: not a run object")
        runs.append(run)
    return runs


def medians(runs: Sequence[dict[str, Any]]) -> dict[str, dict[int, float]]:
    """Median extender CPU per pod (ms) by mode and candidates, modes with an extender only."""
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        cpu = run["extender_cpu_ms_per_pod"]
        name = series(run)
        if name in LABELS and cpu is not None:
            by[name][candidates(int(run["nodes"]))].append(float(cpu))
    return {mode: {c: round(statistics.median(v), 3) for c, v in sorted(cs.items())} for mode, cs in by.items()}


def plot(runs: Sequence[dict[str, Any]], out: Path) -> None:
    """Draw the runs and their medians into the SVG ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "koord"  # the same runs give the same file
    fig, ax = plt.subplots(figsize=(7, 4))
    for mode, curve in medians(runs).items():
        drawn = [r for r in runs if series(r) == mode and r["extender_cpu_ms_per_pod"]]
        xs = [candidates(int(r["nodes"])) for r in drawn]
        ys = [float(r["extender_cpu_ms_per_pod"]) for r in drawn]
        (line,) = ax.plot(list(curve), list(curve.values()), marker="o", label=f"{LABELS[mode]} (median)")
        ax.scatter(xs, ys, s=12, alpha=0.5, color=line.get_color())
        for c, y in curve.items():
            nodes = sorted({int(r["nodes"]) for r in runs if candidates(int(r["nodes"])) == c})
            ax.annotate(
                "/".join(map(str, nodes)) + " nodes",
                (c, y),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=7,
            )
    ax.set_xlabel("candidate nodes per pod (kube-scheduler's numFeasibleNodesToFind)")
    ax.set_ylabel("extender CPU per pod (ms, user + system)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Real control plane, 2,000 pods per run, 2-CPU VM", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: RUNS OUT; prints the medians as JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=Path, help="JSON lines of real-control-plane runs")
    p.add_argument("out", type=Path, help="the SVG to write")
    p.add_argument(
        "--settled-only",
        action="store_true",
        help="only runs made on a settled store (bench/rig_rotations.py --settle: a non-null 'settled')",
    )
    args = p.parse_args(argv)
    try:
        runs = read_runs(args.runs)
    except (OSError, ValueError) as exc:
        print(f"candidates_curve: {exc}", file=sys.stderr)
        return 2
    if args.settled_only:
        runs = [run for run in runs if run.get("settled")]
    plot(runs, args.out)
    print(json.dumps({m: {str(c): v for c, v in cs.items()} for m, cs in medians(runs).items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
