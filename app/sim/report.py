"""Presenting runs: the rich table beside the published numbers, the JSON records and the PNG plot."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table

from app.sim.policies import PUBLISHED
from app.sim.published import Published
from app.sim.run import ALLOCATION_POINTS, FRAGMENTATION_POINTS, SimResult


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def by_policy(results: list[SimResult]) -> dict[str, list[SimResult]]:
    """Results grouped by policy, in first-seen order."""
    out: dict[str, list[SimResult]] = {}
    for r in results:
        out.setdefault(r.policy, []).append(r)
    return out


def summary_table(results: list[SimResult], published: Published | None, workload: str) -> Table:
    """One row per policy: mean over seeds of our metrics, the published mean (seeds 42-51) beside each."""
    table = Table(title=f"koord sim: {workload}")
    table.add_column("policy", style="bold")
    table.add_column("seeds", justify="right")
    for p in ALLOCATION_POINTS:
        table.add_column(f"alloc@{p}%", justify="right")
        table.add_column("published", justify="right", style="dim")
    for p in FRAGMENTATION_POINTS:
        table.add_column(f"frag@{p}%", justify="right")
        table.add_column("published", justify="right", style="dim")
    table.add_column("failed pods", justify="right")
    table.add_column("wall s", justify="right")
    for policy, runs in by_policy(results).items():
        refs = PUBLISHED.get(policy, ())
        cells: list[str] = [policy, ", ".join(str(r.seed) for r in runs)]
        for p in ALLOCATION_POINTS:
            cells.append(_fmt(_mean([r.allocation_at(p) for r in runs])))
            cells.append(_published(published, "allocation", workload, refs, p))
        for p in FRAGMENTATION_POINTS:
            cells.append(_fmt(_mean([r.frag.get(p) for r in runs])))
            cells.append(_published(published, "frag_ratio", workload, refs, p))
        cells.append(f"{statistics.fmean(sum(r.failed.values()) for r in runs):.0f}")
        cells.append(f"{statistics.fmean(r.wall_seconds for r in runs):.1f}")
        table.add_row(*cells)
    return table


def _published(published: Published | None, table: str, workload: str, refs: tuple[str, ...], p: int) -> str:
    if published is None or not refs:
        return "-"
    parts = []
    for ref in refs:
        value = published.mean(table, workload, ref, p)
        if value is not None:
            parts.append(f"{value:.2f} {ref.split('-', 1)[1]}")
    return "\n".join(parts) or "-"


def failures_table(results: list[SimResult], workload: str = "") -> Table | None:
    """Failed pods by reason per policy (summed over seeds); None when nothing failed. ``workload``
    names the pod list in the title when given."""
    rows: list[tuple[str, str, int]] = []
    for policy, runs in by_policy(results).items():
        total: Counter[str] = Counter()
        for r in runs:
            total.update(r.failed)
        rows += [(policy, reason, n) for reason, n in total.most_common()]
    if not rows:
        return None
    table = Table(title=f"failed pods by reason (all seeds){f': {workload}' if workload else ''}")
    table.add_column("policy", style="bold")
    table.add_column("reason")
    table.add_column("pods", justify="right")
    for row in rows:
        table.add_row(row[0], row[1], str(row[2]))
    return table


def json_records(results: list[SimResult]) -> list[dict[str, Any]]:
    """The JSON output: one record per run (see :meth:`SimResult.to_json`)."""
    return [r.to_json() for r in results]


def plot(results: list[SimResult], path: Path, published: Published | None, workload: str) -> None:
    """PNG of allocation ratio against arrived workload, one line per policy (mean over seeds),
    with the published mean of the matching policies dashed.

    Raises:
        OSError: the file cannot be written.
    """
    plot_workloads([(workload, results, published)], path)


def plot_workloads(groups: list[tuple[str, list[SimResult], Published | None]], path: Path) -> None:
    """One PNG with a panel per (workload, its results, its published figures), as :func:`plot` draws
    one (a sweep over several pod lists); panels in rows of at most three.

    Raises:
        OSError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, max(1, len(groups)))
    rows = -(-len(groups) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(8 * cols if cols == 1 else 6 * cols, 5 * rows), squeeze=False)
    for ax, (workload, results, published) in zip(axes.flat, groups, strict=False):
        _draw(ax, results, published, workload)
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _draw(ax: Any, results: list[SimResult], published: Published | None, workload: str) -> None:
    for policy, runs in by_policy(results).items():
        n = min(len(r.curve) for r in runs)
        if n == 0:
            continue
        mean = [statistics.fmean(r.curve[i] for r in runs) for i in range(n)]
        (line,) = ax.plot(range(n), mean, label=policy)
        for ref in PUBLISHED.get(policy, ()) if published is not None else ():
            curve = published.mean_curve(workload, ref) if published is not None else []
            if curve:
                ax.plot(range(len(curve)), curve, "--", color=line.get_color(), alpha=0.6, label=f"{ref} (published)")
    ax.plot([0, 100], [0, 100], ":", color="grey", linewidth=0.8)
    ax.set_xlabel("arrived workload (% of GPU capacity)")
    ax.set_ylabel("GPU allocation ratio (%)")
    ax.set_title(f"koord sim: {workload}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
