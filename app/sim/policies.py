"""``--policy`` names and the service configuration each one runs with.

Every policy enables NodeResourcesFit and DeviceShare (which allocates GPUs at bind) and leaves
LoadAwareScheduling out: the simulated cluster has no NodeMetrics. ``Random`` does not
prioritize: kube-scheduler picks uniformly among the feasible nodes, and DeviceShare's MostAllocated
picks the GPUs there. The others set DeviceShare's ``scoringStrategy.type`` (upstream
DeviceShareArgs; ``FragmentationAware`` is this project's Fragmentation Gradient Descent strategy).
``--config FILE`` runs a plugin config file instead.
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
    # Upstream applies its default resource weights only when scoringStrategy is absent: a strategy
    # given without resources scores every node 0. Weigh the GPU share, the resource the trace asks for.
    # Random never prioritizes; its strategy only picks the GPUs inside the chosen node: MostAllocated
    # (the fullest card that fits), as the authors' Random baseline takes the best-fit GPU
    # (Open-Gpu-Share's default gpuSelMethod "best").
    strategy = "MostAllocated" if canonical == "Random" else canonical
    args = {"scoringStrategy": {"type": strategy, "resources": [{"name": GPU_MEMORY_RATIO, "weight": 1}]}}
    specs = (PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare", 1, args))
    return Policy(canonical, SchedulerConfig(specs), canonical != "Random")


def config_policy(path: Path, known_plugins: list[str]) -> Policy:
    """A policy from a plugin config file, named after the file (its stem).

    Raises:
        ConfigError: the file is unreadable or invalid (the message names the field).
    """
    return Policy(path.stem, load_config(path, known_plugins))


#: The gang scheduling plugin a replay with gangs enables (:func:`with_coscheduling`).
COSCHEDULING = "Coscheduling"


def with_coscheduling(policy: Policy) -> Policy:
    """``policy`` with the Coscheduling plugin (default args) appended, unless it enables it already: a
    replay with gangs needs it, whatever the policy places by."""
    if any(spec.name == COSCHEDULING for spec in policy.config.plugins):
        return policy
    specs = (*policy.config.plugins, PluginSpec(COSCHEDULING))
    return replace(policy, config=SchedulerConfig(specs))


#: Percent of the trace's pods the typical shapes must cover: the authors' runs use 95
#: (``generate_config_and_run.py``: ``podPopularityThreshold: 95``, ``podIncreaseStep: 1``). On the
#: default trace that keeps 35 of 91 shapes, all of them single-GPU or GPU-less. The 8-GPU pods
#: still find idle nodes because the authors' scheduler breaks score ties by a node order fixed for
#: the run (see :data:`app.sim.run.TIE_BREAKS`), which fills nodes one after another.
TYPICAL_POPULARITY_PERCENT = 95


def trace_workload(
    pods: Sequence[TracePod], popularity_percent: float = TYPICAL_POPULARITY_PERCENT
) -> list[dict[str, object]]:
    """The trace's typical pod shapes as DeviceShare ``fragmentationAware.workload`` entries.

    FGD measures fragmentation against the workload the cluster is expected to run; the paper takes
    it from the trace. As the authors' simulator (``utils.GetTypicalPods`` with
    ``isInvolvedCpuPods: true``): a shape is (cpu, GPU milli, GPU models), memory not included (the
    reference's fragmentation reads cpu and GPUs only); shapes are taken by decreasing count (ties:
    larger shape first) until they cover ``popularity_percent`` % of the pods (the reference's
    ``podPopularityThreshold``); the rest are dropped.
    Entries: cpu (milli, as "<n>m"), memory ("0Mi"), gpuMilli (0..1000 or whole GPUs as multiples
    of 1000), gpuModel (the allowed models, or absent), weight (pods of that shape).

    Raises:
        SimInputError: ``popularity_percent`` is not in (0, 100].
    """
    if not 0 < popularity_percent <= 100:
        raise SimInputError(f"--pod-popularity-threshold: must be in (0, 100], got {popularity_percent:g}")
    counts: Counter[tuple[int, int, int, tuple[str, ...] | None]] = Counter(
        (max(p.cpu_milli, _DEFAULT_CPU_MILLI), p.gpu_milli if p.num_gpu else 0, p.num_gpu, p.gpu_models) for p in pods
    )
    # sort.Reverse(TargetPodList): count desc, then (cpu, per-GPU milli, GPU count, model) desc
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][:3], "|".join(kv[0][3] or ())), reverse=True)
    total = sum(counts.values())
    entries: list[dict[str, object]] = []
    covered = 0
    for (cpu, per_gpu, num_gpu, models), count in ranked:
        if covered * 100 >= popularity_percent * total:
            break
        covered += count
        entry: dict[str, object] = {"cpu": f"{cpu}m", "memory": "0Mi", "gpuMilli": per_gpu * num_gpu, "weight": count}
        if models:
            entry["gpuModel"] = list(models)
        entries.append(entry)
    return entries


#: kube-scheduler's non-zero default cpu request (``GetNonzeroRequests``), used by the reference's pod shapes.
_DEFAULT_CPU_MILLI = 100


def with_trace_workload(
    policy: Policy, pods: Sequence[TracePod], popularity_percent: float = TYPICAL_POPULARITY_PERCENT
) -> Policy:
    """``policy`` with the trace's workload (:func:`trace_workload` at ``popularity_percent``) given to
    a FragmentationAware DeviceShare that has none.

    Other policies, and FragmentationAware configs that already set ``fragmentationAware.workload``
    (e.g. from ``--config``), are returned unchanged.
    """
    specs = list(policy.config.plugins)
    for i, spec in enumerate(specs):
        strategy = (spec.args.get("scoringStrategy") or {}) if spec.name == "DeviceShare" else {}
        frag = spec.args.get("fragmentationAware") or {}
        if strategy.get("type") == "FragmentationAware" and "workload" not in frag:
            args = {**spec.args, "fragmentationAware": {**frag, "workload": trace_workload(pods, popularity_percent)}}
            specs[i] = replace(spec, args=args)
            return replace(policy, config=SchedulerConfig(tuple(specs)))
    return policy
