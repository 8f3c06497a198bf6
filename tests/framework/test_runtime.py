"""Framework scoring: a plugin may skip a pod (PreScore Skip) without diluting the others' weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

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


class Listed(PreScorePlugin, ScorePlugin):
    """Scores node i ``scores[i]`` (any int: the framework clips to 0..100); Skip when ``skip``."""

    def __init__(self, name: str, scores: list[int], skip: bool) -> None:
        self.name = name
        self.scores = scores
        self.skip = skip

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status:
        return Status.skip() if self.skip else SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        return np.array(self.scores, dtype=np.int64)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 6),
    plugins=st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.integers(0, 2**32)), min_size=0, max_size=3),
)
def test_total_is_the_weighted_mean_of_the_clipped_scores(n: int, plugins: list[tuple[int, bool, int]]) -> None:
    """kube-scheduler's total: sum(clip(score) * weight) // sum(weight) over the plugins that did not skip
    (the weighted sum itself when the weights sum to 0, zeros when none scored), for one plugin scoring alone
    (a plain pod, whose total is that plugin's scores: issue 29) as for several; weight 0 included."""
    registry = Registry()
    made: list[Listed] = []
    for k, (_, skip, seed) in enumerate(plugins):
        rng = np.random.default_rng(seed)
        plugin = Listed(f"P{k}", rng.integers(-50, 150, n).tolist(), skip)
        made.append(plugin)
        registry.register(plugin.name, lambda args, handle, plugin=plugin: plugin)
    fw = Framework(
        SchedulerConfig(tuple(PluginSpec(f"P{k}", w) for k, (w, _, _) in enumerate(plugins))),
        registry,
        Handle(ClusterCache()),
    )
    fw.weights.update({f"P{k}": w for k, (w, _, _) in enumerate(plugins)})  # weight 0 too (config makes it 1)
    batch = NodeBatch(np.arange(n, dtype=np.int64), [f"n{i}" for i in range(n)])
    result = fw.run_scores(fw.new_cycle(), _pod({}), batch)
    scoring = [(p, w) for p, (w, skip, _) in zip(made, plugins, strict=True) if not skip]
    weighted = [sum(min(max(p.scores[i], 0), 100) * w for p, w in scoring) for i in range(n)]
    weight_sum = sum(w for _, w in scoring)
    want = [x // weight_sum for x in weighted] if weight_sum else weighted
    assert result.total.tolist() == want
    assert list(result.per_plugin) == [p.name for p, _ in scoring]
