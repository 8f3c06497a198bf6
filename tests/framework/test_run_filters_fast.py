"""``Framework.run_filters`` maps each plugin's failures over with C-level zip/map per distinct status (issue 29):
property tests against the plain loop it replaced (same positions, same order, same attributed statuses, one
attributed Status object per distinct plugin status), and ``NodeBatch.subset`` against a list comprehension."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cache.podinfo import PodInfo, parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.config import PluginSpec, SchedulerConfig
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import FilterFailures, NodeBatch
from app.framework.registry import Registry
from app.framework.runtime import Framework
from app.framework.status import Status

#: statuses a plugin shares between nodes (one object per reason), unattributed and pre-attributed
POOL = (
    Status.unschedulable("Insufficient cpu"),
    Status.unschedulable("Insufficient memory"),
    Status.unresolvable("node(s) didn't match Pod's node affinity"),
    Status.error("boom"),
    Status.unschedulable("already mine", plugin="P0"),
)


class Scripted:
    """Fails, of the nodes it is shown, those whose name is in ``script`` with the pool status given there;
    with ``attributed``, the pool's statuses attributed to it, and it says so (``attributed_statuses``)."""

    def __init__(self, name: str, script: dict[str, int], attributed: bool = False) -> None:
        self.name = name
        self.script = script
        self.seen: list[list[str]] = []
        self.pool = tuple(s.with_plugin(name) for s in POOL) if attributed else POOL
        if attributed:
            self.attributed_statuses = True

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        self.seen.append(list(nodes.names))
        # positions in an arbitrary (reversed) order: the answer must keep the plugin's order
        return {i: self.pool[self.script[n]] for i, n in reversed(list(enumerate(nodes.names))) if n in self.script}


def _plain(plugins: list[Scripted], batch: NodeBatch) -> FilterFailures:
    """The loop ``run_filters`` ran before: one attribution per distinct status, one position at a time."""
    failures: FilterFailures = {}
    alive = list(range(len(batch)))
    for plugin in plugins:
        if not alive:
            break
        shown = NodeBatch(batch.rows[alive], [batch.names[i] for i in alive])
        failed = plugin.filter_nodes(CycleState(0.0), POD, shown)
        attributed: dict[int, Status] = {}
        for pos, status in failed.items():
            named = attributed.get(id(status))
            if named is None:
                named = attributed[id(status)] = status.with_plugin(plugin.name)
            failures[alive[pos]] = named
        alive = [a for i, a in enumerate(alive) if i not in failed]
    return failures


POD = parse_pod({"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": {"containers": []}})


def _factory(plugin: Scripted) -> Any:
    return lambda args, handle: plugin


def _framework(plugins: list[Scripted]) -> Framework:
    registry = Registry()
    for p in plugins:
        registry.register(p.name, _factory(p))
    return Framework(SchedulerConfig(tuple(PluginSpec(p.name, 1) for p in plugins)), registry, Handle(ClusterCache()))


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 40),
    scripts=st.lists(st.dictionaries(st.integers(0, 39), st.integers(0, len(POOL) - 1)), min_size=1, max_size=4),
    attributed=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_run_filters_answers_as_the_plain_loop(n: int, scripts: list[dict[int, int]], attributed: list[bool]) -> None:
    """Plugins that attribute their statuses themselves (``attributed_statuses``) or not, in any mix."""
    names = [f"n{i}" for i in range(n)]
    plugins = [
        Scripted(f"P{k}", {f"n{i}": s for i, s in script.items()}, attributed[k]) for k, script in enumerate(scripts)
    ]
    batch = NodeBatch(np.arange(100, 100 + n, dtype=np.int64), names)
    got = _framework(plugins).run_filters(CycleState(0.0), POD, batch)
    shown = [p.seen for p in plugins]
    for p in plugins:
        p.seen = []
    want = _plain(plugins, batch)
    assert list(got.items()) == list(want.items())  # same positions, same order, equal statuses
    assert [(s.plugin, s.code, s.reasons) for s in got.values()] == [
        (s.plugin, s.code, s.reasons) for s in want.values()
    ]
    assert shown == [p.seen for p in plugins]  # each plugin was shown the same survivors
    # one attributed object per distinct (plugin, pool status): rejections count by identity downstream
    assert len({id(s) for s in got.values()}) == len({(s.plugin, s.code, s.reasons) for s in got.values()})


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 30), data=st.data(), removed=st.booleans())
def test_subset_is_the_positions_in_order(n: int, data: st.DataObject, removed: bool) -> None:
    names = [f"n{i}" for i in range(n)]
    victims = [[POD] * (i % 3) for i in range(n)] if removed else None
    batch = NodeBatch(np.arange(n, dtype=np.int64) * 7, names, victims)
    picked = sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n)) if n else set())
    sub = batch.subset(np.array(picked, dtype=np.int64))
    assert sub.names == [names[i] for i in picked]
    assert sub.rows.tolist() == [7 * i for i in picked]
    assert sub.removed == ([victims[i] for i in picked] if victims is not None else None)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 30),
    scripts=st.lists(st.dictionaries(st.integers(0, 29), st.integers(0, len(POOL) - 1)), min_size=1, max_size=4),
    skipped=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_survivors_and_subsets_only_for_plugins_that_run(
    n: int, scripts: list[dict[int, int]], skipped: list[bool]
) -> None:
    """``filter_survivors`` answers the plain loop's failures over the plugins not skipped at PreFilter, the
    passing positions (None when every node passed), and builds a subset of the survivors only for a plugin
    that runs after one that failed nodes: never for the plugins a plain pod skips (issue 29)."""
    names = [f"n{i}" for i in range(n)]
    plugins = [Scripted(f"P{k}", {f"n{i}": s for i, s in script.items()}) for k, script in enumerate(scripts)]
    batch = NodeBatch(np.arange(n, dtype=np.int64), names)
    state = CycleState(0.0)
    state.skip_filter.update(p.name for p, skip in zip(plugins, skipped, strict=False) if skip)
    subsets = 0
    real_subset = NodeBatch.subset

    def counting(self: NodeBatch, positions: Any) -> NodeBatch:
        nonlocal subsets
        subsets += 1
        return real_subset(self, positions)

    with patch.object(NodeBatch, "subset", counting):
        failures, survivors = _framework(plugins).filter_survivors(state, POD, batch)
    running = [p for p in plugins if p.name not in state.skip_filter]
    for p in plugins:
        p.seen = []
    want = _plain(running, batch)
    assert list(failures.items()) == list(want.items())
    passed = [i for i in range(n) if i not in want]
    assert (survivors.tolist() if survivors is not None else None) == (passed if want else None)
    # a subset made when a plugin runs after nodes failed since the last one was made (then shared)
    after_failure, failed_so_far, alive, stale = 0, set(), n, False
    for p in running:
        if alive == 0:
            break
        if stale:
            after_failure, stale = after_failure + 1, False
        failed_now = {i for i in range(n) if i not in failed_so_far and names[i] in p.script}
        failed_so_far |= failed_now
        alive -= len(failed_now)
        stale = stale or bool(failed_now)
    assert subsets == after_failure
