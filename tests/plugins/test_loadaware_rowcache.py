"""LoadAware's per-row verdicts and scores (app/plugins/loadaware/rowcache.py) equal the exact path.

``filter_nodes`` / ``score_nodes`` read answers kept per table row for the pod's estimate, refreshed when a
node's columns are rewritten; ``_filter_exact`` / ``_score_exact`` work them out over the window's columns
on every call. A hypothesis property test drives random clusters through random event sequences (NodeMetrics
arriving, expiring, losing their nodeUsage or going away, assigned pods coming and going, nodes deleted and
re-added so rows are reused, the table growing) between Filter and Score calls of random pods, and asserts
both paths agree node by node: status code and reasons, score.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.plugins.loadaware.rowcache import EstimateRowCache
from app.sources.events import EventType
from tests.plugins.test_loadaware import NOW, Env, metric_obj, node_obj, pod_obj

NODES = [f"n{i}" for i in range(12)]

thresholds = st.dictionaries(st.sampled_from(["cpu", "memory"]), st.integers(0, 100), max_size=2)

args_strategy = st.fixed_dictionaries(
    {},
    optional={
        "usageThresholds": thresholds,
        "prodUsageThresholds": thresholds,
        "resourceWeights": st.dictionaries(st.sampled_from(["cpu", "memory"]), st.integers(1, 100), max_size=2),
        "dominantResourceWeight": st.integers(0, 100),
        "scoreAccordingProdUsage": st.booleans(),
        "enableScheduleWhenNodeMetricsExpired": st.booleans(),
        "filterExpiredNodeMetrics": st.booleans(),
        "nodeMetricExpirationSeconds": st.integers(1, 400),
        "aggregated": st.fixed_dictionaries(
            {},
            optional={
                "usageThresholds": thresholds,
                "usageAggregationType": st.sampled_from(["p50", "p95", "avg"]),
                "usageAggregatedDuration": st.sampled_from(["5m0s", "10m0s"]),
                "scoreAggregationType": st.sampled_from(["p50", "p95", "avg"]),
                "scoreAggregatedDuration": st.sampled_from(["5m0s", "10m0s"]),
            },
        ),
    },
)

cpu = st.sampled_from(["0", "500m", "2", "8", "30", "60", "95"])
memory = st.sampled_from(["0", "1Gi", "64Gi", "200Gi", "400Gi", "510Gi"])
usage = st.fixed_dictionaries({"cpu": cpu, "memory": memory})


@st.composite
def metrics(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A NodeMetric for ``name``: fresh, expired or without updateTime; with or without nodeUsage."""
    update = draw(st.sampled_from([0.0, -30.0, -200.0, -500.0, None]))
    if not draw(st.booleans()):
        return metric_obj(name, update=update, node_metric=draw(st.booleans()))
    aggregated: list[tuple[str, dict[str, dict[str, Any] | None]]] | None = None
    if draw(st.booleans()):
        aggregated = [(d, {t: draw(usage) for t in ("p50", "p95", "avg")}) for d in ("5m0s", "10m0s")]
    return metric_obj(name, update=update, usage=draw(usage), aggregated=aggregated)


def node(data: st.DataObject, name: str) -> dict[str, Any]:
    """A Node with 96 cpus / 512Gi, sometimes with its own usage thresholds or a zero allocatable."""
    annotations = None
    if data.draw(st.booleans()):
        custom = json.dumps({"usageThresholds": data.draw(thresholds)})
        annotations = {"scheduling.koordinator.sh/usage-thresholds": custom}
    allocatable = data.draw(st.sampled_from([{"cpu": "96", "memory": "512Gi"}, {"cpu": "8", "memory": "16Gi"}, {}]))
    return node_obj(name, allocatable, annotations)


def incoming(data: st.DataObject, i: int) -> dict[str, Any]:
    """An incoming pod: prod or not, a few request sizes (so estimates repeat and alternate)."""
    req = data.draw(st.sampled_from([None, {"cpu": "100m", "memory": "64Mi"}, {"cpu": "4", "memory": "8Gi"}]))
    lim = data.draw(st.sampled_from([None, {"cpu": "8", "memory": "16Gi"}]))
    priority = data.draw(st.sampled_from([None, 9999, 5000]))
    daemonset = "DaemonSet" if data.draw(st.integers(0, 9)) == 0 else None
    return pod_obj(f"in-{i}", req=req, lim=lim, priority=priority, owner_kind=daemonset)


def assert_same(env: Env, pod_obj_: dict[str, Any], names: list[str]) -> None:
    """Filter and Score of the pod over ``names`` by both paths, node by node."""
    rows, missing = env.cache.table.rows_of(names)
    assert not missing
    batch = NodeBatch(rows, names)
    plugin = env.plugin
    pod = parse_pod(pod_obj_)
    fast = plugin.filter_nodes(CycleState(env.now), pod, batch)
    exact = plugin._filter_exact(CycleState(env.now), pod, batch)
    assert sorted(fast) == sorted(exact), (names, fast, exact)
    for pos, status in exact.items():
        assert (fast[pos].code, fast[pos].reasons) == (status.code, status.reasons), names[pos]
    fast_scores = plugin.score_nodes(CycleState(env.now), pod, batch)
    exact_scores = plugin._score_exact(CycleState(env.now), pod, batch)
    assert fast_scores.dtype == exact_scores.dtype == np.int64
    assert fast_scores.tolist() == exact_scores.tolist(), names


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=args_strategy, data=st.data())
def test_cached_rows_equal_exact_path(args: dict[str, Any], data: st.DataObject) -> None:
    env = Env(args)
    present: set[str] = set()
    for name in NODES[:6]:
        env.apply("Node", node(data, name))
        present.add(name)
        if data.draw(st.booleans()):
            env.apply("NodeMetric", data.draw(metrics(name)))
    assigned: dict[str, str] = {}
    for step in range(data.draw(st.integers(4, 14))):
        ops = ["metric", "drop-metric", "pod", "unpod", "node", "del-node", "clock", "all-metrics"]
        op = data.draw(st.sampled_from(ops))
        name = data.draw(st.sampled_from(NODES))
        if op == "metric" and name in present:
            env.apply("NodeMetric", data.draw(metrics(name)), EventType.MODIFIED)
        elif op == "drop-metric" and name in present:
            env.apply("NodeMetric", metric_obj(name), EventType.DELETED)
        elif op == "pod" and name in present:
            uid = f"a{step}"
            req = data.draw(st.sampled_from([{"cpu": "2", "memory": "4Gi"}, {"cpu": "40", "memory": "300Gi"}]))
            env.apply("Pod", pod_obj(uid, uid=uid, node=name, req=req, phase="Running", priority=9999))
            assigned[uid] = name
        elif op == "unpod" and assigned:
            uid = data.draw(st.sampled_from(sorted(assigned)))
            env.apply("Pod", pod_obj(uid, uid=uid, node=assigned.pop(uid)), EventType.DELETED)
        elif op == "node":
            env.apply("Node", node(data, name), EventType.MODIFIED if name in present else EventType.ADDED)
            present.add(name)
        elif op == "del-node" and name in present:
            env.apply("Node", node_obj(name), EventType.DELETED)
            present.discard(name)
            assigned = {u: n for u, n in assigned.items() if n != name}
        elif op == "all-metrics":  # many rows rewritten at once: the refresh over arrays, not row by row
            for other in sorted(present):
                env.apply("NodeMetric", data.draw(metrics(other)), EventType.MODIFIED)
        elif op == "clock":
            env.now = NOW + data.draw(st.sampled_from([0.0, 100.0, 250.0]))
        if present:
            names = data.draw(st.lists(st.sampled_from(sorted(present)), min_size=1, max_size=8, unique=True))
            for i in range(data.draw(st.integers(1, 3))):
                assert_same(env, incoming(data, i), names)


def test_row_cache_keeps_recent_keys_and_refreshes_rows() -> None:
    """get computes every row once per key, refresh recomputes only the given rows of every kept key, the
    least recently used key is dropped past ``size``, and a new capacity drops everything."""
    column = np.arange(16, dtype=np.int64)
    calls: list[tuple[list[int], int]] = []

    def compute(rows: np.ndarray, key: int) -> np.ndarray:
        calls.append((rows.tolist(), key))
        return column[rows] * key

    def compute_one(row: int, key: int) -> int:
        calls.append(([row], key))
        return int(column[row]) * key

    cache = EstimateRowCache(compute, compute_one, size=2)
    assert cache.get(2, 8).tolist() == [0, 2, 4, 6, 8, 10, 12, 14]
    assert cache.get(2, 8) is cache.get(2, 8)
    assert len(calls) == 1
    cache.get(3, 8)
    column[5] = 100
    cache.refresh(np.array([5], dtype=np.int64))
    assert calls[-2:] == [([5], 2), ([5], 3)]
    assert cache.get(2, 8)[5] == 200 and cache.get(3, 8)[5] == 300
    column[:6] = 7
    cache.refresh(np.arange(6, dtype=np.int64))  # more than ONE_BY_ONE rows: one compute per key
    assert calls[-2:] == [(list(range(6)), 2), (list(range(6)), 3)]
    assert cache.get(2, 8).tolist() == [14] * 6 + [12, 14]
    cache.get(3, 8)
    cache.get(4, 8)  # third key: 2 (least recently used) goes
    assert len(cache) == 2
    calls.clear()
    cache.get(3, 8)
    assert calls == []
    cache.get(2, 8)
    assert calls == [(list(range(8)), 2)]
    cache.get(2, 16)  # the table grew: everything is recomputed
    assert calls[-1] == (list(range(16)), 2)
    assert len(cache) == 1


def test_score_row_takes_numpy_beyond_python_safe_values() -> None:
    """A row whose values would wrap int64 is scored by the numpy path, so both paths still agree."""
    env = Env({"resourceWeights": {"cpu": 1, "memory": 1}})
    env.apply("Node", node_obj("big", {"cpu": "96", "memory": "4Ei"}))
    env.apply("NodeMetric", metric_obj("big", usage={"cpu": "10", "memory": "3Ei"}))
    row = env.cache.table.row("big")
    assert row is not None
    plugin = env.plugin
    pod = parse_pod(pod_obj(req={"cpu": "1", "memory": "1Gi"}))
    key = (plugin._score_key(pod), plugin.pod_estimate(CycleState(env.now), pod).tobytes())
    assert plugin._score_row(row, key) == int(plugin._score_rows(np.array([row], dtype=np.int64), key)[0])
    assert_same(env, pod_obj(req={"cpu": "1", "memory": "1Gi"}), ["big"])
