"""``--policy`` names and the service configuration each one runs with.

Every policy enables NodeResourcesFit and DeviceShare (which allocates GPUs at bind) and leaves
LoadAwareScheduling out: the simulated cluster has no NodeMetrics. ``Random`` does not
prioritize: kube-scheduler picks uniformly among the feasible nodes. The others set DeviceShare's
``scoringStrategy.type`` (upstream DeviceShareArgs; ``FragmentationAware`` is this project's
Fragmentation Gradient Descent strategy). ``--config FILE`` runs a plugin config file instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.framework.config import PluginSpec, SchedulerConfig, load_config
from app.sim.errors import SimInputError
from app.sim.trace import TracePod

#: The resource DeviceShare's strategies weigh (percent of one GPU; the trace's gpu_milli / 10).
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"

POLICIES: tuple[str, ...] = ("Random", "MostAllocated", "LeastAllocated", "FragmentationAware")

#: Policy -> the authors' published policies of the same idea (expected_results ``sc_policy``).
PUBLISHED: dict[str, tuple[str, ...]] = {
    "Random": ("01-Random",),
    "MostAllocated": ("04-GpuPacking", "05-BestFit"),
    "LeastAllocated": (),
    "FragmentationAware": ("06-FGD",),
}


@dataclass(frozen=True, slots=True)
class Policy:
    """A named service configuration; ``prioritize`` False means pick uniformly among feasible nodes."""

    name: str
    config: SchedulerConfig
    prioritize: bool = True


def builtin_policy(name: str) -> Policy:
    """The configuration of a built-in policy name (case-insensitive).

    Raises:
        SimInputError: unknown name (the message lists the known ones).
    """
    canonical = next((p for p in POLICIES if p.lower() == name.lower()), None)
    if canonical is None:
        raise SimInputError(f"--policy: unknown policy {name!r} (known: {', '.join(POLICIES)})")
    if canonical == "Random":
        return Policy(canonical, SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare"))), False)
    # Upstream applies its default resource weights only when scoringStrategy is absent: a strategy
    # given without resources scores every node 0. Weigh the GPU share, the resource the trace asks for.
    args = {"scoringStrategy": {"type": canonical, "resources": [{"name": GPU_MEMORY_RATIO, "weight": 1}]}}
    return Policy(canonical, SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare", 1, args))))


def config_policy(path: Path, known_plugins: list[str]) -> Policy:
    """A policy from a plugin config file, named after the file (its stem).

    Raises:
        ConfigError: the file is unreadable or invalid (the message names the field).
    """
    return Policy(path.stem, load_config(path, known_plugins))


def trace_workload(pods: Sequence[TracePod]) -> list[dict[str, object]]:
    """The trace's pod shapes as DeviceShare ``fragmentationAware.workload`` entries, weighted by count.

    FGD measures fragmentation against the workload the cluster is expected to run; the paper takes
    it from the trace. Shapes: cpu (milli, as "<n>m"), memory ("<n>Mi"), gpuMilli (0..1000 or whole
    GPUs as multiples of 1000), gpuModel (the allowed models, or absent), weight (pods of that shape).
    """
    counts: Counter[tuple[int, int, int, tuple[str, ...] | None]] = Counter(
        (p.cpu_milli, p.memory_mib, p.num_gpu * p.gpu_milli, p.gpu_models) for p in pods
    )
    entries: list[dict[str, object]] = []
    for (cpu, mem, gpu, models), count in sorted(counts.items(), key=lambda kv: (kv[0][:3], kv[0][3] or ())):
        entry: dict[str, object] = {"cpu": f"{cpu}m", "memory": f"{mem}Mi", "gpuMilli": gpu, "weight": count}
        if models:
            entry["gpuModel"] = list(models)
        entries.append(entry)
    return entries


def with_trace_workload(policy: Policy, pods: Sequence[TracePod]) -> Policy:
    """``policy`` with the trace's workload given to a FragmentationAware DeviceShare that has none.

    Other policies, and FragmentationAware configs that already set ``fragmentationAware.workload``
    (e.g. from ``--config``), are returned unchanged.
    """
    specs = list(policy.config.plugins)
    for i, spec in enumerate(specs):
        strategy = (spec.args.get("scoringStrategy") or {}) if spec.name == "DeviceShare" else {}
        frag = spec.args.get("fragmentationAware") or {}
        if strategy.get("type") == "FragmentationAware" and "workload" not in frag:
            args = {**spec.args, "fragmentationAware": {**frag, "workload": trace_workload(pods)}}
            specs[i] = replace(spec, args=args)
            return replace(policy, config=SchedulerConfig(tuple(specs)))
    return policy
