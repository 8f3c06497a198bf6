"""Framework scoring: a plugin may skip a pod (PreScore Skip) without diluting the others' weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from app.cache.podinfo import PodInfo, parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.config import PluginSpec, SchedulerConfig
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import NodeBatch, PreScorePlugin, ScorePlugin
from app.framework.registry import Registry
from app.framework.runtime import Framework
from app.framework.status import SUCCESS, Status


class Fixed(PreScorePlugin, ScorePlugin):
    """Scores every node ``value``; PreScore answers Skip for pods labelled ``skip-<name>``."""

    def __init__(self, name: str, value: int) -> None:
        self.name = name
        self.value = value

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status:
        return Status.skip() if pod.labels.get(f"skip-{self.name}") else SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        assert not pod.labels.get(f"skip-{self.name}"), "Score must not run after PreScore answered Skip"
        return np.full(len(nodes), self.value, dtype=np.int64)


def _framework() -> Framework:
    registry = Registry()
    registry.register("A", lambda args, handle: Fixed("A", 80))
    registry.register("B", lambda args, handle: Fixed("B", 20))
    config = SchedulerConfig((PluginSpec("A", 1), PluginSpec("B", 3)))
    return Framework(config, registry, Handle(ClusterCache()))


def _pod(labels: dict[str, Any]) -> PodInfo:
    return parse_pod(
        {"metadata": {"name": "p", "namespace": "d", "uid": "u", "labels": labels}, "spec": {"containers": []}}
    )


def test_weighted_total_of_all_plugins() -> None:
    fw = _framework()
    batch = NodeBatch(np.array([0, 1], dtype=np.int64), ["n1", "n2"])
    result = fw.run_scores(fw.new_cycle(), _pod({}), batch)
    assert result.total.tolist() == [(80 * 1 + 20 * 3) // 4] * 2  # 35
    assert result.extender_scores().tolist() == [3, 3]


def test_skipping_plugin_leaves_the_weight_sum() -> None:
    fw = _framework()
    batch = NodeBatch(np.array([0], dtype=np.int64), ["n1"])
    result = fw.run_scores(fw.new_cycle(), _pod({"skip-B": "1"}), batch)
    assert list(result.per_plugin) == ["A"]
    assert result.total.tolist() == [80]  # not (80*1 + 0*3) // 4 = 20
