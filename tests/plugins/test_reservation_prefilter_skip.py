"""Reservation's O(1) PreFilter / PreScore skip (no active reservation, no reservation annotation on the pod)
answers what matching the pod answers, for every kind of pod, with and without active reservations."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.cache.podinfo import parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import NodeBatch
from app.plugins.reservation import names as n
from app.plugins.reservation.plugin import Reservation, new_reservation
from app.sources.events import Event, EventType
from tests.plugins.reservation.fixtures import node, pod, reservation

AFFINITY = json.dumps({"reservationSelector": {"app": "web"}})

PODS = {
    "plain": pod("plain"),
    "owner": pod("owner", labels={"app": "web"}),
    "ignored": pod("ignored", labels={n.LABEL_RESERVATION_IGNORED: "true"}),
    "reserve-pod": pod("reserve-pod", annotations={n.ANNOTATION_RESERVE_POD: "true"}),
    "affinity": pod("affinity", labels={"app": "web"}, annotations={n.ANNOTATION_RESERVATION_AFFINITY: AFFINITY}),
    "bad-affinity": pod("bad-affinity", annotations={n.ANNOTATION_RESERVATION_AFFINITY: "{not json"}),
    "bad-exact": pod("bad-exact", annotations={n.ANNOTATION_EXACT_MATCH_RESERVATION: "{not json"}),
}


def plugin_over(active: bool) -> tuple[ClusterCache, Reservation]:
    cache = ClusterCache()
    cache.apply(Event("Node", EventType.ADDED, node("n1")))
    if active:
        status = {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "2", "memory": "2Gi"}}
        cache.apply(Event("Reservation", EventType.ADDED, reservation("r1", status=status)))
    return cache, new_reservation({}, Handle(cache))


def verdicts(plugin: Reservation, cache: ClusterCache, obj: dict[str, Any]) -> tuple[Any, ...]:
    info = parse_pod(obj)
    rows, _ = cache.table.rows_of(["n1"])
    batch = NodeBatch(rows, ["n1"])
    pre_filter = plugin.pre_filter(CycleState(0.0), info)
    pre_score = plugin.pre_score(CycleState(0.0), info, batch)
    return (pre_filter.code, pre_filter.reasons), (pre_score.code, pre_score.reasons)


@pytest.mark.parametrize("active", [False, True])
@pytest.mark.parametrize("kind", sorted(PODS))
def test_skip_without_matching_equals_matching(kind: str, active: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, plugin = plugin_over(active)
    fast = verdicts(plugin, cache, PODS[kind])
    assert plugin._nothing_reserved_for(parse_pod(PODS[kind])) == (
        not active and kind in {"plain", "owner", "ignored", "reserve-pod"}
    )
    monkeypatch.setattr(plugin, "_nothing_reserved_for", lambda pod: False)
    assert verdicts(plugin, cache, PODS[kind]) == fast
