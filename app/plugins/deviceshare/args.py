"""DeviceShareArgs: decoding, upstream defaults and validation, plus our FragmentationAware settings.

Upstream: ``pkg/scheduler/apis/config/types.go`` (DeviceShareArgs), ``v1/defaults.go``
(``SetDefaults_DeviceShareArgs``: LeastAllocated over gpu-memory-ratio, gpu-memory, rdma, fpga with
weight 1, applied only when ``scoringStrategy`` is absent) and ``validation_pluginargs.go``
(``resource weight of <name> not in valid range (0, 100]``). ``New`` rejects an unknown type with
``scoring strategy <type> is not supported``.

Ours: ``scoringStrategy.type: FragmentationAware`` and the ``fragmentationAware`` block::

    fragmentationAware:
      scoreMapping: SigmoidRank   # SigmoidRank (default) | Rank | Sigmoid (the paper's sigmoid(-delta/1000)*100)
      learnedPods: 10000          # sliding window of pods the workload is learned from (when no workload)
      workload:                   # optional fixed target workload; absent = learned from pods seen
        - {cpu: "8", memory: 32Gi, gpuMilli: 500, gpuModel: V100M16, weight: 3}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.api.quantity import QuantityError, int_value, milli_value
from app.framework.config import ArgsError
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.fragmentation import PodShape, Workload

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
FRAGMENTATION_AWARE = "FragmentationAware"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, FRAGMENTATION_AWARE)
SCORE_MAPPINGS = ("Rank", "Sigmoid", "SigmoidRank")
DEFAULT_LEARNED_PODS = 10000

DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = (
    (n.RESOURCE_GPU_MEMORY_RATIO, 1),
    (n.RESOURCE_GPU_MEMORY, 1),
    (n.RESOURCE_RDMA, 1),
    (n.RESOURCE_FPGA, 1),
)

_FIELDS = {
    "apiVersion",
    "kind",
    "allocator",
    "scoringStrategy",
    "disableDeviceNUMATopologyAlignment",
    "gpuSharedResourceTemplatesConfig",
    "gpuShareUnsupportedModels",
    "fragmentationAware",
}


@dataclass(slots=True)
class DeviceShareArgs:
    """Args after defaulting.

    Attributes:
        strategy: LeastAllocated | MostAllocated | FragmentationAware.
        weights: resource name -> weight (1..100), in the given order.
        unsupported_models: (vendor, model) pairs where GPU sharing is refused.
        score_mapping: FragmentationAware's map of fragmentation growth to 0..100. ``SigmoidRank`` (default):
            the FGD reference's integer score ``int(sigmoid(-growth/1000) * 100)``, its distinct levels then
            ranked 100, 90, ... so kube-scheduler's 0..10 extender buckets keep the reference's order and
            its ties (random pick among equals). ``Rank``: rank the exact growth (ties only when equal).
            ``Sigmoid``: the reference's integer score as is (collapses in the 0..10 buckets).
        workload: fixed target workload, or None to learn it from pods.
        learned_pods: size of the learning window (pods).
    """

    strategy: str = LEAST_ALLOCATED
    weights: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    unsupported_models: set[tuple[str, str]] = field(default_factory=set)
    score_mapping: str = "SigmoidRank"
    workload: Workload | None = None
    learned_pods: int = DEFAULT_LEARNED_PODS


def _shape(raw: Any, path: str) -> tuple[PodShape, float]:
    if not isinstance(raw, dict):
        raise ArgsError(path, "expected a mapping with cpu, memory, gpuMilli, gpuModel, weight")
    extra = set(raw) - {"cpu", "memory", "gpuMilli", "gpuModel", "weight"}
    if extra:
        allowed = "cpu, memory, gpuMilli, gpuModel, weight"
        raise ArgsError(f"{path}.{sorted(extra)[0]}", f"unknown field (allowed: {allowed})")
    try:
        cpu = milli_value(raw.get("cpu", 0))
        memory = int_value(raw.get("memory", 0))
    except QuantityError as exc:
        raise ArgsError(path, str(exc)) from None
    gpu = raw.get("gpuMilli", 0)
    if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0 or (gpu > 1000 and gpu % 1000):
        raise ArgsError(f"{path}.gpuMilli", f"expected 0..1000 or a multiple of 1000, got {gpu!r}")
    weight = raw.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        raise ArgsError(f"{path}.weight", f"expected a positive number, got {weight!r}")
    model = raw.get("gpuModel")
    if isinstance(model, list):
        model = tuple(str(m) for m in model)
    elif model is not None and not isinstance(model, str):
        raise ArgsError(f"{path}.gpuModel", "expected a model name, A|B, or a list of names")
    if cpu < 0 or memory < 0:
        raise ArgsError(path, "cpu and memory must not be negative")
    return PodShape(cpu, memory, gpu, model or None), float(weight)


def _fragmentation(raw: Any, args: DeviceShareArgs) -> None:
    path = "fragmentationAware"
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise ArgsError(path, "expected a mapping")
    extra = set(raw) - {"scoreMapping", "workload", "learnedPods"}
    if extra:
        raise ArgsError(f"{path}.{sorted(extra)[0]}", "unknown field (allowed: scoreMapping, workload, learnedPods)")
    mapping = raw.get("scoreMapping", "SigmoidRank")
    if mapping not in SCORE_MAPPINGS:
        raise ArgsError(f"{path}.scoreMapping", f"expected one of {', '.join(SCORE_MAPPINGS)}, got {mapping!r}")
    args.score_mapping = mapping
    learned = raw.get("learnedPods", DEFAULT_LEARNED_PODS)
    if isinstance(learned, bool) or not isinstance(learned, int) or learned < 1:
        raise ArgsError(f"{path}.learnedPods", f"expected a positive integer, got {learned!r}")
    args.learned_pods = learned
    workload = raw.get("workload")
    if workload is not None:
        if not isinstance(workload, list) or not workload:
            raise ArgsError(f"{path}.workload", "expected a non-empty list of pod shapes")
        counts: dict[PodShape, float] = {}
        for i, item in enumerate(workload):
            shape, weight = _shape(item, f"{path}.workload[{i}]")
            counts[shape] = counts.get(shape, 0.0) + weight
        args.workload = Workload.from_counts(counts)


def decode_args(raw: dict[str, Any]) -> DeviceShareArgs:
    """Default and validate ``raw`` (the plugin's ``args`` mapping).

    Raises:
        ArgsError: unknown field, unknown strategy (``scoring strategy X is not supported``), a weight
            outside (0, 100] (``resources[i].weight: resource weight of <name> not in valid range (0, 100]``),
            or a bad ``fragmentationAware`` block; the field path is named.
    """
    extra = set(raw) - _FIELDS
    if extra:
        allowed = ", ".join(sorted(_FIELDS - {"apiVersion", "kind"}))
        raise ArgsError(sorted(extra)[0], f"unknown field (allowed: {allowed})")
    args = DeviceShareArgs()
    strategy = raw.get("scoringStrategy")
    if strategy is not None:
        if not isinstance(strategy, dict):
            raise ArgsError("scoringStrategy", "expected a mapping with type and resources")
        kind = strategy.get("type", "")
        resources = strategy.get("resources") or []
        if not isinstance(resources, list):
            raise ArgsError("scoringStrategy.resources", "expected a list of {name, weight}")
        weights: dict[str, int] = {}
        for i, item in enumerate(resources):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ArgsError(f"resources[{i}]", "expected {name, weight}")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int) or weight <= 0 or weight > 100:
                raise ArgsError(
                    f"resources[{i}].weight", f"resource weight of {item['name']} not in valid range (0, 100]"
                )
            weights[item["name"]] = weight
        if kind not in STRATEGIES:
            raise ArgsError("scoringStrategy.type", f"scoring strategy {kind} is not supported")
        args.strategy, args.weights = kind, weights
    models = raw.get("gpuShareUnsupportedModels") or []
    if not isinstance(models, list):
        raise ArgsError("gpuShareUnsupportedModels", "expected a list of {vendor, model}")
    for i, item in enumerate(models):
        if not isinstance(item, dict):
            raise ArgsError(f"gpuShareUnsupportedModels[{i}]", "expected {vendor, model}")
        args.unsupported_models.add((str(item.get("vendor", "")), str(item.get("model", ""))))
    _fragmentation(raw.get("fragmentationAware"), args)
    return args
