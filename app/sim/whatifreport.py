"""The figures of a what-if run and how they are shown (table, JSON, plot).

Measured on the service's cache after the run (:func:`measure_cluster`, on the server's loop):

- ``requested``: per node, the pods' requests over allocatable, percent, for cpu and memory: mean, p90
  (linear interpolation) and max over the nodes with that allocatable.
- ``estimated``: LoadAwareScheduling's view of real use: the node's NodeMetric ``nodeUsage`` plus the
  estimate (:func:`app.plugins.loadaware.estimator.estimate_pod`, the configuration's own scaling factors)
  of every pod this run placed there, over allocatable, percent; mean, p90, max over the nodes with a
  NodeMetric; ``nodesOverThreshold``: nodes where some resource exceeds the configuration's
  ``usageThresholds`` (upstream defaults when LoadAwareScheduling is not enabled: ``loadAware`` false).
- ``gpu``: healthy GPUs in Devices; ``allocatedPercent``, the GPU share allocated (device-allocated
  annotations) over all healthy GPUs; ``fragmentedFreePercent``, the free GPU share that lies on GPUs
  already partly allocated (free capacity that no whole-GPU pod can use).
- ``quotas``: each ElasticQuota object's ``runtime`` and ``used`` as the ElasticQuota plugin computes them
  (empty when the configuration does not enable it; the plugin's own system and default quotas left out).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.api.quantity import QuantityError, parse_resource_list
from app.plugins.loadaware.args import LoadAwareSchedulingArgs
from app.plugins.loadaware.estimator import estimate_pod
from app.sim.allocations import read_gpu_usage
from app.sim.trace import MILLI_PER_GPU
from app.sim.whatifresult import ClusterFigures, WhatIfResult

if TYPE_CHECKING:
    from rich.table import Table

    from app.sim.service import InProcessService

#: Resources the utilisation figures cover.
RESOURCES: tuple[str, ...] = ("cpu", "memory")


def spread(values: list[float]) -> dict[str, float | None]:
    """``{"mean", "p90", "max"}`` of ``values`` (percent, two decimals); None each when empty."""
    if not values:
        return {"mean": None, "p90": None, "max": None}
    arr = np.asarray(values, dtype=np.float64)
    return {
        "mean": round(float(arr.mean()), 2),
        "p90": round(float(np.percentile(arr, 90)), 2),
        "max": round(float(arr.max()), 2),
    }


def _load_aware_args(service: InProcessService) -> tuple[LoadAwareSchedulingArgs, bool]:
    for plugin in service.state.framework.plugins:
        if plugin.name == "LoadAwareScheduling":
            args = getattr(plugin, "args", None)
            if isinstance(args, LoadAwareSchedulingArgs):
                return args, True
    return LoadAwareSchedulingArgs(), False


def _node_usage(metric: dict[str, Any] | None) -> dict[str, int] | None:
    if metric is None:
        return None
    usage = (((metric.get("status") or {}).get("nodeMetric") or {}).get("nodeUsage") or {}).get("resources")
    if usage is None:
        return None
    try:
        return parse_resource_list(usage)
    except QuantityError:
        return None


def _gpu_figures(service: InProcessService, names: list[str]) -> dict[str, Any]:
    cache = service.state.cache
    if not cache.objects.get("Device"):
        return {"gpus": 0, "allocatedPercent": None, "fragmentedFreePercent": None}
    rows = {n: i for i, n in enumerate(names)}
    usage = read_gpu_usage(cache, rows)
    gpus = int(usage.exists.sum())
    if gpus == 0:
        return {"gpus": 0, "allocatedPercent": None, "fragmentedFreePercent": None}
    used = np.where(usage.exists, np.clip(usage.used_milli, 0, MILLI_PER_GPU), 0)
    free = np.where(usage.exists, MILLI_PER_GPU - used, 0)
    partial = usage.exists & (used > 0) & (used < MILLI_PER_GPU)
    total_free = int(free.sum())
    return {
        "gpus": gpus,
        "allocatedPercent": round(float(used.sum()) * 100.0 / (gpus * MILLI_PER_GPU), 2),
        "fragmentedFreePercent": round(float(free[partial].sum()) * 100.0 / total_free, 2) if total_free else 0.0,
    }


def _quota_figures(service: InProcessService) -> dict[str, dict[str, Any]]:
    """``runtime`` and ``used`` of each ElasticQuota object of the cluster, by name (the plugin's own system
    and default quotas left out)."""
    from app.plugins.elasticquota.summary import quota_summaries

    declared = {
        str((q.get("metadata") or {}).get("name")) for q in service.state.cache.objects.get("ElasticQuota", {}).values()
    }
    if not declared:
        return {}
    for plugin in service.state.framework.plugins:
        if plugin.name == "ElasticQuota" and hasattr(plugin, "manager"):
            summaries = quota_summaries(plugin.manager)
            return {
                name: {"runtime": s["runtime"], "used": s["used"]} for name, s in summaries.items() if name in declared
            }
    return {}


async def measure_cluster(service: InProcessService, placed: dict[str, list[str]]) -> ClusterFigures:
    """The figures of the module docstring over the service's cache now; ``placed`` maps each node to the
    uids of the pods the run placed there. Call it on the server's loop."""
    cache = service.state.cache
    args, load_aware = _load_aware_args(service)
    thresholds = dict(args.usage_thresholds)
    metrics = cache.objects.get("NodeMetric", {})
    names = sorted(cache.nodes)
    requested: dict[str, list[float]] = {r: [] for r in RESOURCES}
    estimated: dict[str, list[float]] = {r: [] for r in RESOURCES}
    over = with_metric = 0
    figures = ClusterFigures(cpu_threshold=thresholds.get("cpu"))
    for name in names:
        node = cache.nodes[name]
        alloc = node.allocatable
        for r in RESOURCES:
            if alloc.get(r, 0) > 0:
                requested[r].append(node.requested.get(r, 0) * 100.0 / alloc[r])
        usage = _node_usage(metrics.get(name))
        if usage is None:
            continue
        with_metric += 1
        used = {r: usage.get(r, 0) for r in RESOURCES}
        for uid in placed.get(name, []):
            pod = cache.pods.get(uid)
            if pod is not None:
                for r, v in estimate_pod(pod, args).items():
                    if r in used:
                        used[r] += v
        exceeds = False
        for r in RESOURCES:
            if alloc.get(r, 0) > 0:
                percent = used[r] * 100.0 / alloc[r]
                estimated[r].append(percent)
                limit = thresholds.get(r)
                exceeds |= limit is not None and limit > 0 and percent > limit
        over += exceeds
    figures.requested = {r: spread(v) for r, v in requested.items()}
    figures.estimated = {
        **{r: spread(v) for r, v in estimated.items()},
        "nodesWithMetric": with_metric,
        "nodesOverThreshold": over,
        "thresholds": thresholds,
        "loadAware": load_aware,
    }
    figures.per_node_requested_cpu = requested["cpu"]
    figures.per_node_estimated_cpu = estimated["cpu"]
    figures.gpu = _gpu_figures(service, names)
    figures.quotas = _quota_figures(service)
    return figures


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _spread_cell(s: dict[str, Any]) -> str:
    return " / ".join(_cell(s.get(k)) for k in ("mean", "p90", "max"))


def summary_table(result: WhatIfResult) -> Table:
    """One column per configuration, one row per figure (utilisation as mean / p90 / max percent)."""
    from rich.table import Table

    configs = [c.to_json() for c in result.configurations]
    table = Table(title="What if: the same pods under each configuration")
    table.add_column("")
    for c in configs:
        table.add_column(c["name"], justify="right")

    def row(label: str, fn: Any) -> None:
        table.add_row(label, *(fn(c) for c in configs))

    row("pods placed", lambda c: f"{c['placed']} / {c['pods']}")
    row("unschedulable", lambda c: str(c["unschedulable"]))
    reasons = sorted({r for c in configs for r in c["unschedulableByReason"]})
    for reason in reasons:
        row(f"  {reason}", lambda c, r=reason: str(c["unschedulableByReason"].get(r, 0)))
    for r in RESOURCES:
        row(f"requested {r} % (mean/p90/max)", lambda c, r=r: _spread_cell(c["requested"][r]))
    for r in RESOURCES:
        row(f"estimated {r} % (mean/p90/max)", lambda c, r=r: _spread_cell(c["estimated"][r]))
    row("nodes over LoadAware threshold", lambda c: str(c["estimated"]["nodesOverThreshold"]))
    row(
        "LoadAware thresholds", lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c["estimated"]["thresholds"].items()))
    )
    row(
        "GPUs / allocated % / fragmented free %",
        lambda c: (
            f"{c['gpu']['gpus']} / {_cell(c['gpu']['allocatedPercent'])} / {_cell(c['gpu']['fragmentedFreePercent'])}"
        ),
    )
    quotas = sorted({q for c in configs for q in c["quotas"]})
    for q in quotas:
        row(f"quota {q} runtime / used", lambda c, q=q: _quota_cell(c["quotas"].get(q)))
    row("gangs completed / planned", lambda c: f"{c['gangs']['completed']} / {c['gangs']['planned']}")
    return table


def _quota_cell(q: dict[str, Any] | None) -> str:
    if q is None:
        return "-"

    def fmt(rl: dict[str, Any]) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(rl.items())) or "0"

    return f"{fmt(q['runtime'])} / {fmt(q['used'])}"


def changed_table(result: WhatIfResult) -> Table:
    """The pods placed differently: pod, then its node under each configuration (``-``: unschedulable)."""
    from rich.table import Table

    table = Table(title="Pods placed differently")
    table.add_column("pod")
    for c in result.configurations:
        table.add_column(c.name)
    for entry in result.changed():
        table.add_row(entry["pod"], *(entry["nodes"][c.name] or "-" for c in result.configurations))
    return table


def plot_whatif(result: WhatIfResult, path: Path) -> None:
    """A PNG of per-node cpu utilisation, nodes sorted, one line per configuration: requested (left) and
    LoadAware's estimate (right, with each configuration's cpu threshold dashed).

    Raises:
        OSError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for c in result.configurations:
        f = c.figures
        if f is None:
            continue
        left.plot(sorted(f.per_node_requested_cpu, reverse=True), label=c.name)
        line = right.plot(sorted(f.per_node_estimated_cpu, reverse=True), label=c.name)[0]
        if f.cpu_threshold is not None:
            right.axhline(f.cpu_threshold, linestyle="--", color=line.get_color(), linewidth=1)
    left.set_title("requested cpu per node")
    right.set_title("estimated real cpu per node (LoadAware)")
    for ax in (left, right):
        ax.set_xlabel("nodes, busiest first")
        ax.set_ylabel("% of allocatable")
        ax.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)
