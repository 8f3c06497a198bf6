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


def reserve_outcome(plugin: Reservation, cache: ClusterCache, obj: dict[str, Any], pre_filter: bool) -> tuple[Any, ...]:
    """What the ``/bind`` cycle's Reserve does: PreFilter (the re-check; or none, as a caller may skip it),
    then Reserve on n1, in one state."""
    info = parse_pod(obj)
    state = CycleState(0.0)
    if pre_filter:
        plugin.pre_filter(state, info)
    status = plugin.reserve(state, info, "n1")
    chosen = state.get(f"{plugin.name}/chosen")
    return (status.code, status.reasons), (chosen.name if chosen is not None else None)


@pytest.mark.parametrize("pre_filter", [True, False])
@pytest.mark.parametrize("active", [False, True])
@pytest.mark.parametrize("kind", sorted(PODS))
def test_reserve_without_matching_equals_matching(
    kind: str, active: bool, pre_filter: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reserve of a pod nothing is reserved for does not match it (issue 29) and answers what matching answers:
    an owner pod is still charged to the active reservation."""
    cache, plugin = plugin_over(active)
    shortcut = not active and kind in {"plain", "owner", "ignored", "reserve-pod"}
    if shortcut:

        def no_matching(*_: Any) -> Any:
            raise AssertionError("Reserve matched a pod nothing is reserved for")

        with monkeypatch.context() as patched:
            patched.setattr("app.plugins.reservation.plugin.match_pod", no_matching)
            fast = reserve_outcome(plugin, cache, PODS[kind], pre_filter)
    else:
        fast = reserve_outcome(plugin, cache, PODS[kind], pre_filter)
    if active and kind == "owner":
        assert fast[1] == "r1"
    cache2, slow_plugin = plugin_over(active)
    monkeypatch.setattr(slow_plugin, "_nothing_reserved_for", lambda pod: False)
    assert reserve_outcome(slow_plugin, cache2, PODS[kind], pre_filter) == fast
