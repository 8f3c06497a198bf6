"""LoadAwareScheduling's "every NodeMetric is fresh" shortcut (``_all_fresh``) gives the verdicts and scores of the
full per-node expiry test, whatever happens to the nodes and their NodeMetrics in between.

The plugin keeps the oldest ``updateTime`` of the table's NodeMetrics and skips the expiry test of Filter and Score
while that oldest one is fresh. Here random sequences of events (NodeMetrics reported, aged, lost or without an
updateTime, nodes removed and added back, pods assigned, the clock moving) are applied to one plugin, and after each
step its Filter and Score over every node are compared with the same plugin's answers with the shortcut turned off.
A kept oldest that is not re-worked out after a NodeMetric changes passes an expired node (or scores one) and
fails here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sources.events import EventType
from tests.plugins.test_loadaware import ALLOC_96, NOW, Env, metric_obj, node_obj, pod_obj

NODES = ("n0", "n1", "n2", "n3")

_metric = st.tuples(
    st.just("metric"),
    st.sampled_from(NODES),
    # seconds from the current clock (the default expiration is 180 s), or None: no updateTime
    st.one_of(st.none(), st.sampled_from([-400.0, -181.0, -180.0, -179.5, -60.0, 0.0, 5.0])),
    st.integers(0, 90),  # cpu usage, cores of 96
)
_event = st.one_of(
    _metric,
    st.tuples(st.just("drop_metric"), st.sampled_from(NODES)),
    st.tuples(st.just("drop_node"), st.sampled_from(NODES)),
    st.tuples(st.just("add_node"), st.sampled_from(NODES)),
    st.tuples(st.just("pod"), st.sampled_from(NODES), st.integers(1, 8)),
    st.tuples(st.just("tick"), st.sampled_from([0.5, 30.0, 120.0, 179.5, 180.0, 400.0])),
)


def _both(env: Env, pod: dict[str, Any], names: list[str]) -> tuple[Any, Any]:
    """(filter failures, scores) over ``names`` with the shortcut, then with it off (the full expiry test)."""
    plugin = env.plugin
    got = env.answers(pod, names)
    plugin._all_fresh = lambda now: False  # type: ignore[method-assign]
    try:
        want = env.answers(pod, names)
    finally:
        del plugin._all_fresh
    return got, want


def _truly_all_fresh(env: Env) -> bool:
    """No node with a NodeMetric has an expired one (upstream's isNodeMetricExpired on each)."""
    for name in env.cache.nodes:
        load = env.plugin.loads.get(name)
        if load is None or load.metric is None:
            continue
        update = load.metric.update_time
        if math.isnan(update) or env.now - update >= env.plugin.args.node_metric_expiration_seconds:
            return False
    return True


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_event, max_size=25), enable_expired=st.booleans())
def test_shortcut_gives_the_full_expiry_tests_answers(events: list[tuple[Any, ...]], enable_expired: bool) -> None:
    env = Env({"enableScheduleWhenNodeMetricsExpired": enable_expired, "resourceWeights": {"cpu": 1, "memory": 1}})
    for name in NODES:
        env.apply("Node", node_obj(name, ALLOC_96))
    present = set(NODES)
    pods = 0
    incoming = pod_obj("incoming", req={"cpu": "4", "memory": "8Gi"})
    for event in events:
        kind = event[0]
        if kind == "metric":
            _, name, offset, cores = event
            update = None if offset is None else env.now - NOW + offset
            env.apply("NodeMetric", metric_obj(name, update=update, usage={"cpu": str(cores), "memory": "64Gi"}))
        elif kind == "drop_metric":
            env.apply("NodeMetric", metric_obj(event[1]), EventType.DELETED)
        elif kind == "drop_node" and event[1] in present:
            env.apply("Node", node_obj(event[1], ALLOC_96), EventType.DELETED)
            present.discard(event[1])
        elif kind == "add_node" and event[1] not in present:
            env.apply("Node", node_obj(event[1], ALLOC_96))
            present.add(event[1])
        elif kind == "pod" and event[1] in present:
            pods += 1
            env.apply("Pod", pod_obj(f"p{pods}", node=event[1], req={"cpu": str(event[2]), "memory": "1Gi"}))
        elif kind == "tick":
            env.now += event[1]
        names = [n for n in NODES if n in present]
        if not names:
            continue
        (failures, scores), (want_failures, want_scores) = _both(env, incoming, names)
        assert failures == want_failures
        assert np.array_equal(scores, want_scores)
        # the shortcut is taken only when it is right (it may be passed up after a node is removed)
        if env.plugin._all_fresh(env.now):
            assert _truly_all_fresh(env)


def test_shortcut_is_taken_and_passed_up() -> None:
    """Fresh NodeMetrics: the shortcut holds across pod assignments (no pass over the table); a NodeMetric that
    ages past the expiration, or a new one reported old, turns it off at once; losing the stale one turns it on
    again."""
    env = Env({})
    env.apply("Node", node_obj("n0", ALLOC_96))
    env.apply("NodeMetric", metric_obj("n0", update=-10, usage={"cpu": "10", "memory": "64Gi"}))
    plugin = env.plugin
    plugin._flush()
    assert plugin._all_fresh(env.now)
    oldest = plugin._oldest_update
    assert oldest == NOW - 10
    env.apply("Pod", pod_obj("a", node="n0", req={"cpu": "1"}))
    plugin._flush()
    assert plugin._oldest_update == oldest  # an assignment leaves the NodeMetric as it was: nothing re-worked out
    env.now += 170.0
    assert not plugin._all_fresh(env.now)  # 180 s old
    env.now = NOW
    env.apply("Node", node_obj("n1", ALLOC_96))
    env.apply("NodeMetric", metric_obj("n1", update=-200, usage={"cpu": "10", "memory": "64Gi"}))
    plugin._flush()
    assert not plugin._all_fresh(env.now)
    env.apply("NodeMetric", metric_obj("n1", update=None, usage={"cpu": "10", "memory": "64Gi"}))
    plugin._flush()
    assert not plugin._all_fresh(env.now) and plugin._oldest_update == -math.inf
    env.apply("NodeMetric", metric_obj("n1"), EventType.DELETED)
    plugin._flush()
    assert plugin._all_fresh(env.now) and plugin._oldest_update == NOW - 10
