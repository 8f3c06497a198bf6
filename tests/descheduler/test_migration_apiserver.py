"""A ReservationFirst PodMigrationJob against the fake API server over real HTTP: the Reservation is
POSTed, the pod is evicted only after the Reservation is Available, a PDB's 429 is retried (never a
DELETE of the pod), and the job Succeeds with the new pod. The test plays the scheduler and the
informers (the cache is refreshed from the server's store between passes)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from app.api.timeparse import format_time
from app.cache.snapshot import ClusterCache
from app.descheduler.config import MigrationControllerArgs
from app.descheduler.migration import MigrationController, new_job
from app.sources.kubernetes import KubernetesSource
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer

from .builders import OWNER

PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
RESV = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
PMJ = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"


def _pod(name, node, **meta):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": OWNER, **meta},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def test_reservation_first_against_the_api_server(tmp_path: Path) -> None:
    fake = FakeAPIServer(tokens={TOKEN})
    try:
        asyncio.run(_go(fake, write_kubeconfig(tmp_path / "kc", fake.url)))
    finally:
        fake.close()


async def _go(fake: FakeAPIServer, kubeconfig: str) -> None:
    fake.seed(NODES, *({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in ("a", "b")))
    fake.seed(PODS, _pod("web-1", "a", labels={"pdb": "blocked"}))
    old = fake.store[PODS]["web-1"]
    job = new_job(old, "job-1", "ReservationFirst", 300, "node is overutilized")
    job["metadata"]["creationTimestamp"] = format_time(time.time())
    fake.seed(PMJ, job)
    source = KubernetesSource(("Pod", "Reservation", "PodMigrationJob"), kubeconfig=kubeconfig)
    cache = ClusterCache()

    def refresh() -> None:
        for kind, coll in (("Pod", PODS), ("Reservation", RESV), ("PodMigrationJob", PMJ)):
            cache.replace(kind, [json.loads(json.dumps(o)) for o in fake.store[coll].values()])

    ctl = MigrationController(cache, source, MigrationControllerArgs())

    async def step() -> dict:
        refresh()
        await ctl.reconcile()
        return fake.store[PMJ]["job-1"]

    def evictions() -> list:
        return [r for r in fake.requests if r.path.endswith("/eviction")]

    try:
        job = await step()
        assert job["status"]["phase"] == "Running"
        rname = job["spec"]["reservationOptions"]["reservationRef"]["name"]
        resv = fake.store[RESV][rname]
        assert resv["spec"]["allocateOnce"] is True and resv["spec"]["owners"][0]["controller"]["uid"] == "rs-1"
        job = await step()
        assert job["status"]["message"] == "WaitForReservationScheduled" and evictions() == []
        fake.store[RESV][rname]["status"] = {"phase": "Available", "nodeName": "b"}  # the scheduler's bind
        job = await step()
        assert len(evictions()) == 1 and "disruption budget" in job["status"]["message"]
        assert "web-1" in fake.store[PODS]
        fake.store[PODS]["web-1"]["metadata"]["labels"] = {}  # the PDB allows it now
        job = await step()
        assert len(evictions()) == 2 and "web-1" not in fake.store[PODS]
        assert job["status"]["message"] == "WaitForPodBindReservation"
        allocated = json.dumps({"name": rname, "uid": fake.store[RESV][rname]["metadata"]["uid"]})
        new = _pod("web-2", "b", annotations={"scheduling.koordinator.sh/reservation-allocated": allocated})
        new["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        fake.seed(PODS, new)
        job = await step()
        assert job["status"]["phase"] == "Succeeded"
        assert job["status"]["podRef"]["name"] == "web-2"
        assert not [r for r in fake.requests if r.method == "DELETE" and "/pods/" in r.path]
    finally:
        await source.stop()
