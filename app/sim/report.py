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
    table.caption = missing_note(results)
    table.caption_justify = "left"
    return table


def missing_note(results: list[SimResult]) -> str | None:
    """Why the table has ``-`` where our figures should be, with what was measured instead; None when every
    point has a figure.

    An allocation point is missing when the arrived GPU requests never reached it: timed mode replays each
    pod once (no ``--inflate``), so a trace whose requests add up to less than the cluster's GPUs never
    reaches 100 %. A fragmentation point is missing when it was not reached either, or when the service
    recorded no per-GPU placement (DeviceShare not enabled by the policy). A node list without GPUs has no
    ratio at all.
    """
    if not results:
        return None
    lines = []
    if all(not r.curve for r in results):
        return "no figures: the node list has no GPU capacity, so no GPU ratio can be measured"
    missing_alloc = [p for p in ALLOCATION_POINTS if all(r.allocation_at(p) is None for r in results)]
    peaks = [(r, len(r.curve) - 1) for r in results if r.curve]
    top, peak = max(peaks, key=lambda rp: rp[1])
    if missing_alloc:
        lines.append(
            f"{', '.join(f'alloc@{p}%' for p in missing_alloc)}: not reached: the arrived GPU requests peaked at "
            f"{peak} % of GPU capacity (allocation there: {top.curve[-1]:.2f} %, {top.policy} seed {top.seed}). "
            "Timed mode replays each pod once, without the static protocol's --inflate."
        )
    for p in FRAGMENTATION_POINTS:
        if any(r.frag.get(p) is not None for r in results):
            continue
        why = (
            f"not reached (arrived requests peaked at {peak} %)"
            if peak < p
            else "the service recorded no per-GPU placement (DeviceShare is not enabled by this policy)"
        )
        lines.append(f"frag@{p}%: {why}")
    return "\n".join(lines) or None


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
    """PNG of one pod list's runs (see :func:`plot_workloads`).

    Raises:
        OSError: the file cannot be written.
    """
    plot_workloads([(workload, results, published)], path)


#: Where the policies differ: the arrived-workload range the zoomed panel shows (percent).
ZOOM = (80, 130)

#: Line styles of the published curves, one per reference policy of a policy (ours is solid).
_PUBLISHED_STYLES = ("--", "-.", ":")


def plot_workloads(groups: list[tuple[str, list[SimResult], Published | None]], path: Path) -> None:
    """One PNG with a row of three panels per (pod list, its results, its published figures):

    - GPU allocation ratio against arrived workload over the whole run, one solid line per policy (mean
      over seeds), each published reference curve of that policy in the same colour with its own dash
      style, and the labelled ``y = x`` line (every arrived GPU allocated);
    - the same over :data:`ZOOM` (80-130 % arrived), where the policies differ, with its own y range;
    - the fragmentation ratio at :data:`~app.sim.run.FRAGMENTATION_POINTS` as bars per policy, the
      published means beside ours (hatched).

    Raises:
        OSError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(groups), 3, figsize=(18, 5 * len(groups)), squeeze=False)
    for row, (workload, results, published) in zip(axes, groups, strict=True):
        colors = _draw_allocation(row[0], results, published, workload, None)
        _draw_allocation(row[1], results, published, workload, ZOOM)
        _draw_fragmentation(row[2], results, published, workload, colors)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _draw_allocation(
    ax: Any, results: list[SimResult], published: Published | None, workload: str, zoom: tuple[int, int] | None
) -> dict[str, Any]:
    """Allocation curves on ``ax`` (x limited to ``zoom`` when given); the colour of each policy."""
    colors: dict[str, Any] = {}
    low, high = zoom if zoom is not None else (0, None)
    seen: list[float] = []
    for policy, runs in by_policy(results).items():
        n = min(len(r.curve) for r in runs)
        if n == 0:
            continue
        mean = [statistics.fmean(r.curve[i] for r in runs) for i in range(n)]
        (line,) = ax.plot(range(n), mean, "-", linewidth=1.8, label=f"{policy} (koord sim)")
        colors[policy] = line.get_color()
        seen += mean[low:high]
        refs = PUBLISHED.get(policy, ()) if published is not None else ()
        for ref, style in zip(refs, _PUBLISHED_STYLES, strict=False):
            curve = published.mean_curve(workload, ref) if published is not None else []
            if curve:
                ax.plot(
                    range(len(curve)),
                    curve,
                    style,
                    color=line.get_color(),
                    linewidth=1.2,
                    label=f"{policy}: published {ref.split('-', 1)[-1]}",
                )
                seen += curve[low:high]
    ax.plot([0, 100], [0, 100], ":", color="grey", linewidth=0.8)
    if zoom is None:
        ax.annotate(
            "y = x (all arrived GPUs allocated)",
            xy=(60, 60),
            xytext=(8, 78),
            fontsize=8,
            color="grey",
            arrowprops={"arrowstyle": "->", "color": "grey"},
        )
        ax.set_title(f"koord sim: {workload}")
    else:
        ax.set_xlim(*zoom)
        if seen:
            ax.set_ylim(max(0.0, min(seen) - 2), min(100.0, max(seen) + 2) + 0.5)
        ax.set_title(f"{workload}: {zoom[0]}-{zoom[1]} % arrived, where the policies differ")
    ax.set_xlabel("arrived workload (% of GPU capacity)")
    ax.set_ylabel("GPU allocation ratio (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left" if zoom is None else "lower right")
    return colors


def _draw_fragmentation(
    ax: Any, results: list[SimResult], published: Published | None, workload: str, colors: dict[str, Any]
) -> None:
    """Fragmentation ratio bars per policy at each fragmentation point, published means hatched beside."""
    policies = list(by_policy(results).items())
    points = list(FRAGMENTATION_POINTS)
    width = 0.8 / max(1, 2 * len(policies))
    for i, (policy, runs) in enumerate(policies):
        ours = [_mean([r.frag.get(p) for r in runs]) for p in points]
        xs = [k + (2 * i) * width for k in range(len(points))]
        ax.bar(xs, [v or 0.0 for v in ours], width, color=colors.get(policy), label=f"{policy} (koord sim)")
        refs = PUBLISHED.get(policy, ()) if published is not None else ()
        theirs = [published.mean("frag_ratio", workload, refs[0], p) if published and refs else None for p in points]
        if any(v is not None for v in theirs):
            ax.bar(
                [x + width for x in xs],
                [v or 0.0 for v in theirs],
                width,
                color=colors.get(policy),
                alpha=0.45,
                hatch="//",
                label=f"{policy}: published {refs[0].split('-', 1)[-1]}",
            )
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(points))], [f"{p} % arrived" for p in points])
    ax.set_ylabel("GPU fragmentation ratio (%)")
    ax.set_title(f"{workload}: fragmentation")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
