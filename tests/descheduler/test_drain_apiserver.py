"""DrainNode against the fake API server over real HTTP: the DrainNodeController and the MigrationController
drain a node of six pods (two of them under a PodDisruptionBudget allowing one disruption) to empty, every pod
replaced on its Reservation, the budget never broken and at most ``maxMigratingPerNode`` jobs running; a drain
with no room elsewhere says why and evicts only what it placed; undo uncordons.

The test plays kube-scheduler (it reserves room for Reservations on nodes with free cpu, refusing nodes the
Reservation's affinity refuses, else reports them Unschedulable), the ReplicaSet controller (a replacement pod
bound to the Reservation, Ready one pass later) and the disruption controller (``disruptionsAllowed`` from the
Ready pods); the cache is refreshed from the server's store between passes, as informers would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.api import drain as api
from app.cache.snapshot import ClusterCache
from app.descheduler.config import MigrationControllerArgs
from app.descheduler.drain import DrainNodeController
from app.descheduler.migration import MigrationController
from app.sources.kubernetes import KubernetesSource
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer

from .builders import OWNER

PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
RESV = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
PMJ = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
DN = "/apis/scheduling.koordinator.sh/v1alpha1/drainnodes"
KINDS = (("Node", NODES), ("Pod", PODS), ("Reservation", RESV), ("PodMigrationJob", PMJ), ("DrainNode", DN))
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def node(name: str, cpu: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}},
    }


def pod(name: str, node_name: str, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": OWNER, "labels": labels or {}, **meta},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def ready(p: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in p["status"].get("conditions") or [])


class Cluster:
    """The fake API server, both controllers and the test's stand-ins for the other controllers."""

    def __init__(self, fake: FakeAPIServer, source: KubernetesSource, args: MigrationControllerArgs) -> None:
        self.fake, self.source = fake, source
        self.cache = ClusterCache()
        self.drain = DrainNodeController(self.cache, source)
        self.migration = MigrationController(self.cache, source, args)
        self.max_running = 0
        self.min_healthy_db = 99

    def store(self, coll: str) -> dict[str, dict[str, Any]]:
        return self.fake.store[coll]

    def refresh(self) -> None:
        for kind, coll in KINDS:
            self.cache.replace(kind, [json.loads(json.dumps(o)) for o in self.store(coll).values()])

    def requested(self, node_name: str) -> int:
        pods = sum(1 for p in self.store(PODS).values() if p["spec"].get("nodeName") == node_name)
        held = sum(
            1
            for r in self.store(RESV).values()
            if (r.get("status") or {}).get("phase") == "Available" and r["status"].get("nodeName") == node_name
        )
        return pods + held

    def schedule(self) -> None:
        """kube-scheduler with the Reservation plugin: place pending Reservations, first fit by name."""
        for r in sorted(self.store(RESV).values(), key=lambda r: r["metadata"]["name"]):
            if (r.get("status") or {}).get("phase") in ("Available", "Succeeded", "Failed"):
                continue
            terms = r["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
            need_absent = {
                e["key"] for t in terms for e in t.get("matchExpressions") or [] if e["operator"] == "DoesNotExist"
            }
            assert api.LABEL_PLANNING in need_absent  # the drain keeps its Reservations off drained nodes
            fits = [
                n
                for n in sorted(self.store(NODES).values(), key=lambda n: n["metadata"]["name"])
                if not need_absent & set(n["metadata"].get("labels") or {})
                and not n["spec"].get("unschedulable")
                and self.requested(n["metadata"]["name"]) < int(n["status"]["allocatable"]["cpu"])
            ]
            if fits:
                r["status"] = {"phase": "Available", "nodeName": fits[0]["metadata"]["name"]}
            else:
                message = f"0/{len(self.store(NODES))} nodes are available: Insufficient cpu"
                cond = {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": message}
                r["status"] = {"phase": "Pending", "conditions": [cond]}

    def replicaset(self) -> None:
        """A replacement for every evicted pod, bound to its Reservation; Ready one pass later."""
        for p in self.store(PODS).values():
            if (p["metadata"].get("annotations") or {}).get(ALLOCATED) and not ready(p):
                p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        for r in self.store(RESV).values():
            status = r.get("status") or {}
            gone = r["metadata"]["labels"][api.LABEL_POD_NAME] not in self.store(PODS)
            if status.get("phase") != "Available" or not gone:
                continue
            old = r["metadata"]["labels"][api.LABEL_POD_NAME]
            allocated = json.dumps({"name": r["metadata"]["name"], "uid": r["metadata"]["uid"]})
            new = pod(f"{old}-new", status["nodeName"], r["spec"]["template"]["metadata"]["labels"])
            new["metadata"]["annotations"] = {ALLOCATED: allocated}
            new["status"]["conditions"] = []
            self.fake.seed(PODS, new)
            status["phase"] = "Succeeded"  # allocateOnce: consumed by its owner

    def disruption(self) -> None:
        """The disruption controller: ``disruptionsAllowed`` = Ready pods selected - minAvailable."""
        for pdb in self.store(PDBS).values():
            sel = pdb["spec"]["selector"]["matchLabels"]
            healthy = sum(
                1 for p in self.store(PODS).values() if all(p["metadata"]["labels"].get(k) == v for k, v in sel.items())
                and ready(p)
            )  # fmt: skip
            self.min_healthy_db = min(self.min_healthy_db, healthy)
            pdb["status"] = {"disruptionsAllowed": max(0, healthy - pdb["spec"]["minAvailable"])}

    async def step(self) -> dict[str, Any]:
        self.refresh()
        await self.drain.reconcile()
        self.refresh()
        await self.migration.reconcile()
        self.disruption()  # before anything is replaced: what the evictions left
        running = sum(1 for j in self.store(PMJ).values() if (j.get("status") or {}).get("phase") == "Running")
        self.max_running = max(self.max_running, running)
        self.schedule()
        self.replicaset()
        self.disruption()
        return next(iter(self.store(DN).values()))


def run_cluster(tmp_path: Path, body: Callable[[Cluster], Any], args: MigrationControllerArgs | None = None) -> None:
    fake = FakeAPIServer(tokens={TOKEN})

    async def go() -> None:
        kinds = ("Node", "Pod", "Reservation", "PodMigrationJob", "DrainNode")
        source = KubernetesSource(kinds, kubeconfig=write_kubeconfig(tmp_path / "kc", fake.url))
        try:
            await body(Cluster(fake, source, args or MigrationControllerArgs()))
        finally:
            await source.stop()

    try:
        asyncio.run(go())
    finally:
        fake.close()


def evictions(fake: FakeAPIServer) -> list[Any]:
    return [r for r in fake.requests if r.method == "POST" and r.path.endswith("/eviction")]


def test_drain_six_pods_to_empty_on_their_reservations_never_breaking_the_pdb(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        fake = c.fake
        fake.seed(NODES, node("drain-me", 8), node("b", 4), node("c", 4))
        # uids whose first 8 characters (the job names) put the two db pods' jobs first: both run at once
        uid = "{}-0000-4000-8000-000000000000".format
        db = [pod(f"db-{i}", "drain-me", {"app": "db"}, uid=uid(f"a000000{i}")) for i in (0, 1)]
        web = [pod(f"web-{i}", "drain-me", {"app": "web"}, uid=uid(f"b000000{i}")) for i in range(4)]
        fake.seed(PODS, *db, *web)
        pdb = {"metadata": {"name": "db", "namespace": "default"}, "spec": {"minAvailable": 1,
               "selector": {"matchLabels": {"app": "db"}}}, "status": {"disruptionsAllowed": 1}}  # fmt: skip
        fake.seed(PDBS, pdb)
        original = {p["metadata"]["name"]: p["metadata"]["uid"] for p in c.store(PODS).values()}
        fake.seed(DN, api.new_drain_node("drain-me-1", "drain-me"))

        dn = await c.step()
        assert dn["status"]["phase"] == "Pending"
        dn = await c.step()
        assert dn["status"]["phase"] == "Running"
        drained = c.store(NODES)["drain-me"]
        assert drained["spec"]["unschedulable"] is True
        assert drained["metadata"]["labels"][api.LABEL_PLANNING] == ""
        assert drained["metadata"]["annotations"][api.ANNOTATION_CORDONED_BY] == "drain-me-1"
        for _ in range(30):
            dn = await c.step()
            if dn["status"]["phase"] == "Complete":
                break
        status = dn["status"]
        assert status["phase"] == "Complete", status
        entries = status[api.STATUS_POD_MIGRATIONS]
        assert sorted(e["podName"] for e in entries) == sorted(original)
        assert {e["phase"] for e in entries} == {"Succeed"}
        assert status[api.STATUS_POD_MIGRATION_SUMMARY]["Succeed"] == 6
        assert not [p for p in c.store(PODS).values() if p["spec"]["nodeName"] == "drain-me"]
        for entry in entries:  # every pod replaced on the node of its own Reservation
            rname = api.migration_name("drain-me-1", original[entry["podName"]])
            assert entry["reservationName"] == rname == entry["podMigrationJobName"]
            reservation = c.store(RESV)[rname]
            assert reservation["metadata"]["labels"][api.LABEL_DRAIN_NODE] == "drain-me-1"
            assert reservation["metadata"]["ownerReferences"][0]["kind"] == "DrainNode"
            replacement = c.store(PODS)[f"{entry['podName']}-new"]
            assert json.loads(replacement["metadata"]["annotations"][ALLOCATED])["name"] == rname
            assert replacement["spec"]["nodeName"] == reservation["status"]["nodeName"] == entry["targetNode"]
            assert entry["targetNode"] in ("b", "c")
        assert c.min_healthy_db >= 1  # minAvailable 1: never broken
        refused = [r for r in evictions(fake) if r.path.endswith(("db-0/eviction", "db-1/eviction"))]
        assert len(refused) > 2  # the second db pod waited for the first one's replacement (429, retried)
        assert not [r for r in fake.requests if r.method == "DELETE" and "/pods/" in r.path]
        assert c.max_running <= 2  # maxMigratingPerNode
        conds = {x["type"]: x["status"] for x in status["conditions"]}
        assert conds[api.COND_ONCE_AVAILABLE] == "True"
        assert conds[api.COND_UNAVAILABLE_RESERVATION_EXISTS] == "False"
        assert c.store(NODES)["drain-me"]["spec"]["unschedulable"] is True  # left cordoned

        # undo: uncordons (the pods stay where they moved)
        c.store(DN)["drain-me-1"]["spec"]["confirmState"] = api.CONFIRM_ABORTED
        await c.step()
        undone = c.store(NODES)["drain-me"]
        assert "unschedulable" not in undone["spec"]
        assert api.LABEL_PLANNING not in undone["metadata"]["labels"]
        assert api.ANNOTATION_CORDONED_BY not in undone["metadata"].get("annotations", {})

    run_cluster(tmp_path, body)


def test_no_room_elsewhere_says_why_and_evicts_only_what_it_placed(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        fake = c.fake
        fake.seed(NODES, node("drain-me", 8), node("b", 1))
        fake.seed(PODS, *(pod(f"web-{i}", "drain-me", {"app": "web"}) for i in range(3)))
        fake.seed(DN, api.new_drain_node("full", "drain-me"))
        for _ in range(12):
            dn = await c.step()
            if dn["status"].get("phase") == "Complete":
                break
        status = dn["status"]
        phases = sorted(e["phase"] for e in status[api.STATUS_POD_MIGRATIONS])
        assert phases == ["Succeed", "Unavailable", "Unavailable"]
        assert len(evictions(fake)) == 1  # only the pod whose Reservation got room
        still = sorted(p["metadata"]["name"] for p in c.store(PODS).values() if p["spec"]["nodeName"] == "drain-me")
        unavailable = [e for e in status[api.STATUS_POD_MIGRATIONS] if e["phase"] == "Unavailable"]
        assert sorted(e["podName"] for e in unavailable) == still
        why = "cannot be scheduled: 0/2 nodes are available: Insufficient cpu"
        assert all(why in e["message"] for e in unavailable)
        cond = next(x for x in status["conditions"] if x["type"] == api.COND_UNAVAILABLE_RESERVATION_EXISTS)
        assert cond["status"] == "True" and cond["reason"] == "unavailable reservation count: 2"
        assert all(name in cond["message"] for name in still) and "Insufficient cpu" in cond["message"]
        assert not [j for j in c.store(PMJ).values() if j["spec"]["podRef"]["name"] in still]

    run_cluster(tmp_path, body)


def test_wait_for_confirm_plans_without_evicting_then_abort_cleans_up(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        fake = c.fake
        fake.seed(NODES, node("drain-me", 8), node("b", 4))
        fake.seed(PODS, pod("web-0", "drain-me"), pod("bare", "drain-me", ownerReferences=[]))
        drain = api.new_drain_node("plan", "drain-me", confirm_state=api.CONFIRM_WAIT, cordon_mode=api.CORDON_TAINT)
        fake.seed(DN, drain)
        for _ in range(5):
            dn = await c.step()
        entries = {e["podName"]: e for e in dn["status"][api.STATUS_POD_MIGRATIONS]}
        assert entries["web-0"]["phase"] == "Available" and entries["web-0"]["targetNode"] == "b"
        assert entries["bare"]["phase"] == "Unmigratable"
        assert entries["bare"]["message"] == "pod does not have any ownerRefs"
        assert evictions(fake) == [] and c.store(PMJ) == {}
        taint = {"key": api.LABEL_DRAIN_NODE, "value": "plan", "effect": "NoSchedule"}
        assert taint in c.store(NODES)["drain-me"]["spec"]["taints"]
        conds = {x["type"]: x for x in dn["status"]["conditions"]}
        assert conds[api.COND_UNMIGRATABLE_POD_EXISTS]["status"] == "True"
        assert "default/bare: pod does not have any ownerRefs" in conds[api.COND_UNMIGRATABLE_POD_EXISTS]["message"]

        c.store(DN)["plan"]["spec"]["confirmState"] = api.CONFIRM_ABORTED
        dn = await c.step()
        assert dn["status"]["phase"] == "Aborted"
        dn = await c.step()
        assert c.store(RESV) == {}  # the aborted drain's Reservations are deleted
        node_after = c.store(NODES)["drain-me"]
        assert not node_after["spec"].get("taints") and not node_after["spec"].get("unschedulable")
        assert "web-0" in c.store(PODS)

    run_cluster(tmp_path, body)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confirm_state": "Sure"}, "confirmState must be one of"),
        ({"mode": "Now"}, "migrationPolicy.mode must be WaitFirst or MigrateDirectly"),
        ({"cordon_mode": "Paint"}, "cordonPolicy.mode must be Taint or Label"),
    ],
)
def test_new_drain_node_refuses_values_upstream_does_not_know(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        api.new_drain_node("x", "n", **kwargs)


def test_a_drain_of_a_missing_node_stays_pending_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body(c: Cluster) -> None:
        c.fake.seed(DN, api.new_drain_node("ghost", "no-such-node"))
        for _ in range(3):
            dn = await c.step()
        assert dn["status"]["phase"] == "Pending"
        assert not [r for r in c.fake.requests if r.method == "PATCH" and r.path.startswith(NODES)]

    with caplog.at_level("WARNING", logger="koord.descheduler.drain"):
        run_cluster(tmp_path, body)
    assert [r.getMessage() for r in caplog.records].count(
        "DrainNode ghost: node 'no-such-node' not found; it stays Pending until the node exists"
    ) == 1
