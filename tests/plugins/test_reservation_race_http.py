"""Reservations under kube-scheduler's interleaving (issue 45), over real HTTP.

Pods whose ``/filter`` and ``/prioritize`` run while other pods' ``/bind`` are in flight (and binds racing each
other, their writes delayed by a seeded random amount), against several Reservations whose owners match every
pod. Before the fix a pod filtered while another pod's bind held an allocate-once Reservation was still offered
that Reservation, and its own ``/bind`` took it too: two owners, ``allocated`` twice what it reserves, and
other Reservations left without an owner. Each seed must end with: no allocate-once Reservation with two
owners, no Reservation allocated beyond what it reserves, every pod bound once, and each node's pods plus its
Reservations' remainders within its allocatable.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.api.reservation import allocated_ref
from tests.conftest import LiveServer
from tests.plugins.racekit import SchedulerLoop, SlowWrites, requests_of
from tests.plugins.reservation.fixtures import node, phase_is, pod, reservation, wait_for, write_cluster

WEB = {"app": "web"}
NODES = [node(f"n{i}", cpu="5", memory="12Gi") for i in range(4)]


def _objects() -> list[dict[str, Any]]:
    """Four nodes of 5 cpu; six allocate-once Reservations of 1 cpu (two on each of n0..n2) and, on n3 (a node
    holds one allocate policy), a shared Restricted Reservation of 2 cpu, all owned by ``app=web``; 14 web pods
    and 3 other pods of 1 cpu each (17 of 20 cpu)."""
    resv = [reservation(f"r{i}", cpu="1", memory="1Gi", node_name=f"n{i % 3}") for i in range(6)]
    resv.append(reservation("shared", cpu="2", memory="2Gi", node_name="n3", policy="Restricted", allocate_once=False))
    pods = [pod(f"web-{i}", "1", "1Gi", labels=WEB) for i in range(14)]
    pods += [pod(f"other-{i}", "1", "1Gi") for i in range(3)]
    return [*NODES, *resv, *pods]


@pytest.fixture(params=[1, 2, 3], ids=lambda s: f"seed{s}")
def race(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[LiveServer, list[dict[str, Any]], int]]:
    objects = _objects()
    source = SlowWrites(write_cluster(tmp_path / "cluster", objects), seed=request.param, poll_interval=0)
    with LiveServer(source) as srv:
        for i in range(6):
            wait_for(lambda i=i: phase_is(srv, f"r{i}", "Available"))
        wait_for(lambda: phase_is(srv, "shared", "Available"))
        yield srv, [o for o in objects if o["kind"] == "Pod"], request.param


def test_racing_binds_keep_every_reservation_whole(race: tuple[LiveServer, list[dict[str, Any]], int]) -> None:
    srv, pods, seed = race
    loop = SchedulerLoop(srv.url, NODES, seed=seed)
    try:
        out = loop.run(pods)
    finally:
        loop.close()
    assert out.overlapped > 0, "no pod was filtered while a bind was in flight: the race was not played"
    # no pod lost: every pod bound, once, where kube-scheduler bound it
    assert sorted(out.bound) == sorted(p["metadata"]["name"] for p in pods), out.bind_errors
    cache = srv.service.cache
    for p in pods:
        info = cache.pods[p["metadata"]["uid"]]
        assert info.node_name == out.bound[info.name]
    store = srv.service.framework.plugin("Reservation").store
    # the controller records the owners: allocate-once Reservations with one become Succeeded
    once = [f"r{i}" for i in range(6)]
    wait_for(lambda: all(store.by_name[r].phase != "Available" or not store.pods_of.get(r) for r in once))
    takers: dict[str, list[str]] = {}
    for p in pods:
        ref = allocated_ref(cache.pods[p["metadata"]["uid"]].annotations)
        if ref is not None:
            takers.setdefault(ref[0], []).append(p["metadata"]["name"])
            info = store.by_name[ref[0]]
            assert info.node_name == out.bound[p["metadata"]["name"]], (ref, info.node_name)
    for name, info in store.by_name.items():
        owners = store.pods_of.get(name, set())
        assert sorted(cache.pods[u].name for u in owners) == sorted(takers.get(name, [])), name
        if info.allocate_once:
            assert len(owners) <= 1, f"{name} has owners {sorted(owners)}"
            status_owners = (info.obj.get("status") or {}).get("currentOwners") or []
            assert len(status_owners) <= 1, (name, status_owners)
        allocated = store.allocated(name)
        assert all(allocated.get(r, 0) <= v for r, v in info.allocatable.items()), (name, allocated)
    # the shared Restricted Reservation is held by web pods only, within its 2 cpu
    assert all(t.startswith("web-") for names in takers.values() for t in names)
    # node totals: the cache's requested is the sum of its pods; pods plus what Reservations still hold fit
    for n in NODES:
        name = n["metadata"]["name"]
        on_node = [p for p in pods if out.bound[p["metadata"]["name"]] == name]
        state = cache.nodes[name]
        for res in ("cpu", "memory"):
            total = sum(requests_of(p).get(res, 0) for p in on_node)
            assert state.requested.get(res, 0) == total, (name, res)
            held = sum(store.remaining(i.name).get(res, 0) for i in store.active_on(name))
            assert total + held <= state.allocatable[res], (name, res, total, held)


# ---------------------------------------------------------------------------------------------------------------
# The decision at /bind, one case at a time: B is filtered and scored while A has not bound yet (both see R1
# free), then A's /bind takes R1. B's /bind decides again against the state that holds A.

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
ORDER = "scheduling.koordinator.sh/reservation-order"
DB = {"app": "db"}


@contextmanager
def _nominated_then_taken(tmp_path: Path, objects: list[dict[str, Any]]) -> Iterator[tuple[LiveServer, str]]:
    """Serve ``objects``; filter and score web-b on n1, bind web-a to n1 (into r1), then bind web-b to n1;
    yields the server and web-b's bind error."""
    from app.sources.files import FileSource
    from tests.plugins.reservation.fixtures import bind_call, filter_call, prioritize_call

    with LiveServer(FileSource(write_cluster(tmp_path / "cluster", objects), poll_interval=0)) as srv:
        for r in (o for o in objects if o["kind"] == "Reservation"):
            wait_for(lambda r=r: phase_is(srv, r["metadata"]["name"], "Available"))
        a, b = (srv.service.cache.pod_objects[f"uid-web-{x}"] for x in "ab")
        assert filter_call(srv, b, ["n1"])["NodeNames"] == ["n1"]
        assert prioritize_call(srv, b, ["n1"])["n1"] > 0  # B is nominated for r1 on n1
        assert bind_call(srv, a, "n1")["Error"] == ""
        yield srv, bind_call(srv, b, "n1")["Error"]


def _owners(srv: LiveServer, name: str) -> list[str]:
    store = srv.service.framework.plugin("Reservation").store
    return sorted(srv.service.cache.pods[u].name for u in store.pods_of.get(name, ()))


def test_bind_takes_another_reservation_on_the_node(tmp_path: Path) -> None:
    objects = [
        node("n1", cpu="4"),
        reservation("r1", cpu="1", memory="1Gi", node_name="n1", labels={ORDER: "1"}),
        reservation("r2", cpu="1", memory="1Gi", node_name="n1", labels={ORDER: "2"}),
        pod("web-a", "1", "1Gi", labels=WEB),
        pod("web-b", "1", "1Gi", labels=WEB),
    ]
    with _nominated_then_taken(tmp_path, objects) as (srv, error):
        assert error == ""
        assert _owners(srv, "r1") == ["web-a"] and _owners(srv, "r2") == ["web-b"]
        wait_for(lambda: ALLOCATED in srv.service.cache.pods["uid-web-b"].annotations)
        assert allocated_ref(srv.service.cache.pods["uid-web-b"].annotations) == ("r2", "ruid-r2")
        wait_for(lambda: phase_is(srv, "r1", "Succeeded") and phase_is(srv, "r2", "Succeeded"))


def test_bind_falls_back_to_the_node_free_capacity(tmp_path: Path) -> None:
    objects = [
        node("n1", cpu="4"),
        reservation("r1", cpu="1", memory="1Gi", node_name="n1"),
        pod("web-a", "1", "1Gi", labels=WEB),
        pod("web-b", "1", "1Gi", labels=WEB),
    ]
    with _nominated_then_taken(tmp_path, objects) as (srv, error):
        assert error == ""
        assert _owners(srv, "r1") == ["web-a"]
        assert srv.service.cache.pods["uid-web-b"].node_name == "n1"
        assert ALLOCATED not in srv.service.cache.pods["uid-web-b"].annotations
        wait_for(lambda: phase_is(srv, "r1", "Succeeded"))
        assert srv.service.cache.objects["Reservation"]["r1"]["status"]["allocated"] == {"cpu": "1", "memory": "1Gi"}


def test_bind_fails_cleanly_when_nothing_is_left(tmp_path: Path) -> None:
    """n1 has 3 cpu: r1 (1 cpu, web) and r-db (2 cpu, another owner). Once web-a holds r1, web-b would need the
    cpu r-db reserves: its bind fails with the Filter's reason (kube-scheduler requeues it)."""
    objects = [
        node("n1", cpu="3"),
        reservation("r1", cpu="1", memory="1Gi", node_name="n1"),
        reservation("r-db", cpu="2", memory="1Gi", node_name="n1", owners=[{"labelSelector": {"matchLabels": DB}}]),
        pod("web-a", "1", "1Gi", labels=WEB),
        pod("web-b", "1", "1Gi", labels=WEB),
    ]
    with _nominated_then_taken(tmp_path, objects) as (srv, error):
        assert error == "Reservation: Insufficient cpu (reserved)"
        assert _owners(srv, "r1") == ["web-a"]
        assert srv.service.cache.pods["uid-web-b"].node_name == ""
        assert srv.service.cache.assumed.get("uid-web-b") is None
