"""PodMigrationJobs whose replacements race (issue 45), on the file source with the scheduler's part played by
the test: six evictions, the ReplicaSet's six replacements created together, three bound into Reservations
(crossed: a replacement takes another job's Reservation) and three onto free capacity, as kube-scheduler
leaves them when it binds back to back. Before the fix the three jobs whose Reservation nobody took waited in
``WaitForPodBindReservation`` until the TTL and their Reservations held room on the cold nodes all along; now
one controller round ends every job and deletes the unused Reservations. Also: a Reservation taken by another
pod before the eviction aborts the job without evicting (upstream's ``ForbiddenMigratePod``), and a job keeps
waiting while a replacement is pending or not yet created."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from app.cache.snapshot import ClusterCache
from app.descheduler.config import MigrationControllerArgs
from app.descheduler.migration import MigrationController, new_job
from app.sources.files import FileSource

from .builders import OWNER

KINDS = ("Node", "Pod", "Reservation", "PodMigrationJob")
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
HOT = ["hot-0", "hot-1", "hot-2"]
COLD = ["cold-0", "cold-1", "cold-2"]


def _pod(name: str, node: str = "", uid: str = "", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "ownerReferences": OWNER}
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": READY if node else {}}


class Cluster:
    """The file source, the descheduler's cache over it and the migration controller."""

    def __init__(self, tmp: Path, pods: int) -> None:
        nodes = [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}, "status": {"allocatable": {"cpu": "8"}}}
            for n in HOT + COLD
        ]
        objs = [*nodes, *(_pod(f"web-{i}", HOT[i % 3], f"uid-web-{i}") for i in range(pods))]
        (tmp / "c.yaml").write_text(yaml.safe_dump_all(objs))
        self.source = FileSource(tmp / "c.yaml", poll_interval=0, restamp_interval=0, kinds=KINDS)
        self.cache = ClusterCache()
        self.ctl = MigrationController(self.cache, self.source, MigrationControllerArgs(max_migrating_per_node=2))

    async def start(self, jobs: int) -> None:
        await self.source.start(self.cache)
        for i in range(jobs):
            obj = self.cache.pod_objects[f"uid-web-{i}"]
            await self.source.create_or_update(new_job(obj, f"pmj-{i}", "ReservationFirst", 300, "overutilized"))
        await asyncio.sleep(0)

    async def step(self) -> dict[str, dict[str, Any]]:
        await self.ctl.reconcile()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return {n: j for n, j in self.cache.objects["PodMigrationJob"].items()}

    def reservation(self, job: dict[str, Any]) -> tuple[str, str]:
        name = job["spec"]["reservationOptions"]["reservationRef"]["name"]
        return name, self.cache.objects["Reservation"][name]["metadata"]["uid"]

    async def schedule_reservation(self, name: str, node: str) -> None:
        """The scheduler places the Reservation: Available on ``node``."""
        await self.source.patch(
            "Reservation", name, {"status": {"phase": "Available", "nodeName": node}}, subresource="status"
        )

    async def evicted_pods_go(self) -> None:
        """The API server carries out the recorded evictions: the pods are deleted."""
        for e in self.source.evictions:
            if f"{e['namespace']}/{e['name']}" in self.source._objects.get("Pod", {}):
                await self.source.delete("Pod", e["name"], namespace=e["namespace"])
        await asyncio.sleep(0)

    async def bound(self, name: str, node: str, reservation: tuple[str, str] | None = None) -> None:
        """A replacement the scheduler bound to ``node`` (into ``reservation`` when given), running and Ready."""
        ann = {ALLOCATED: json.dumps({"name": reservation[0], "uid": reservation[1]})} if reservation else None
        await self.source.create_or_update(_pod(name, node, annotations=ann))
        await asyncio.sleep(0)


def _ended(jobs: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str, str]]:
    return {
        n: (j["status"]["phase"], j["status"].get("reason", ""), (j["status"].get("podRef") or {}).get("name", ""))
        for n, j in sorted(jobs.items())
    }


def test_six_evictions_whose_replacements_race_all_end(tmp_path: Path) -> None:
    async def go() -> None:
        c = Cluster(tmp_path, pods=12)
        await c.start(jobs=6)
        jobs = await c.step()
        assert {j["status"]["phase"] for j in jobs.values()} == {"Running"}
        resv = [c.reservation(jobs[f"pmj-{i}"]) for i in range(6)]
        for i, (name, _) in enumerate(resv):
            await c.schedule_reservation(name, COLD[i % 3])
        await asyncio.sleep(0)
        jobs = await c.step()
        assert sorted(e["name"] for e in c.source.evictions) == [f"web-{i}" for i in range(6)]
        assert {j["status"]["message"] for j in jobs.values()} == {"WaitForPodBindReservation"}
        await c.evicted_pods_go()
        # nothing created yet: the running web-6..11 are no replacements, every job waits
        jobs = await c.step()
        assert {j["status"]["phase"] for j in jobs.values()} == {"Running"}
        # the six replacements together; kube-scheduler binds three into Reservations, crossed, three beside them
        await c.bound("new-0", COLD[1], resv[1])
        await c.bound("new-1", COLD[2], resv[2])
        await c.bound("new-2", COLD[0], resv[0])
        await c.bound("new-3", COLD[0])
        await c.bound("new-4", HOT[1])
        await c.bound("new-5", COLD[2])
        jobs = await c.step()  # one round
        assert _ended(jobs) == {
            "pmj-0": ("Succeeded", "", "new-2"),
            "pmj-1": ("Succeeded", "", "new-0"),
            "pmj-2": ("Succeeded", "", "new-1"),
            "pmj-3": ("Succeeded", "", "new-3"),  # web-3 left hot-0: new-3 on cold-0
            "pmj-4": ("Succeeded", "", "new-5"),  # web-4 left hot-1: new-4 there came back, new-5 did not
            "pmj-5": ("Succeeded", "", "new-4"),
        }
        assert "outside Reservation" in jobs["pmj-3"]["status"]["message"]
        # the unused Reservations are gone at once; the taken ones stay for their owners
        left = set(c.cache.objects.get("Reservation", {}))
        assert left == {resv[i][0] for i in range(3)}
        assert len(c.source.evictions) == 6
        await c.source.stop()

    asyncio.run(go())


def test_replacement_back_on_the_node_it_left_fails_the_job(tmp_path: Path) -> None:
    async def go() -> None:
        c = Cluster(tmp_path, pods=1)
        await c.start(jobs=1)
        jobs = await c.step()
        name, _ = c.reservation(jobs["pmj-0"])
        await c.schedule_reservation(name, COLD[0])
        await asyncio.sleep(0)
        await c.step()
        await c.evicted_pods_go()
        await c.bound("new-0", HOT[0])  # web-0 ran on hot-0
        jobs = await c.step()
        assert _ended(jobs) == {"pmj-0": ("Failed", "ForbiddenMigratePod", "new-0")}
        assert "Reservation" not in c.cache.objects or name not in c.cache.objects["Reservation"]
        await c.source.stop()

    asyncio.run(go())


def test_a_pending_replacement_keeps_the_job_waiting(tmp_path: Path) -> None:
    async def go() -> None:
        c = Cluster(tmp_path, pods=2)
        await c.start(jobs=2)
        jobs = await c.step()
        resv = [c.reservation(jobs[f"pmj-{i}"]) for i in range(2)]
        for name, _ in resv:
            await c.schedule_reservation(name, COLD[0])
        await asyncio.sleep(0)
        await c.step()
        await c.evicted_pods_go()
        await c.bound("new-0", COLD[1])  # outside both Reservations
        await c.source.create_or_update(_pod("new-1"))  # still pending: it may take one
        await asyncio.sleep(0)
        jobs = await c.step()
        assert {j["status"]["phase"] for j in jobs.values()} == {"Running"}
        await c.source.delete("Pod", "new-1", namespace="default")
        await c.bound("new-1", COLD[0], resv[1])
        jobs = await c.step()
        assert _ended(jobs) == {"pmj-0": ("Succeeded", "", "new-0"), "pmj-1": ("Succeeded", "", "new-1")}
        await c.source.stop()

    asyncio.run(go())


def test_reservation_taken_before_the_eviction_aborts_without_evicting(tmp_path: Path) -> None:
    async def go() -> None:
        c = Cluster(tmp_path, pods=1)
        await c.start(jobs=1)
        jobs = await c.step()
        name, uid = c.reservation(jobs["pmj-0"])
        await c.bound("other", COLD[0], (name, uid))  # a pod of the workload took it first
        await c.schedule_reservation(name, COLD[0])
        await asyncio.sleep(0)
        jobs = await c.step()
        status = jobs["pmj-0"]["status"]
        assert (status["phase"], status["reason"]) == ("Failed", "ForbiddenMigratePod")
        assert status["message"] == "Reservation is already bound by another Pod"
        assert c.source.evictions == []
        await c.source.stop()

    asyncio.run(go())
