"""Runtime quota calculation, table tests after upstream's runtime_quota_calculator_test.go and
group_quota_manager_test.go: water-filling with largest remainder, lending, borrowing, min scaling,
request propagation on trees of depth 1..3, and the over-use revoke list."""

from __future__ import annotations

from typing import Any

import pytest

from app.cache.podinfo import parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.handle import SnapshotLister
from app.plugins.elasticquota.args import ElasticQuotaArgs
from app.plugins.elasticquota.calculator import hamilton_deltas, water_fill
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.revoke import RevokeController, pods_to_revoke
from app.sources.events import Event, EventType
from tests.plugins.elasticquota.fixtures import node, pod, quota

WATER_FILL_CASES: list[tuple[str, int, list[int], list[int], list[int], list[bool], list[int]]] = [
    # name, total, requests, mins, weights, lends, expected runtime
    ("all-below-min-lend", 100, [10, 20], [40, 60], [1, 1], [True, True], [10, 20]),
    ("non-lending-keeps-min", 100, [0, 100], [40, 0], [1, 1], [False, True], [40, 60]),
    ("borrow-idle-capacity", 100, [80, 10], [40, 60], [1, 1], [True, True], [80, 10]),
    ("reclaim-min-back", 100, [80, 60], [40, 60], [1, 1], [True, True], [40, 60]),
    ("share-by-weight", 100, [100, 100], [0, 0], [1, 3], [True, True], [25, 75]),
    ("excess-pooled-again", 100, [10, 100, 100], [0, 0, 0], [1, 1, 2], [True, True, True], [10, 30, 60]),
    ("largest-remainder-name-tie", 10, [10, 10, 10], [0, 0, 0], [1, 1, 1], [True, True, True], [4, 3, 3]),
    ("zero-weight-gets-nothing", 10, [10, 10], [0, 0], [0, 1], [True, True], [0, 10]),
    ("floors-kept-over-total", 50, [100, 100], [40, 40], [1, 1], [True, True], [40, 40]),
]


@pytest.mark.parametrize(
    ("total", "requests", "mins", "weights", "lends", "expected"),
    [c[1:] for c in WATER_FILL_CASES],
    ids=[c[0] for c in WATER_FILL_CASES],
)
def test_water_fill(
    total: int, requests: list[int], mins: list[int], weights: list[int], lends: list[bool], expected: list[int]
) -> None:
    names = [f"q{i}" for i in range(len(requests))]
    assert water_fill(total, names, requests, mins, weights, lends) == expected


def test_hamilton_is_exact_for_huge_memory_values() -> None:
    total = 10**15 + 7  # bytes: w*total exceeds 2**63
    weights = [(3 * 2**40, "a"), (5 * 2**40, "b"), (7 * 2**40, "c")]
    deltas = hamilton_deltas(total, sum(w for w, _ in weights), weights)
    assert sum(deltas) == total
    assert deltas[0] == (3 * total) // 15 or deltas[0] == (3 * total) // 15 + 1


def _manager(quotas: list[dict[str, Any]], pods: list[dict[str, Any]], cpu: str = "100", **args: Any) -> QuotaManager:
    mgr = QuotaManager(ElasticQuotaArgs(**args))
    mgr.set_node("n1", {"cpu": int(float(cpu) * 1000), "memory": 256 * 2**30})
    for q in quotas:
        mgr.set_quota_object(q["metadata"]["name"], q)
    for p in pods:
        info = parse_pod(p)
        info.uid = p["metadata"]["uid"]
        mgr.set_pod(info.uid, info)
    mgr.ensure()
    return mgr


CPU = {"cpu": "100", "memory": "100Gi"}


def test_depth1_lending_and_borrowing() -> None:
    mgr = _manager(
        [quota("a", {"cpu": "40"}, CPU), quota("b", {"cpu": "60"}, CPU)],
        [pod("a1", "80", quota_name="a"), pod("b1", "10", quota_name="b")],
    )
    assert mgr.refresh_runtime("a") == {"cpu": 80000, "memory": 0}
    assert mgr.refresh_runtime("b") == {"cpu": 10000, "memory": 0}
    # b's owner comes back for its min: a's runtime shrinks to its min.
    p = parse_pod(pod("b2", "50", quota_name="b"))
    p.uid = "uid-b2"
    mgr.set_pod(p.uid, p)
    assert mgr.refresh_runtime("a")["cpu"] == 40000
    assert mgr.refresh_runtime("b")["cpu"] == 60000


def test_depth1_non_lending_quota_reports_min_as_request() -> None:
    mgr = _manager(
        [quota("a", {"cpu": "40"}, CPU, lend=False), quota("b", {}, CPU)],
        [pod("b1", "100", quota_name="b")],
    )
    assert mgr.quotas["a"].request == {"cpu": 40000}
    assert mgr.refresh_runtime("a")["cpu"] == 40000
    assert mgr.refresh_runtime("b")["cpu"] == 60000


def test_depth2_parent_runtime_feeds_children() -> None:
    mgr = _manager(
        [
            quota("p", {"cpu": "50"}, CPU, is_parent=True),
            quota("p1", {"cpu": "20"}, CPU, parent="p"),
            quota("p2", {"cpu": "30"}, CPU, parent="p"),
            quota("q", {"cpu": "50"}, CPU),
        ],
        [pod("x", "70", quota_name="p1"), pod("y", "10", quota_name="q")],
    )
    assert mgr.quotas["p"].request == {"cpu": 70000}
    assert mgr.refresh_runtime("p")["cpu"] == 70000
    assert mgr.refresh_runtime("p1")["cpu"] == 70000
    assert mgr.refresh_runtime("p2")["cpu"] == 0
    assert mgr.refresh_runtime("q")["cpu"] == 10000


def test_depth3_request_capped_at_max_before_parent() -> None:
    small = {"cpu": "30", "memory": "100Gi"}
    mgr = _manager(
        [
            quota("p", {"cpu": "50"}, CPU, is_parent=True),
            quota("p1", {"cpu": "20"}, CPU, parent="p", is_parent=True),
            quota("leaf", {"cpu": "10"}, small, parent="p1"),
            quota("q", {"cpu": "50"}, CPU),
        ],
        [pod("x", "70", quota_name="leaf", node="n1"), pod("y", "100", quota_name="q")],
    )
    assert mgr.quotas["leaf"].request == {"cpu": 70000}
    assert mgr.quotas["p1"].request == {"cpu": 30000}  # leaf's request capped at its max (30)
    assert mgr.quotas["p"].used == {"cpu": 70000}
    assert mgr.refresh_runtime("leaf")["cpu"] == 30000
    assert mgr.refresh_runtime("q")["cpu"] == 70000


def test_min_is_scaled_when_mins_exceed_total() -> None:
    mgr = _manager(
        [quota("a", {"cpu": "80"}, CPU), quota("b", {"cpu": "80"}, CPU)],
        [pod("a1", "100", quota_name="a"), pod("b1", "100", quota_name="b")],
    )
    assert mgr.refresh_runtime("a")["cpu"] == 50000
    assert mgr.quotas["a"].auto_min["cpu"] == 50000
    unscaled = _manager(
        [quota("a", {"cpu": "80"}, CPU), quota("b", {"cpu": "80"}, CPU)],
        [pod("a1", "100", quota_name="a"), pod("b1", "100", quota_name="b")],
        enable_min_quota_scale=False,
    )
    assert unscaled.refresh_runtime("a")["cpu"] == 80000


def test_default_quota_used_leaves_root_total() -> None:
    mgr = _manager([quota("a", {}, CPU)], [pod("d1", "30", node="n1"), pod("a1", "100", quota_name="a")])
    assert mgr.quota_name_of({}, "default") == "koordinator-default-quota"
    assert mgr.root_total()["cpu"] == 70000
    assert mgr.refresh_runtime("a")["cpu"] == 70000


def test_namespace_fallbacks() -> None:
    mgr = _manager(
        [quota("team", {}, CPU, namespace="team"), quota("other", {}, CPU, namespaces=["ns-x"])],
        [],
    )
    assert mgr.quota_name_of({}, "team") == "team"
    assert mgr.quota_name_of({}, "ns-x") == "other"
    assert mgr.quota_name_of({"quota.scheduling.koordinator.sh/name": "nope"}, "team") == "koordinator-default-quota"


def test_incremental_pod_events_match_a_rebuild() -> None:
    quotas = [
        quota("p", {"cpu": "50"}, CPU, is_parent=True),
        quota("p1", {"cpu": "20"}, CPU, parent="p"),
        quota("q", {"cpu": "50"}, CPU, lend=False),
    ]
    pods = [pod(f"x{i}", "7", quota_name="p1" if i % 2 else "q", node="n1" if i % 3 else "") for i in range(12)]
    incremental = _manager(quotas, [])
    for p in pods:
        info = parse_pod(p)
        info.uid = p["metadata"]["uid"]
        incremental.set_pod(info.uid, info)
    gone = parse_pod(pods[1])
    incremental.set_pod("uid-x1", None)
    rebuilt = _manager(quotas, [p for p in pods if p["metadata"]["name"] != gone.name])
    for name in ("p", "p1", "q", "koordinator-root-quota"):
        a, b = incremental.quotas[name], rebuilt.quotas[name]
        assert (a.request, a.used, a.child_request) == (b.request, b.used, b.child_request), name
        assert incremental.refresh_runtime(name) == rebuilt.refresh_runtime(name)


def test_revoke_takes_back_least_important_pods() -> None:
    cache = ClusterCache()
    cache.apply(Event("Node", EventType.ADDED, node("n1", "10")))
    mgr = QuotaManager(ElasticQuotaArgs())
    for name, node_state in cache.nodes.items():
        mgr.set_node(name, node_state.allocatable)
    for q in (quota("a", {"cpu": "4"}, CPU), quota("b", {"cpu": "6"}, CPU)):
        mgr.set_quota_object(q["metadata"]["name"], q)
    objs = [
        pod("a-old", "3", quota_name="a", node="n1", start="2026-01-01T00:00:00Z"),
        pod("a-new", "3", quota_name="a", node="n1", start="2026-01-02T00:00:00Z"),
        pod("a-high", "1", quota_name="a", node="n1", priority=100, start="2026-01-03T00:00:00Z"),
        pod("b-pending", "6", quota_name="b"),
    ]
    for obj in objs:
        cache.apply(Event("Pod", EventType.ADDED, obj))
    for uid, p in cache.pods.items():
        mgr.set_pod(uid, p)
    mgr.refresh_all()
    assert mgr.quotas["a"].used["cpu"] == 7000
    assert mgr.quotas["a"].runtime["cpu"] == 4000
    revoked = pods_to_revoke(mgr, SnapshotLister(cache), "a", now=0.0)
    assert [p.name for p in revoked] == ["a-new"]
    ctl = RevokeController(delay=120.0)
    ctl.sync(mgr, now=1000.0)
    assert ctl.due(mgr, now=1060.0) == []
    assert ctl.due(mgr, now=1121.0) == ["a"]


def test_every_update_of_a_pod_is_accounted_as_a_rebuild_would() -> None:
    """An update that keeps all a quota entry is made of is skipped (issue 29): every update that changes one
    of them (node, quota label, requests, priority, preemptible label, termination) must still move the pod,
    and the skipped ones (a status report) must leave it as a rebuild from the same pod would."""
    quotas = [quota("a", {"cpu": "10"}, CPU), quota("b", {"cpu": "10"}, CPU)]
    other = pod("other", "1", quota_name="a", node="n1")
    incremental = _manager(quotas, [other])
    steps: list[dict[str, Any]] = [
        pod("x", "2", quota_name="a"),
        pod("x", "2", quota_name="a", node="n1"),
        {**pod("x", "2", quota_name="a", node="n1"), "status": {"phase": "Running"}},
        pod("x", "2", quota_name="b", node="n1"),
        pod("x", "3", quota_name="b", node="n1"),
        pod("x", "3", quota_name="b", node="n1", priority=9000),
        pod("x", "3", quota_name="b", node="n1", priority=9000, non_preemptible=True),
        {**pod("x", "3", quota_name="b", node="n1", priority=9000), "status": {"phase": "Succeeded"}},
        pod("x", "3", quota_name="b", node="n1", priority=9000),
        pod("x", "3", quota_name="b", priority=9000),
    ]
    for step in steps:
        info = parse_pod(step)
        info.uid = step["metadata"]["uid"]
        incremental.set_pod(info.uid, info)
        rebuilt = _manager(quotas, [other, step])
        assert incremental.entries == rebuilt.entries
        for name in ("a", "b", "koordinator-root-quota"):
            got, want = incremental.quotas[name], rebuilt.quotas[name]
            for field in ("request", "used", "self_np_request", "self_np_used"):
                # an incremental take-out leaves {"cpu": 0} where a rebuild has {}: the same list
                assert _nonzero(getattr(got, field)) == _nonzero(getattr(want, field)), (name, field, step)


def _nonzero(resources: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in resources.items() if v}
