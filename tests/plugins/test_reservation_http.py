"""Reservation over real HTTP: placement, non-owners kept off reserved capacity, owners charged to it,
allocate policies, the controller (allocateOnce, expiry, node gone) and failed binds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.client.errors import Conflict
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.reservation.fixtures import (
    annotation_json,
    bind_call,
    filter_call,
    node,
    phase_is,
    pod,
    prioritize_call,
    reservation,
    reservation_view,
    wait_for,
    write_cluster,
)

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
WEB = {"app": "web"}


def _serve(tmp_path: Path, objects: list[dict[str, Any]], source_cls: type[FileSource] = FileSource) -> LiveServer:
    return LiveServer(source_cls(write_cluster(tmp_path / "cluster", objects), poll_interval=0.1))


@pytest.fixture
def placed(tmp_path: Path) -> Iterator[LiveServer]:
    """n1 (4 cpu) holds a reservation of 3 cpu pinned to it; n2 has 4 cpu free."""
    objs = [
        node("n1"),
        node("n2"),
        reservation("r1", cpu="3", memory="2Gi", node_name="n1", allocate_once=False),
        pod("web-1", "2", labels=WEB),
        pod("other", "2"),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        yield srv


def test_pending_reservation_is_placed_and_becomes_available(placed: LiveServer) -> None:
    view = reservation_view(placed, "r1")
    assert view["nodeName"] == "n1"
    assert view["allocatable"] == {"cpu": "3", "memory": "2Gi"}
    assert view["allocated"] == {}
    obj = placed.service.cache.objects["Reservation"]["r1"]
    assert obj["status"]["phase"] == "Available"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}
    assert conditions == {"Scheduled": ("True", "Scheduled"), "Ready": ("True", "Available")}
    node_view = placed.client.get("/apis/v1/plugins/Reservation/nodeReservations/n1").json()
    assert [r["name"] for r in node_view] == ["r1"]
    assert placed.client.get("/apis/v1/plugins/Reservation/nodeReservations/n2").json() == []
    assert placed.client.get("/apis/v1/plugins/Reservation/nodeReservations/nope").status_code == 404


def test_non_owner_cannot_take_reserved_capacity(placed: LiveServer) -> None:
    other = placed.service.cache.pod_objects["uid-other"]
    result = filter_call(placed, other, ["n1", "n2"])
    assert result["NodeNames"] == ["n2"]
    assert result["FailedNodes"]["n1"] == "Insufficient cpu (reserved)"
    # 1 cpu still fits beside the 3 reserved
    small = pod("small", "1")
    assert filter_call(placed, small, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
    # reservation-ignored pods bypass reservations
    ignored = pod("ign", "2", labels={"scheduling.koordinator.sh/reservation-ignored": "true"})
    assert filter_call(placed, ignored, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
    # koord explain shows the verdict per plugin
    body = {"Pod": other, "Nodes": None, "NodeNames": ["n1", "n2"]}
    explained = placed.client.post("/apis/v1/explain", json=body).json()["nodes"]
    assert explained["n1"]["filter"]["Reservation"] == {
        "status": "Unschedulable",
        "reason": "Insufficient cpu (reserved)",
    }
    assert explained["n2"]["filter"]["Reservation"]["status"] == "Success"


def test_owner_lands_on_the_reservation_node_and_is_charged_against_it(placed: LiveServer) -> None:
    web = placed.service.cache.pod_objects["uid-web-1"]
    assert filter_call(placed, web, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
    scores = prioritize_call(placed, web, ["n1", "n2"])
    assert scores["n1"] > scores["n2"] == 0
    assert bind_call(placed, web, "n1")["Error"] == ""
    wait_for(lambda: ALLOCATED in (placed.service.cache.pods["uid-web-1"].annotations))
    value = annotation_json(placed.service.cache.pods["uid-web-1"].annotations[ALLOCATED])
    assert value == {"name": "r1", "uid": "ruid-r1"}
    view = reservation_view(placed, "r1")
    assert view["allocated"] == {"cpu": "2", "memory": "1Gi"}
    assert view["remaining"] == {"cpu": "1", "memory": "1Gi"}
    # n1: 4 cpu, web-1 uses 2 (from the reservation), 1 still reserved: a 1-cpu non-owner fits, 2 do not
    assert filter_call(placed, pod("small", "1"), ["n1"])["NodeNames"] == ["n1"]
    assert filter_call(placed, pod("two", "2"), ["n1"])["FailedNodes"]["n1"] == "Insufficient cpu (reserved)"
    wait_for(
        lambda: (
            reservation_view(placed, "r1")["currentOwners"]
            == [{"namespace": "default", "name": "web-1", "uid": "uid-web-1"}]
        )
    )
    obj = wait_for(lambda: (placed.service.cache.objects["Reservation"]["r1"].get("status") or {}).get("currentOwners"))
    assert obj == [{"namespace": "default", "name": "web-1", "uid": "uid-web-1"}]
    assert placed.service.cache.objects["Reservation"]["r1"]["status"]["allocated"] == {"cpu": "2", "memory": "1Gi"}
    assert placed.service.cache.objects["Reservation"]["r1"]["status"]["phase"] == "Available"  # allocateOnce false


def test_allocate_once_then_succeeded_and_capacity_released(tmp_path: Path) -> None:
    objs = [node("n1"), reservation("r1", cpu="3", node_name="n1"), pod("web-1", "1", labels=WEB), pod("other", "3")]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        other = srv.service.cache.pod_objects["uid-other"]
        assert filter_call(srv, other, ["n1"])["FailedNodes"]["n1"] == "Insufficient cpu (reserved)"
        assert bind_call(srv, srv.service.cache.pod_objects["uid-web-1"], "n1")["Error"] == ""
        wait_for(lambda: phase_is(srv, "r1", "Succeeded"))
        status = srv.service.cache.objects["Reservation"]["r1"]["status"]
        assert {c["type"]: c["reason"] for c in status["conditions"]}["Ready"] == "Succeeded"
        assert status["currentOwners"] == [{"namespace": "default", "name": "web-1", "uid": "uid-web-1"}]
        # the rest of the reservation is free again: 3 cpu fit beside web-1's 1
        assert filter_call(srv, other, ["n1"])["NodeNames"] == ["n1"]


def test_restricted_refuses_spill_aligned_allows_it(tmp_path: Path) -> None:
    objs = [
        node("n1", cpu="8"),
        node("n2", cpu="8"),
        reservation("strict", cpu="2", node_name="n1", policy="Restricted"),
        reservation("loose", cpu="2", node_name="n2", policy="Aligned"),
        pod("web-big", "3", labels=WEB),
        pod("web-fit", "2", labels=WEB),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "strict", "Available") and phase_is(srv, "loose", "Available"))
        big = srv.service.cache.pod_objects["uid-web-big"]
        result = filter_call(srv, big, ["n1", "n2"])
        # Restricted: the 3 cpu must come from the 2-cpu reservation alone; the node alone is refused the
        # reserved cpu (upstream falls back to the node: 8 - 2 reserved = 6 free is enough) ...
        assert result["NodeNames"] == ["n1", "n2"]
        store = srv.service.framework.plugin("Reservation").store
        # ... but the pod is not placed into the Restricted reservation; it is into the Aligned one
        state_pod = srv.service.cache.pods["uid-web-big"]
        from app.framework.cyclestate import CycleState
        from app.framework.interfaces import NodeBatch

        plugin = srv.service.framework.plugin("Reservation")
        state = CycleState(time.time())
        assert plugin.pre_filter(state, state_pod).is_success()
        rows, _ = srv.service.cache.table.rows_of(["n1", "n2"])
        plugin.filter_nodes(state, state_pod, NodeBatch(rows, ["n1", "n2"]))
        found = state.get("Reservation/pod")
        assert [i.name for i in found.fitting["n1"]] == []
        assert [i.name for i in found.fitting["n2"]] == ["loose"]
        assert store.get("strict").allocate_policy == "Restricted"


def test_restricted_with_affinity_fails_with_upstream_reasons(tmp_path: Path) -> None:
    objs = [
        node("n1", cpu="8"),
        reservation("strict", cpu="2", node_name="n1", policy="Restricted"),
        pod(
            "web-big",
            "3",
            labels=WEB,
            annotations={"scheduling.koordinator.sh/reservation-affinity": '{"name": "strict"}'},
        ),
        pod(
            "web-ok",
            "2",
            labels=WEB,
            annotations={"scheduling.koordinator.sh/reservation-affinity": '{"name": "strict"}'},
        ),
        pod(
            "web-none",
            "1",
            labels=WEB,
            annotations={"scheduling.koordinator.sh/reservation-affinity": '{"name": "missing"}'},
        ),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "strict", "Available"))
        pods = srv.service.cache.pod_objects
        big = filter_call(srv, pods["uid-web-big"], ["n1"])
        assert big["FailedNodes"]["n1"] == "Reservation(s) Insufficient cpu"
        assert filter_call(srv, pods["uid-web-ok"], ["n1"])["NodeNames"] == ["n1"]
        none = filter_call(srv, pods["uid-web-none"], ["n1"])
        # no reservation matches: unresolvable on every node (preemption cannot help)
        assert none["FailedAndUnresolvableNodes"]["n1"] == "node(s) no reservations match reservation affinity"


def test_pods_limit_and_exact_match(tmp_path: Path) -> None:
    objs = [
        node("n1", cpu="8"),
        reservation("one-pod", cpu="4", node_name="n1", extra={"pods": "1"}, allocate_once=False),
        pod("web-1", "1", labels=WEB),
        pod(
            "web-2",
            "1",
            labels=WEB,
            annotations={"scheduling.koordinator.sh/exact-match-reservation": '{"resourceNames": ["cpu"]}'},
        ),
        pod("web-3", "1", labels=WEB),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "one-pod", "Available"))
        pods = srv.service.cache.pod_objects
        plugin = srv.service.framework.plugin("Reservation")
        # exact-match: 1 cpu != 4 cpu reserved: web-2 owns nothing
        from app.plugins.reservation.matching import match_pod

        assert match_pod(plugin.store, srv.service.cache.pods["uid-web-2"]).by_node == {}
        assert list(match_pod(plugin.store, srv.service.cache.pods["uid-web-1"]).by_node) == ["n1"]
        assert bind_call(srv, pods["uid-web-1"], "n1")["Error"] == ""
        wait_for(lambda: reservation_view(srv, "one-pod")["allocated"].get("cpu") == "1")
        # pods: 1 reached: web-3 cannot use it; the node alone has 8 - 1 - 3 remaining reserved = 4 cpu: fits
        state = srv.service.framework.new_cycle()
        info = srv.service.cache.pods["uid-web-3"]
        assert plugin.pre_filter(state, info).is_success()
        rows, _ = srv.service.cache.table.rows_of(["n1"])
        from app.framework.interfaces import NodeBatch

        assert plugin.filter_nodes(state, info, NodeBatch(rows, ["n1"])) == {}
        assert state.get("Reservation/pod").fitting["n1"] == []


def test_expiry_fails_the_reservation(tmp_path: Path) -> None:
    past = "2020-01-01T00:00:00Z"
    objs = [
        node("n1"),
        reservation("old", cpu="1", node_name="n1", expires=past),
        reservation("short", cpu="1", node_name="n1", ttl="1s", created=past),
        reservation("never", cpu="1", node_name="n1", ttl="0s", created=past),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "old", "Failed") and phase_is(srv, "short", "Failed"))
        for name in ("old", "short"):
            status = srv.service.cache.objects["Reservation"][name]["status"]
            ready = next(c for c in status["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("False", "Expired")
        assert wait_for(lambda: phase_is(srv, "never", "Available"))
        assert reservation_view(srv, "never")["expires"] is None


def test_node_deletion_fails_the_reservation_and_frees_nothing_twice(tmp_path: Path) -> None:
    cluster = write_cluster(tmp_path / "cluster", [node("n1"), node("n2"), reservation("r1", cpu="3", node_name="n1")])
    with LiveServer(FileSource(cluster, poll_interval=0.1)) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        write_cluster(cluster, [node("n2"), reservation("r1", cpu="3", node_name="n1")])
        wait_for(lambda: phase_is(srv, "r1", "Failed"))
        status = srv.service.cache.objects["Reservation"]["r1"]["status"]
        assert next(c for c in status["conditions"] if c["type"] == "Ready")["reason"] == "Expired"
        assert srv.client.get("/apis/v1/plugins/Reservation/nodeReservations/n2").json() == []


def test_unschedulable_reservation_stays_pending_with_reasons(tmp_path: Path) -> None:
    objs = [node("n1", cpu="2"), node("n2", cpu="2"), reservation("huge", cpu="3")]
    with _serve(tmp_path, objs) as srv:

        def cond() -> dict[str, Any] | None:
            status = srv.service.cache.objects["Reservation"]["huge"].get("status") or {}
            return next((c for c in status.get("conditions") or [] if c["type"] == "Scheduled"), None)

        scheduled = wait_for(cond)
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
        assert scheduled["message"] == "0/2 nodes are available: 2 Insufficient cpu."
        assert reservation_view(srv, "huge")["phase"] == "Pending"
        # room appears: retried with backoff and placed
        write_cluster(tmp_path / "cluster", [node("n1", cpu="2"), node("n2", cpu="4"), reservation("huge", cpu="3")])
        wait_for(lambda: phase_is(srv, "huge", "Available"), timeout=20)
        assert reservation_view(srv, "huge")["nodeName"] == "n2"


class _FailingBind(FileSource):
    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise Conflict(f"pod {name} refused by the test's API server")


def test_failed_owner_bind_returns_the_reserved_capacity(tmp_path: Path) -> None:
    objs = [node("n1"), reservation("r1", cpu="3", node_name="n1"), pod("web-1", "2", labels=WEB)]
    with _serve(tmp_path, objs, _FailingBind) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        result = bind_call(srv, srv.service.cache.pod_objects["uid-web-1"], "n1")
        assert "refused by the test's API server" in result["Error"]
        view = reservation_view(srv, "r1")
        assert view["allocated"] == {} and view["remaining"]["cpu"] == "3" and view["currentOwners"] == []
        plugin = srv.service.framework.plugin("Reservation")
        assert plugin.store.pod_reservation == {}
        # the full 3 cpu are still held: a 2-cpu non-owner is refused, the owner still fits
        assert filter_call(srv, pod("other", "2"), ["n1"])["FailedNodes"]["n1"] == "Insufficient cpu (reserved)"
        assert filter_call(srv, srv.service.cache.pod_objects["uid-web-1"], ["n1"])["NodeNames"] == ["n1"]


def test_bad_reservation_is_rejected_alone(tmp_path: Path) -> None:
    bad = reservation("bad", cpu="1")
    bad["spec"]["owners"] = [{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Nope"}]}}]
    no_template = reservation("no-template", cpu="1")
    del no_template["spec"]["template"]
    objs = [node("n1"), bad, no_template, reservation("good", cpu="1")]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "good", "Available"))
        names = [r["name"] for r in srv.client.get("/apis/v1/plugins/Reservation/reservations").json()]
        assert names == ["good"]
        assert srv.service.cache.rejected_by_kind.get("Reservation", 0) >= 2
        # a malformed affinity annotation fails the pod with a message, not a 500
        weird = pod("weird", "1", labels=WEB, annotations={"scheduling.koordinator.sh/reservation-affinity": "{"})
        result = filter_call(srv, weird, ["n1"])
        assert result["FailedAndUnresolvableNodes"]["n1"].startswith(
            "invalid scheduling.koordinator.sh/reservation-affinity"
        )


def test_example_reservation_is_placed_in_the_example_cluster(tmp_path: Path) -> None:
    from tests.conftest import EXAMPLE_CLUSTER, ROOT

    cluster = tmp_path / "cluster"
    cluster.mkdir()
    for f in EXAMPLE_CLUSTER.iterdir():
        (cluster / f.name).write_text(f.read_text())
    (cluster / "reservation.yaml").write_text((ROOT / "examples" / "reservation.yaml").read_text())
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        view = wait_for(lambda: phase_is(srv, "web-upgrade", "Available"))
        assert view["allocatable"] == {"cpu": "4", "memory": "8Gi"} and view["expires"] is not None
        web = srv.service.cache.pod_objects["example-web-0"]
        assert bind_call(srv, web, view["nodeName"])["Error"] == ""
        wait_for(lambda: reservation_view(srv, "web-upgrade")["allocated"] == {"cpu": "3", "memory": "4Gi"})


def test_kubernetes_source_places_through_the_status_subresource(tmp_path: Path) -> None:
    """With the Kubernetes source on the fake API server: the Reservation is listed like any watched kind and
    placed by a merge patch of ``reservations/r1/status``."""
    import json

    from app.sources.kubernetes import KubernetesSource
    from tests.client.fake_apiserver import FakeAPIServer, wait_until

    fake = FakeAPIServer()
    try:
        fake.seed("/api/v1/nodes", node("n1", cpu="2"), node("n2", cpu="8"))
        fake.seed("/apis/scheduling.koordinator.sh/v1alpha1/reservations", reservation("r1", cpu="4"))
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
            "current-context": "fake",
        }
        (tmp_path / "kubeconfig").write_text(json.dumps(config))
        source = KubernetesSource(
            ("Node", "Pod", "Reservation"), kubeconfig=str(tmp_path / "kubeconfig"), backoff_initial=0.1
        )
        path = "/apis/scheduling.koordinator.sh/v1alpha1/reservations/r1/status"
        with LiveServer(source):

            def patched() -> bool:
                return any(c.method == "PATCH" and c.path.split("?")[0] == path for c in fake.calls())

            wait_until(patched, timeout=10)
        call = next(c for c in fake.calls("PATCH") if c.path.split("?")[0] == path)
        assert call.headers["content-type"] == "application/merge-patch+json"
        assert call.body["status"]["phase"] == "Available" and call.body["status"]["nodeName"] == "n2"
        assert call.body["status"]["allocatable"] == {"cpu": "4", "memory": "2Gi"}
    finally:
        fake.close()


def test_finished_reservations_are_garbage_collected_after_24h(tmp_path: Path) -> None:
    old = "2020-01-01T00:00:00Z"
    recent = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))

    def finished(name: str, at: str) -> dict[str, Any]:
        ready = {"type": "Ready", "status": "False", "reason": "Succeeded", "lastTransitionTime": at}
        return reservation(name, cpu="1", status={"phase": "Succeeded", "nodeName": "n1", "conditions": [ready]})

    objs = [node("n1"), finished("gone", old), finished("kept", recent)]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: "gone" not in srv.service.cache.objects.get("Reservation", {}))
        assert [r["name"] for r in srv.client.get("/apis/v1/plugins/Reservation/reservations").json()] == ["kept"]


def test_placement_respects_taints_and_unschedulable_nodes(tmp_path: Path) -> None:
    tainted, cordoned, small = node("n1", cpu="8"), node("n2", cpu="8"), node("n3", cpu="1")
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    cordoned["spec"] = {"unschedulable": True}
    tolerant = reservation("tolerant", cpu="2")
    tolerant["spec"]["template"]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]
    with _serve(tmp_path, [tainted, cordoned, small, reservation("plain", cpu="2"), tolerant]) as srv:
        assert wait_for(lambda: phase_is(srv, "tolerant", "Available"))["nodeName"] == "n1"

        def message() -> str:
            status = srv.service.cache.objects["Reservation"]["plain"].get("status") or {}
            conds = [c for c in status.get("conditions") or [] if c["type"] == "Scheduled"]
            return str(conds[0].get("message", conds)) if conds else ""

        assert wait_for(message) == (
            "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}, "
            "1 node(s) were unschedulable."
        )


def test_deleting_a_reservation_frees_its_capacity(tmp_path: Path) -> None:
    cluster = write_cluster(tmp_path / "cluster", [node("n1"), reservation("r1", cpu="3", node_name="n1")])
    with LiveServer(FileSource(cluster, poll_interval=0.1)) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        assert filter_call(srv, pod("other", "2"), ["n1"])["FailedNodes"]["n1"] == "Insufficient cpu (reserved)"
        write_cluster(cluster, [node("n1")])
        wait_for(lambda: filter_call(srv, pod("other", "2"), ["n1"])["NodeNames"] == ["n1"])
        assert srv.client.get("/apis/v1/plugins/Reservation/reservations").json() == []


def test_unschedulable_and_tainted_reservations_need_tolerations(tmp_path: Path) -> None:
    cordoned = reservation("cordoned", cpu="1", node_name="n1", allocate_once=False)
    cordoned["spec"]["unschedulable"] = True
    tainted = reservation("tainted", cpu="1", node_name="n2", allocate_once=False)
    tainted["spec"]["taints"] = [{"key": "team", "value": "ml", "effect": "NoSchedule"}]
    affinity = "scheduling.koordinator.sh/reservation-affinity"
    tolerate_all = (
        '{"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},'
        ' {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]}'
    )
    objs = [
        node("n1"),
        node("n2"),
        cordoned,
        tainted,
        pod("plain", "1", labels=WEB),
        pod("with-affinity", "1", labels=WEB, annotations={affinity: '{"reservationSelector": {}}'}),
        pod("tolerant", "1", labels=WEB, annotations={affinity: tolerate_all}),
        pod("by-name", "1", labels=WEB, annotations={affinity: '{"name": "cordoned"}'}),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "cordoned", "Available") and phase_is(srv, "tainted", "Available"))
        from app.plugins.reservation.matching import match_pod

        store = srv.service.framework.plugin("Reservation").store

        def owned(name: str) -> list[str]:
            found = match_pod(store, srv.service.cache.pods[f"uid-{name}"])
            return sorted(i.name for infos in found.by_node.values() for i in infos)

        assert owned("plain") == ["tainted"]  # no affinity: taints do not hold it back, unschedulable does
        assert owned("with-affinity") == []  # an affinity must tolerate both
        assert owned("tolerant") == ["cordoned", "tainted"]
        assert owned("by-name") == ["cordoned"]  # a name skips the unschedulable and taint checks


def test_each_reservation_holds_a_pod_slot_for_non_owners(tmp_path: Path) -> None:
    objs = [
        node("n1", cpu="16", pods="3"),
        reservation("r1", cpu="1", node_name="n1"),
        pod("running-1", "1", node="n1"),
        pod("web-1", "1", labels=WEB),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        # 1 pod + 1 reservation: the third slot is still free
        assert filter_call(srv, pod("other", "1"), ["n1"])["NodeNames"] == ["n1"]
        assert bind_call(srv, srv.service.cache.pod_objects["uid-web-1"], "n1")["Error"] == ""
        wait_for(lambda: phase_is(srv, "r1", "Succeeded"))
        # allocateOnce: the reservation is done and gives its slot back (2 pods of 3)
        assert filter_call(srv, pod("other", "1"), ["n1"])["NodeNames"] == ["n1"]


def test_reservation_slot_refuses_the_last_pod(tmp_path: Path) -> None:
    objs = [
        node("n1", cpu="16", pods="2"),
        reservation("r1", cpu="1", node_name="n1", allocate_once=False),
        pod("running-1", "1", node="n1"),
        pod("web-1", "1", labels=WEB),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        # 1 pod + 1 reservation fill 2 slots: a non-owner is refused, the owner is not
        assert filter_call(srv, pod("other", "1"), ["n1"])["FailedNodes"]["n1"] == "Too many pods (reserved)"
        assert filter_call(srv, srv.service.cache.pod_objects["uid-web-1"], ["n1"])["NodeNames"] == ["n1"]


def test_default_policy_does_not_share_a_node_with_other_policies(tmp_path: Path) -> None:
    objs = [
        node("n1", cpu="16"),
        reservation("aligned", cpu="1", node_name="n1", policy="Aligned"),
        reservation("restricted", cpu="1", node_name="n1", policy="Restricted"),
    ]
    with _serve(tmp_path, objs) as srv:
        wait_for(lambda: phase_is(srv, "aligned", "Available") and phase_is(srv, "restricted", "Available"))
        write_cluster(tmp_path / "cluster", [*objs, reservation("default", cpu="1", node_name="n1")])

        def message() -> str:
            status = (srv.service.cache.objects["Reservation"].get("default") or {}).get("status") or {}
            conds = [c for c in status.get("conditions") or [] if c["type"] == "Scheduled"]
            return str(conds[0].get("message", "")) if conds else ""

        assert wait_for(message) == "0/1 nodes are available: 1 node(s) reservation allocate policy conflict."


def test_placement_honours_required_node_affinity_including_match_fields(tmp_path: Path) -> None:
    # the descheduler's migration reservations say "not on the current node" with matchFields metadata.name
    away = reservation("away", cpu="2")
    not_n1 = {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}
    away["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [not_n1]}]}
        }
    }
    nowhere = reservation("nowhere", cpu="2")
    no_label = {"key": "disk", "operator": "In", "values": ["ssd"]}
    nowhere["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [no_label]}]}
        }
    }
    with _serve(tmp_path, [node("n1", cpu="8"), node("n2", cpu="8"), away, nowhere]) as srv:
        assert wait_for(lambda: phase_is(srv, "away", "Available"))["nodeName"] == "n2"

        def message() -> str:
            status = srv.service.cache.objects["Reservation"]["nowhere"].get("status") or {}
            conds = [c for c in status.get("conditions") or [] if c["type"] == "Scheduled"]
            return str(conds[0].get("message", conds)) if conds else ""

        assert wait_for(message) == "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "rs-uid", "controller": True}


def test_owner_of_a_migration_reservation_is_filtered_to_its_node(tmp_path: Path) -> None:
    """Issue 28, reservation-first migration: the Reservation a PodMigrationJob made for an evicted pod
    (built by the descheduler's own :func:`reservation_for`) keeps its replacement on the reserved node
    while the replacement fits there; kube-scheduler's own scores cannot send it elsewhere."""
    from app.descheduler.migration import new_job, reservation_for

    evicted = pod("web-a", "2", node="n1", labels=WEB, owner=RS)
    # the workload may run on n1 and n2 only: the Reservation (NotIn its current node) can only go to n2
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}
    evicted["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    job = new_job(evicted, "pmj-a", "ReservationFirst", 600, "node is overutilized")
    job["metadata"]["uid"] = "pmj-uid-a"
    migration = reservation_for(job, evicted, 600, time.time())
    migration["metadata"]["uid"] = "ruid-migration"
    replacement = pod("web-b", "2", labels=WEB, owner=RS)  # pending: /bind binds only pods the source reported
    objs = [node("n1"), node("n2"), node("n3", cpu="8"), evicted, migration, replacement]
    with _serve(tmp_path, objs) as srv:
        assert wait_for(lambda: phase_is(srv, "pmj-uid-a", "Available"))["nodeName"] == "n2"
        result = filter_call(srv, replacement, ["n1", "n2", "n3"])
        assert result["NodeNames"] == ["n2"]
        assert result["FailedAndUnresolvableNodes"] == dict.fromkeys(
            ["n1", "n3"], "node(s) didn't have the pod's migration reservation"
        )
        # 5 cpu do not fit the reservation's node (2 reserved + 2 free): nothing is filtered for the
        # reservation's sake (n1's own shortage is kube-scheduler's NodeResourcesFit's to find)
        big = filter_call(srv, pod("web-c", "5", labels=WEB, owner=RS), ["n1", "n2", "n3"])
        assert big["NodeNames"] == ["n1", "n3"]
        assert "migration" not in str(big["FailedNodes"]) + str(big["FailedAndUnresolvableNodes"])
        # a pod of another workload is kept off the reserved capacity as before, not pushed onto it
        stranger = filter_call(srv, pod("stranger", "3"), ["n1", "n2", "n3"])
        assert stranger["NodeNames"] == ["n1", "n3"]
        assert stranger["FailedNodes"] == {"n2": "Insufficient cpu (reserved)"}
        # the reserved node is not in the request (kube-scheduler's own filters removed it): no filtering
        assert filter_call(srv, replacement, ["n1", "n3"])["NodeNames"] == ["n1", "n3"]
        assert bind_call(srv, replacement, "n2")["Error"] == ""
        wait_for(lambda: ALLOCATED in srv.service.cache.pods["uid-web-b"].annotations)
        allocated = annotation_json(srv.service.cache.pods["uid-web-b"].annotations[ALLOCATED])
        assert allocated == {"name": "pmj-uid-a", "uid": "ruid-migration"}


def test_owner_of_a_plain_reservation_is_not_filtered(placed: LiveServer) -> None:
    """Only migration Reservations filter: an owner of an ordinary one keeps every node (its score prefers
    the reserved node, as upstream)."""
    web = placed.service.cache.pod_objects["uid-web-1"]
    assert filter_call(placed, web, ["n1", "n2"])["NodeNames"] == ["n1", "n2"]
