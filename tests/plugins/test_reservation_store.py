"""The reservation store's per-node columns, built on a cache that is already full (listener replay)."""

from __future__ import annotations

import numpy as np

from app.cache.snapshot import ClusterCache
from app.framework.handle import Handle
from app.plugins.reservation.plugin import new_reservation
from app.plugins.reservation.store import COUNT_COLUMN, PODS_COLUMN, reserved_column
from app.sources.events import Event, EventType
from tests.plugins.reservation.fixtures import node, pod, reservation


def test_replayed_state_counts_each_pod_and_reservation_once() -> None:
    cache = ClusterCache()
    cache.apply(Event("Node", EventType.ADDED, node("n1")))
    for i in range(3):
        cache.apply(Event("Pod", EventType.ADDED, pod(f"p{i}", "1", node="n1")))
    status = {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "2", "memory": "1Gi"}}
    cache.apply(Event("Reservation", EventType.ADDED, reservation("r1", cpu="2", memory="1Gi", status=status)))
    plugin = new_reservation({}, Handle(cache))  # registers after everything is cached: a replay
    row = cache.table.row("n1")
    assert row is not None
    table = cache.table
    assert int(table.column(PODS_COLUMN)[row]) == 3
    assert int(table.column(COUNT_COLUMN)[row]) == 1
    assert int(table.column(reserved_column("cpu"))[row]) == 2000
    # a pod leaving and the reservation going away update the same rows
    cache.apply(Event("Pod", EventType.DELETED, pod("p0", "1", node="n1")))
    cache.apply(Event("Reservation", EventType.DELETED, reservation("r1")))
    assert int(table.column(PODS_COLUMN)[row]) == 2
    assert int(table.column(COUNT_COLUMN)[row]) == 0
    assert np.all(table.column(reserved_column("cpu"))[[row]] == 0)
    assert plugin.store.by_name == {}


def test_victims_path_answers_as_the_matrix_path() -> None:
    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState
    from app.framework.interfaces import NodeBatch

    cache = ClusterCache()
    for name, cpu in (("n1", "4"), ("n2", "4"), ("n3", "8")):
        cache.apply(Event("Node", EventType.ADDED, node(name, cpu=cpu, pods="3")))
    cache.apply(Event("Pod", EventType.ADDED, pod("busy", "1", node="n2")))
    cache.apply(Event("Pod", EventType.ADDED, pod("busy-2", "1", node="n2")))
    for name, where in (("r1", "n1"), ("r2", "n2"), ("r3", "n3")):
        status = {"phase": "Available", "nodeName": where, "allocatable": {"cpu": "3", "memory": "1Gi"}}
        cache.apply(Event("Reservation", EventType.ADDED, reservation(name, cpu="3", memory="1Gi", status=status)))
    plugin = new_reservation({}, Handle(cache))
    other = parse_pod(pod("other", "2", "1Gi"))
    rows, _ = cache.table.rows_of(["n1", "n2", "n3"])

    def run(removed: list[list[object]] | None) -> dict[str, str]:
        state = CycleState(0.0)
        assert plugin.pre_filter(state, other).is_success()
        batch = NodeBatch(rows, ["n1", "n2", "n3"], removed)  # type: ignore[arg-type]
        return {batch.names[p]: s.message for p, s in plugin.filter_nodes(state, other, batch).items()}

    expected = {"n1": "Insufficient cpu (reserved)", "n2": "Insufficient cpu (reserved), Too many pods (reserved)"}
    assert run(None) == expected
    assert run([[], [], []]) == expected
    # a victim on n2 gives its pod slot back (the cpu is still held by the reservation)
    assert run([[], [parse_pod(pod("busy", "1", node="n2"))], []])["n2"] == "Insufficient cpu (reserved)"


def test_pod_count_column_follows_every_pod_event() -> None:
    """The store copies a node's pod count only when an event can change it (issue 29): the column must still
    equal the cache's count through a pod's whole life (assume, the bound and Running updates, completion,
    a resize, a move, deletion)."""
    cache = ClusterCache()
    for name in ("n1", "n2"):
        cache.apply(Event("Node", EventType.ADDED, node(name)))
    new_reservation({}, Handle(cache))
    table = cache.table

    def counts() -> list[int]:
        return [int(table.column(PODS_COLUMN)[cache.table.row(n)]) for n in ("n1", "n2")]

    def want() -> list[int]:
        return [len(cache.nodes[n].pods) for n in ("n1", "n2")]

    cache.apply(Event("Pod", EventType.ADDED, pod("other", node="n1")))
    cache.apply(Event("Pod", EventType.ADDED, pod("p")))
    assert counts() == want() == [1, 0]
    cache.assume(cache.pods["uid-p"], "n1")
    assert counts() == want() == [2, 0]
    bound = pod("p", node="n1")
    cache.apply(Event("Pod", EventType.MODIFIED, bound))
    bound["status"] = {"phase": "Running"}
    cache.apply(Event("Pod", EventType.MODIFIED, bound))
    assert counts() == want() == [2, 0]
    resized = pod("p", "2", node="n1")
    resized["status"] = {"phase": "Running"}
    cache.apply(Event("Pod", EventType.MODIFIED, resized))
    assert counts() == want() == [2, 0]
    done = pod("p", node="n1")
    done["status"] = {"phase": "Succeeded"}
    cache.apply(Event("Pod", EventType.MODIFIED, done))  # same node, now terminated: no longer counted
    assert counts() == want() == [1, 0]
    cache.apply(Event("Pod", EventType.MODIFIED, pod("p", node="n1")))  # not terminated again
    assert counts() == want() == [2, 0]
    cache.apply(Event("Pod", EventType.MODIFIED, pod("p", node="n2")))
    assert counts() == want() == [1, 1]
    cache.apply(Event("Pod", EventType.DELETED, pod("p", node="n2")))
    assert counts() == want() == [1, 0]
