"""The result types of ``koord sim whatif``: what each configuration placed and measured, and the run as a whole.

One home for the types that the runner (:mod:`app.sim.whatif`) fills and the report
(:mod:`app.sim.whatifreport`) measures and draws, so that neither of those two imports the other for them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ClusterFigures:
    """The cluster after a run, as :mod:`app.sim.whatifreport` measures it (its module docstring defines each
    figure); ``per_node_*`` keep each node's percent for the plot."""

    requested: dict[str, dict[str, float | None]] = field(default_factory=dict)
    estimated: dict[str, Any] = field(default_factory=dict)
    gpu: dict[str, Any] = field(default_factory=dict)
    quotas: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_node_requested_cpu: list[float] = field(default_factory=list)
    per_node_estimated_cpu: list[float] = field(default_factory=list)
    cpu_threshold: int | None = None

    def to_json(self) -> dict[str, Any]:
        """``requested``, ``estimated``, ``gpu``, ``quotas``."""
        return {"requested": self.requested, "estimated": self.estimated, "gpu": self.gpu, "quotas": self.quotas}


@dataclass
class ConfigurationResult:
    """What one configuration's run placed and measured.

    Attributes:
        name: the configuration's name.
        placements: pod (``namespace/name``) -> node, or None when it stayed unschedulable; in queue order.
        reasons: pod -> why it is unschedulable (``Plugin: reason``).
        figures: the cluster after the run (:class:`ClusterFigures`, measured by :mod:`app.sim.whatifreport`).
        gangs: planned / completed / failed gangs among the pods placed.
        wall_seconds: the scheduling loop's wall time (service start and cluster load excluded).
        load_seconds: starting the service on the cluster files.
        cpu_seconds: CPU time of the whole run in its process (load, scheduling on both sides of the HTTP
            verbs, measuring): what the run costs on an idle core.
    """

    name: str
    placements: dict[str, str | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    figures: ClusterFigures | None = None
    gangs: dict[str, int] = field(default_factory=lambda: {"planned": 0, "completed": 0, "failed": 0})
    wall_seconds: float = 0.0
    load_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def placed(self) -> int:
        """Pods bound."""
        return sum(1 for n in self.placements.values() if n is not None)

    def unschedulable_by_reason(self) -> dict[str, int]:
        """Unschedulable pods counted by reason, most first (ties: by reason)."""
        counts = Counter(self.reasons.values())
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_json(self) -> dict[str, Any]:
        """The configuration's object of ``-o json`` (see docs/whatif.md)."""
        out: dict[str, Any] = {
            "name": self.name,
            "pods": len(self.placements),
            "placed": self.placed,
            "unschedulable": len(self.placements) - self.placed,
            "unschedulableByReason": self.unschedulable_by_reason(),
        }
        if self.figures is not None:
            out |= self.figures.to_json()
        out["gangs"] = dict(self.gangs)
        out["placements"] = dict(self.placements)
        out["wallSeconds"] = round(self.wall_seconds, 2)
        out["loadSeconds"] = round(self.load_seconds, 2)
        out["cpuSeconds"] = round(self.cpu_seconds, 2)
        return out


@dataclass
class WhatIfResult:
    """Every configuration's result, in the order given, and the pods they placed differently."""

    configurations: list[ConfigurationResult]

    def changed(self) -> list[dict[str, Any]]:
        """Pods whose node differs between configurations: ``{"pod", "nodes": {configuration: node or None}}``,
        in the first configuration's queue order."""
        out: list[dict[str, Any]] = []
        if not self.configurations:
            return out
        first = self.configurations[0]
        for pod in first.placements:
            nodes = {c.name: c.placements.get(pod) for c in self.configurations}
            if len(set(nodes.values())) > 1:
                out.append({"pod": pod, "nodes": nodes})
        return out

    def to_json(self) -> dict[str, Any]:
        """``{"configurations": [...], "changed": [...]}`` (``koord sim whatif -o json``)."""
        return {"configurations": [c.to_json() for c in self.configurations], "changed": self.changed()}
