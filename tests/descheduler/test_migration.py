"""PodMigrationJob through every phase on the file source (the scheduler's part played by the test)."""

import asyncio
import json
import time

import yaml

from app.cache.snapshot import ClusterCache
from app.client.errors import TooManyRequests
from app.descheduler.config import MigrationControllerArgs
from app.descheduler.migration import MigrationController, new_job
from app.sources.files import FileSource

from .builders import OWNER

KINDS = ("Node", "Pod", "Reservation", "PodMigrationJob")


def _pod(name, node, uid, **meta):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "ownerReferences": OWNER, **meta},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }


class PdbOnce(FileSource):
    """A file source whose first eviction is refused with 429, as a PodDisruptionBudget would."""

    refused = 0

    async def evict(self, namespace, name, uid, reason):
        if self.refused == 0:
            self.refused += 1
            raise TooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.")
        await super().evict(namespace, name, uid, reason)

    async def delete(self, kind, name, *, namespace=None):
        assert kind != "Pod", "a 429 must never become a delete"
        await super().delete(kind, name, namespace=namespace)


async def _setup(tmp_path, mode, source_cls=FileSource, clock=None):
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}, "status": {"allocatable": {"cpu": "8"}}}
        for n in ("a", "b")
    ]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all([*nodes, _pod("web-1", "a", "old-uid")]))
    source = source_cls(tmp_path / "c.yaml", poll_interval=0, restamp_interval=0, kinds=KINDS)
    cache = ClusterCache()
    await source.start(cache)
    now = [1_000.0]
    ctl = MigrationController(cache, source, MigrationControllerArgs(), clock=clock or (lambda: now[0]))
    await source.create_or_update(new_job(cache.pod_objects["old-uid"], "job-1", mode, 300, "node is overutilized"))
    await asyncio.sleep(0)
    return source, cache, ctl, now


async def _step(ctl):
    await ctl.reconcile()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return ctl.cache.objects["PodMigrationJob"]["job-1"]


def test_reservation_first_through_every_phase(tmp_path):
    async def go():
        source, cache, ctl, _ = await _setup(tmp_path, "ReservationFirst", clock=time.time)
        job = await _step(ctl)
        assert job["status"]["phase"] == "Running"
        rname = job["spec"]["reservationOptions"]["reservationRef"]["name"]
        resv = cache.objects["Reservation"][rname]
        assert resv["spec"]["allocateOnce"] is True
        assert resv["spec"]["owners"][0]["controller"]["uid"] == "rs-1"
        assert "nodeName" not in resv["spec"]["template"]["spec"]
        terms = resv["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert terms[0]["matchFields"] == [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]
        assert "scheduling.koordinator.sh/reservation-order" in resv["metadata"]["labels"]
        job = await _step(ctl)
        assert job["status"]["message"] == "WaitForReservationScheduled"
        assert source.evictions == []  # never before the reservation is Available
        await source.patch(
            "Reservation", rname, {"status": {"phase": "Available", "nodeName": "b"}}, subresource="status"
        )
        await asyncio.sleep(0)
        job = await _step(ctl)
        assert [e["name"] for e in source.evictions] == ["web-1"]
        assert job["status"]["message"] == "WaitForPodBindReservation"
        ruid = cache.objects["Reservation"][rname]["metadata"]["uid"]
        allocated = json.dumps({"name": rname, "uid": ruid})
        new = _pod("web-2", "b", "new-uid", annotations={"scheduling.koordinator.sh/reservation-allocated": allocated})
        await source.create_or_update(new)
        await asyncio.sleep(0)
        job = await _step(ctl)
        assert job["status"]["message"] == "WaitForBoundPodReady"
        await source.patch(
            "Pod",
            "web-2",
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            namespace="default",
            subresource="status",
        )
        await asyncio.sleep(0)
        job = await _step(ctl)
        assert job["status"]["phase"] == "Succeeded"
        assert job["status"]["podRef"] == {"namespace": "default", "name": "web-2", "uid": "new-uid"}
        assert len(source.evictions) == 1
        await source.stop()

    asyncio.run(go())


def test_evict_directly_retries_a_pdb_429_and_never_deletes(tmp_path):
    async def go():
        source, _, ctl, _ = await _setup(tmp_path, "EvictDirectly", PdbOnce, clock=time.time)
        job = await _step(ctl)
        assert job["status"]["phase"] == "Running" and "disruption budget" in job["status"]["message"]
        assert source.evictions == []
        job = await _step(ctl)
        assert job["status"]["phase"] == "Succeeded"
        assert [e["name"] for e in source.evictions] == ["web-1"]
        await source.stop()

    asyncio.run(go())


def test_timeout_fails_the_job_and_drops_its_reservation(tmp_path):
    async def go():
        offset = [0.0]
        source, cache, ctl, _ = await _setup(tmp_path, "ReservationFirst", clock=lambda: time.time() + offset[0])
        job = await _step(ctl)
        rname = job["spec"]["reservationOptions"]["reservationRef"]["name"]
        offset[0] = 301.0  # past the 300 s TTL
        job = await _step(ctl)
        assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")
        assert rname not in cache.objects.get("Reservation", {})
        assert source.evictions == []
        await source.stop()

    asyncio.run(go())


def test_arbitration_keeps_jobs_pending_over_max_migrating_per_node(tmp_path):
    async def go():
        source, cache, ctl, _ = await _setup(tmp_path, "ReservationFirst", clock=time.time)
        ctl.args.max_migrating_per_node = 1
        await _step(ctl)
        await source.create_or_update(_pod("web-3", "a", "uid-3"))
        await asyncio.sleep(0)
        second = new_job(cache.pod_objects["uid-3"], "job-2", "ReservationFirst", 300, "r")
        await source.create_or_update(second)
        await asyncio.sleep(0)
        await _step(ctl)
        job2 = cache.objects["PodMigrationJob"]["job-2"]
        assert job2["status"]["phase"] == "Pending" and "maxMigratingPerNode" in job2["status"]["message"]
        await source.stop()

    asyncio.run(go())


def test_max_unavailable_per_workload_counts_pods_not_ready(tmp_path):
    async def go():
        source, _, ctl, _ = await _setup(tmp_path, "ReservationFirst", clock=time.time)
        ctl.args.max_unavailable_per_workload = 1
        await source.create_or_update(_pod("web-0", "b", "uid-0"))  # same ReplicaSet, not Ready
        await asyncio.sleep(0)
        job = await _step(ctl)
        assert job["status"]["phase"] == "Pending" and "maxUnavailablePerWorkload" in job["status"]["message"]
        await source.patch(
            "Pod",
            "web-0",
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            namespace="default",
            subresource="status",
        )
        await source.patch(
            "Pod",
            "web-1",
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            namespace="default",
            subresource="status",
        )
        await asyncio.sleep(0)
        job = await _step(ctl)
        assert job["status"]["phase"] == "Running"
        await source.stop()

    asyncio.run(go())
