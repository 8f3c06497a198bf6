"""NodeNUMAResourceArgs: decoding, upstream defaults and validation.

Upstream: ``pkg/scheduler/apis/config/types.go`` (``NodeNUMAResourceArgs``), ``v1/defaults.go``
(``SetDefaults_NodeNUMAResourceArgs``: ``defaultCPUBindPolicy: FullPCPUs``; ``scoringStrategy`` and
``numaScoringStrategy`` LeastAllocated over cpu and memory with weight 1) and
``validation_pluginargs.go``. ``New`` rejects an unknown strategy type with
``scoring strategy <type> is not supported`` / ``numa scoring strategy <type> is not supported``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.framework.config import ArgsError
from app.plugins.nodenumaresource import names as n

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED)

_FIELDS = {"apiVersion", "kind", "defaultCPUBindPolicy", "scoringStrategy", "numaScoringStrategy"}


def _default_weights() -> dict[str, int]:
    return {"cpu": 1, "memory": 1}


@dataclass(slots=True)
class ScoringStrategy:
    """``type`` (LeastAllocated | MostAllocated) and resource name -> weight (1..100)."""

    type: str = LEAST_ALLOCATED
    weights: dict[str, int] = field(default_factory=_default_weights)


@dataclass(slots=True)
class NodeNUMAResourceArgs:
    """Args after defaulting.

    Attributes:
        default_cpu_bind_policy: ``FullPCPUs`` (default) or ``SpreadByPCPUs``: what ``Default`` or an
            absent preferred policy means.
        scoring: the node scorer; numa_scoring: the NUMA-hint scorer (its type also picks the default
            NUMA allocate strategy: MostAllocated -> MostAllocated, else LeastAllocated).
    """

    default_cpu_bind_policy: str = n.CPU_BIND_FULL_PCPUS
    scoring: ScoringStrategy = field(default_factory=ScoringStrategy)
    numa_scoring: ScoringStrategy = field(default_factory=ScoringStrategy)

    @property
    def numa_allocate_strategy(self) -> str:
        """``GetDefaultNUMAAllocateStrategy``."""
        return n.NUMA_MOST_ALLOCATED if self.numa_scoring.type == MOST_ALLOCATED else n.NUMA_LEAST_ALLOCATED


def _strategy(raw: Any, path: str, label: str) -> ScoringStrategy:
    if not isinstance(raw, dict):
        raise ArgsError(path, "expected a mapping with type and resources")
    kind = raw.get("type", LEAST_ALLOCATED) or LEAST_ALLOCATED
    if kind not in STRATEGIES:
        raise ArgsError(f"{path}.type", f"{label} {kind} is not supported")
    resources = raw.get("resources")
    if resources is None:
        return ScoringStrategy(kind)
    if not isinstance(resources, list):
        raise ArgsError(f"{path}.resources", "expected a list of {name, weight}")
    weights: dict[str, int] = {}
    for i, item in enumerate(resources):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ArgsError(f"{path}.resources[{i}]", "expected {name, weight}")
        weight = item.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight <= 0 or weight > 100:
            raise ArgsError(
                f"{path}.resources[{i}].weight", f"resource weight of {item['name']} not in valid range (0, 100]"
            )
        weights[item["name"]] = weight
    return ScoringStrategy(kind, weights)


def decode_args(raw: dict[str, Any]) -> NodeNUMAResourceArgs:
    """Default and validate ``raw`` (the plugin's ``args`` mapping).

    Raises:
        ArgsError: unknown field, a ``defaultCPUBindPolicy`` other than FullPCPUs / SpreadByPCPUs, an
            unknown strategy type, or a weight outside (0, 100]; the field path is named.
    """
    extra = set(raw) - _FIELDS
    if extra:
        allowed = ", ".join(sorted(_FIELDS - {"apiVersion", "kind"}))
        raise ArgsError(sorted(extra)[0], f"unknown field (allowed: {allowed})")
    args = NodeNUMAResourceArgs()
    policy = raw.get("defaultCPUBindPolicy")
    if policy is not None:
        if policy not in (n.CPU_BIND_FULL_PCPUS, n.CPU_BIND_SPREAD_BY_PCPUS):
            raise ArgsError(
                "defaultCPUBindPolicy", f"unsupported CPUBindPolicy {policy!r} (FullPCPUs or SpreadByPCPUs)"
            )
        args.default_cpu_bind_policy = policy
    if raw.get("scoringStrategy") is not None:
        args.scoring = _strategy(raw["scoringStrategy"], "scoringStrategy", "scoring strategy")
    if raw.get("numaScoringStrategy") is not None:
        args.numa_scoring = _strategy(raw["numaScoringStrategy"], "numaScoringStrategy", "numa scoring strategy")
    return args
