"""Reservation-first migrations whose replacements race (issue 45), against the real scheduler service.

Twelve pods of one ReplicaSet run on three hot nodes; six PodMigrationJobs (two per hot node, within
maxMigratingPerNode 2) reserve room, evict, and the ReplicaSet creates the six replacements together; the
kube-scheduler play of :mod:`tests.plugins.racekit` then filters, scores and binds them over HTTP with binds in
flight while the next replacement is filtered. Before the fix allocate-once Reservations got two owners and
others stayed ``Available`` with no owner while their jobs waited in ``WaitForPodBindReservation`` until the
TTL. Every job must now end within one controller round of the replacements binding, and no Reservation may
be left ``Available`` without an owner.

The descheduler runs as it does beside a cluster: its own cache, filled from the cluster's objects before each
pass, writing through the client (here the scheduler's file source, on the service's event loop; an eviction
deletes the pod as the API server's Eviction does). The test plays the ReplicaSet controller and the kubelet
(bound replacements become Ready).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cache.snapshot import ClusterCache
from app.descheduler.config import MigrationControllerArgs
from app.descheduler.migration import MigrationController, new_job
from app.sources.base import EventSink
from tests.conftest import LiveServer
from tests.plugins.racekit import SchedulerLoop, SlowWrites
from tests.plugins.reservation.fixtures import node, pod, wait_for, write_cluster

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "rs-web", "controller": True}
KINDS = ("Node", "Pod", "Reservation", "PodMigrationJob")
READY = {"conditions": [{"type": "Ready", "status": "True"}]}
HOT = ["hot-0", "hot-1", "hot-2"]
COLD = ["cold-0", "cold-1", "cold-2"]


class LoopSource(SlowWrites):
    """The scheduler's file source (pod writes delayed), remembering the service's event loop."""

    loop: asyncio.AbstractEventLoop

    async def start(self, sink: EventSink) -> None:
        self.loop = asyncio.get_running_loop()
        await super().start(sink)

    def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the service's loop from another thread and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    async def copies(self) -> dict[str, list[dict[str, Any]]]:
        return {k: copy.deepcopy(list(self._objects.get(k, {}).values())) for k in KINDS}


class Bridge:
    """The descheduler's client: every write goes to the scheduler's source, on the service's loop."""

    def __init__(self, source: LoopSource) -> None:
        self.source = source

    async def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.source.loop))

    async def patch(self, kind: str, name: str, patch: dict[str, Any], **kw: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self._run(self.source.patch(kind, name, patch, **kw))
        return result

    async def create_or_update(self, obj: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self._run(self.source.create_or_update(obj))
        return result

    async def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        await self._run(self.source.delete(kind, name, namespace=namespace))

    async def evict(self, namespace: str, name: str, uid: str, reason: str) -> None:
        await self._run(self.source.delete("Pod", name, namespace=namespace))


def _web(i: int, node_name: str) -> dict[str, Any]:
    p = pod(f"web-{i}", "1", "1Gi", node=node_name, labels={"app": "web"}, owner=OWNER)
    p["status"].update(READY)
    return p


@pytest.fixture(params=[1, 2, 3], ids=lambda s: f"seed{s}")
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[LiveServer, LoopSource, int]]:
    nodes = [node(n, cpu="5", memory="16Gi") for n in HOT] + [node(n, cpu="8", memory="16Gi") for n in COLD]
    pods = [_web(i, HOT[i % 3]) for i in range(12)]
    source = LoopSource(write_cluster(tmp_path / "cluster", [*nodes, *pods]), seed=request.param, poll_interval=0)
    with LiveServer(source) as srv:
        yield srv, source, request.param


def test_six_racing_replacements_end_every_job(cluster: tuple[LiveServer, LoopSource, int]) -> None:
    srv, source, seed = cluster
    desched = ClusterCache()
    ctl = MigrationController(desched, Bridge(source), MigrationControllerArgs(max_migrating_per_node=2))

    def refresh() -> None:
        for kind, objs in source.call(source.copies()).items():
            desched.replace(kind, objs)

    def reconcile() -> dict[str, dict[str, Any]]:
        refresh()
        asyncio.run(ctl.reconcile())
        refresh()
        return {j["metadata"]["name"]: j for j in desched.objects.get("PodMigrationJob", {}).values()}

    # six jobs, two per hot node (LowNodeLoad's evictions through the MigrationController evictor)
    for i in range(6):
        obj = copy.deepcopy(srv.service.cache.pod_objects[f"uid-web-{i}"])
        job = new_job(obj, f"pmj-{i}", "ReservationFirst", 300, "node is overutilized")
        source.call(source.create_or_update(job))
    jobs = reconcile()
    assert {j["status"]["phase"] for j in jobs.values()} == {"Running"}
    store = srv.service.framework.plugin("Reservation").store
    names = [j["spec"]["reservationOptions"]["reservationRef"]["name"] for j in jobs.values()]
    wait_for(lambda: all(store.get(n) is not None and store.get(n).phase == "Available" for n in names))
    jobs = reconcile()  # the six evictions
    assert {j["status"].get("message") for j in jobs.values()} == {"WaitForPodBindReservation"}
    assert not any(f"uid-web-{i}" in srv.service.cache.pods for i in range(6))

    # the ReplicaSet creates the six replacements together; kube-scheduler binds them back to back
    replacements = []
    for i in range(6):
        new = pod(f"web-new-{i}", "1", "1Gi", labels={"app": "web"}, owner=OWNER)
        del new["metadata"]["resourceVersion"]
        replacements.append(source.call(source.create_or_update(new)))
    wait_for(lambda: all(p["metadata"]["uid"] in srv.service.cache.pods for p in replacements))
    loop = SchedulerLoop(srv.url, [node(n, cpu="5") for n in HOT] + [node(n, cpu="8") for n in COLD], seed=seed)
    try:
        out = loop.run(replacements)
    finally:
        loop.close()
    assert sorted(out.bound) == sorted(p["metadata"]["name"] for p in replacements), out.bind_errors
    for p in replacements:  # the kubelet starts them
        source.call(source.patch("Pod", p["metadata"]["name"], {"status": READY}, namespace="default"))

    # allocate-once: never two owners, never more allocated than reserved
    for name in names:
        info = store.get(name)
        owners = store.pods_of.get(name, set())
        assert info is None or len(owners) <= 1, (name, owners)
        if info is not None:
            allocated = store.allocated(name)
            assert all(allocated.get(r, 0) <= v for r, v in info.allocatable.items()), (name, allocated)

    # every job ends: the first round after the binds moves each to its end (Ready pods: the second at most)
    jobs = reconcile()
    jobs = reconcile()
    phases = {n: (j["status"]["phase"], j["status"].get("reason"), j["status"].get("message")) for n, j in jobs.items()}
    assert all(p[0] in ("Succeeded", "Failed") for p in phases.values()), phases
    new_pods = [j["status"].get("podRef", {}).get("name") for j in jobs.values() if j["status"]["phase"] == "Succeeded"]
    assert len(new_pods) == len(set(new_pods)), new_pods  # one replacement per job
    # no Reservation left Available without an owner (the scheduler's controller marks the owned Succeeded)
    wait_for(
        lambda: all(store.get(n) is None or store.get(n).phase != "Available" or store.pods_of.get(n) for n in names)
    )
    for name in names:
        info = store.get(name)
        assert info is None or info.phase != "Available" or store.pods_of.get(name), name
