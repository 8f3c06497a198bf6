"""The framework runtime: builds the enabled plugins and runs them at each extension point.

Mirrors kube-scheduler's ``frameworkImpl`` (pkg/scheduler/framework/runtime/framework.go):
filter plugins run in order and a node failing one is not shown to the next; scores are
weighted per plugin. The weighted total here is normalised back to 0..100
(``sum(score*weight) // sum(weight)``) so it converts to the extender's 0..10 range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.cache.podinfo import PodInfo
from app.framework.config import ArgsError, ConfigError, SchedulerConfig
from app.framework.cyclestate import CycleState
from app.framework.interfaces import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    FilterFailures,
    FilterPlugin,
    Handle,
    NodeBatch,
    NormalizeScorePlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
)
from app.framework.registry import Registry
from app.framework.status import SUCCESS, Status


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """Scores of one batch.

    Attributes:
        per_plugin: plugin name -> int64 scores 0..100 (after normalisation), parallel to the batch.
        total: weighted total 0..100 per node.
    """

    per_plugin: dict[str, npt.NDArray[np.int64]]
    total: npt.NDArray[np.int64]

    def extender_scores(self) -> npt.NDArray[np.int64]:
        """Totals scaled to the extender's 0..MAX_EXTENDER_PRIORITY range (integer division, as Go does)."""
        return self.total * MAX_EXTENDER_PRIORITY // MAX_NODE_SCORE


class Framework:
    """The enabled plugins, grouped by extension point.

    Raises (from the constructor):
        ConfigError: a plugin's args are invalid; the path names ``pluginConfig`` and the field.
    """

    def __init__(self, config: SchedulerConfig, registry: Registry, handle: Handle) -> None:
        self.handle = handle
        self.plugins: list[Plugin] = []
        self.weights: dict[str, int] = {}
        for spec in config.plugins:
            try:
                plugin = registry.factory(spec.name)(dict(spec.args), handle)
            except ArgsError as exc:
                raise ConfigError(f"pluginConfig[{spec.name}].args.{exc.field}", exc.detail) from None
            self.plugins.append(plugin)
            self.weights[spec.name] = spec.weight
        self.pre_filter_plugins = [p for p in self.plugins if isinstance(p, PreFilterPlugin)]
        self.filter_plugins = [p for p in self.plugins if isinstance(p, FilterPlugin)]
        self.score_plugins = [p for p in self.plugins if isinstance(p, ScorePlugin)]
        self.reserve_plugins = [p for p in self.plugins if isinstance(p, ReservePlugin)]
        self.pre_bind_plugins = [p for p in self.plugins if isinstance(p, PreBindPlugin)]
        self.post_filter_plugins = [p for p in self.plugins if isinstance(p, PostFilterPlugin)]

    def plugin(self, name: str) -> Plugin | None:
        """The enabled plugin called ``name``, if any."""
        return next((p for p in self.plugins if p.name == name), None)

    def new_cycle(self) -> CycleState:
        """A fresh cycle state stamped with the handle's clock."""
        return CycleState(self.handle.now())

    # ------------------------------------------------------------------ filter
    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Run every PreFilter; the first non-success status is returned with its plugin set."""
        for plugin in self.pre_filter_plugins:
            status = plugin.pre_filter(state, pod)
            if not status.is_success():
                return Status(status.code, status.reasons, plugin.name)
        return SUCCESS

    def run_filters(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> FilterFailures:
        """Filter ``batch``: a node failing a plugin is not shown to the later ones.

        Returns the failing positions of ``batch`` with the first failing status (plugin set).
        """
        failures: FilterFailures = {}
        alive = np.arange(len(batch), dtype=np.int64)
        for plugin in self.filter_plugins:
            if len(alive) == 0:
                break
            sub = batch if len(alive) == len(batch) else batch.subset(alive)
            failed = plugin.filter_nodes(state, pod, sub)
            if not failed:
                continue
            attributed: dict[int, Status] = {}  # plugins share one Status per reason: attribute each once
            alive_list = alive.tolist()
            for pos, status in failed.items():
                named = attributed.get(id(status))
                if named is None:
                    named = attributed[id(status)] = Status(status.code, status.reasons, plugin.name)
                failures[alive_list[pos]] = named
            keep = np.ones(len(alive), dtype=bool)
            keep[list(failed)] = False
            alive = alive[keep]
        return failures

    def explain_filters(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> dict[str, FilterFailures]:
        """Every filter plugin on every node (no short-circuit), for the explain endpoint."""
        return {p.name: p.filter_nodes(state, pod, batch) for p in self.filter_plugins}

    # ------------------------------------------------------------------ score
    def run_scores(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> ScoreResult:
        """Score ``batch`` with every score plugin, normalise, and weight into a 0..100 total.

        A plugin answering None for the pod is skipped: it is left out of the scores and of the
        weight sum, as kube-scheduler drops plugins whose PreScore returned Skip.
        """
        n = len(batch)
        per_plugin: dict[str, npt.NDArray[np.int64]] = {}
        weighted = np.zeros(n, dtype=np.int64)
        weight_sum = 0
        for plugin in self.score_plugins:
            raw = plugin.score_nodes(state, pod, batch)
            if raw is None:  # the plugin has nothing to say about this pod (kube-scheduler's PreScore Skip)
                continue
            scores = np.asarray(raw, dtype=np.int64)
            if isinstance(plugin, NormalizeScorePlugin):
                scores = np.asarray(plugin.normalize_scores(state, pod, batch, scores), dtype=np.int64)
            scores = np.clip(scores, 0, MAX_NODE_SCORE)
            per_plugin[plugin.name] = scores
            w = self.weights.get(plugin.name, 1)
            weighted += scores * w
            weight_sum += w
        total = weighted // weight_sum if weight_sum else weighted
        return ScoreResult(per_plugin, total)

    # ------------------------------------------------------------------ reserve / bind
    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Reserve on every plugin; on failure the ones already reserved are unreserved."""
        done: list[ReservePlugin] = []
        for plugin in self.reserve_plugins:
            status = plugin.reserve(state, pod, node)
            if not status.is_success():
                for p in reversed(done):
                    p.unreserve(state, pod, node)
                plugin.unreserve(state, pod, node)
                return Status(status.code, status.reasons, plugin.name)
            done.append(plugin)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Unreserve on every plugin, in reverse order."""
        for plugin in reversed(self.reserve_plugins):
            plugin.unreserve(state, pod, node)

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """PreBind on every plugin; the first failure is returned."""
        for plugin in self.pre_bind_plugins:
            status = plugin.pre_bind(state, pod, node)
            if not status.is_success():
                return Status(status.code, status.reasons, plugin.name)
        return SUCCESS

    # ------------------------------------------------------------------ preemption
    def run_select_victims(
        self, state: CycleState, pod: PodInfo, node: str, victims: list[PodInfo]
    ) -> tuple[list[PodInfo], Status]:
        """Let every PostFilter plugin narrow the victims on ``node``; a failure drops the node."""
        for plugin in self.post_filter_plugins:
            victims, status = plugin.select_victims(state, pod, node, victims)
            if not status.is_success():
                return victims, Status(status.code, status.reasons, plugin.name)
        return victims, SUCCESS

    def describe(self) -> list[dict[str, Any]]:
        """Enabled plugins with their weights and extension points, for inspection."""
        points: dict[str, list[Any]] = {
            "PreFilter": self.pre_filter_plugins,
            "Filter": self.filter_plugins,
            "Score": self.score_plugins,
            "Reserve": self.reserve_plugins,
            "PreBind": self.pre_bind_plugins,
            "PostFilter": self.post_filter_plugins,
        }
        return [
            {
                "name": p.name,
                "weight": self.weights.get(p.name, 1),
                "extensionPoints": [k for k, ps in points.items() if p in ps],
            }
            for p in self.plugins
        ]
