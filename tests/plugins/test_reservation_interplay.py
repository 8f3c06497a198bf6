"""Reservation with ElasticQuota over real HTTP: a reservation's capacity counts against its quota once."""

from __future__ import annotations

from pathlib import Path

from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.elasticquota.fixtures import quota
from tests.plugins.reservation.fixtures import (
    bind_call,
    filter_call,
    node,
    phase_is,
    pod,
    reservation,
    reservation_view,
    wait_for,
    write_cluster,
)

WEB = {"app": "web"}


def _quota_used(srv: LiveServer) -> dict[str, str]:
    resp = srv.client.get("/apis/v1/plugins/ElasticQuota/quota/team-a")
    assert resp.status_code == 200, resp.text
    used: dict[str, str] = resp.json().get("used") or {}
    return used


def test_quota_counts_a_reservation_once_when_an_owner_uses_it(tmp_path: Path) -> None:
    resv = reservation("r1", cpu="3", memory="0", node_name="n1", allocate_once=False)
    resv["spec"]["template"]["metadata"]["namespace"] = "team-a"
    objs = [
        node("n1", cpu="8"),
        quota("team-a", {"cpu": "4"}, {"cpu": "4"}, namespace="team-a"),
        resv,
        pod("web-1", "2", "0", labels=WEB, namespace="team-a"),
        pod("batch-1", "2", "0", namespace="team-a"),
    ]
    with LiveServer(FileSource(write_cluster(tmp_path / "c", objs), poll_interval=0)) as srv:
        wait_for(lambda: phase_is(srv, "r1", "Available"))
        # the reservation's 3 cpu are charged to team-a although no pod runs yet
        wait_for(lambda: _quota_used(srv) == {"cpu": "3"})
        # a non-owner of team-a does not fit the quota beside them (3 + 2 > 4)
        batch = srv.service.cache.pod_objects["uid-batch-1"]
        unresolvable = filter_call(srv, batch, ["n1"])
        message = unresolvable["FailedNodes"].get("n1", "")
        assert message.startswith("Insufficient quotas, quotaName: team-a"), unresolvable
        # the owner does: 2 of its cpu come from the reservation, already counted
        web = srv.service.cache.pod_objects["uid-web-1"]
        assert filter_call(srv, web, ["n1"])["NodeNames"] == ["n1"]
        assert bind_call(srv, web, "n1")["Error"] == ""
        wait_for(lambda: reservation_view(srv, "r1")["allocated"] == {"cpu": "2"})
        # counted once: web-1's 2 cpu plus the reservation's unallocated 1, not 2 + 3
        wait_for(lambda: _quota_used(srv) == {"cpu": "3"})


def test_reserved_gpus_are_held_and_given_to_the_owner(tmp_path: Path) -> None:
    import json

    from tests.plugins.test_deviceshare import device
    from tests.plugins.test_deviceshare import node as gpu_node

    allocated = "scheduling.koordinator.sh/device-allocated"
    owner_labels = {"app": "trainer"}
    resv = reservation(
        "gpu-hold",
        cpu="1",
        memory="1Gi",
        extra={"nvidia.com/gpu": "1"},
        owners=[{"labelSelector": {"matchLabels": owner_labels}}],
        allocate_once=False,
    )

    def gpu_pod(name: str, gpus: str, labels: dict[str, str] | None = None) -> dict[str, object]:
        obj = pod(name, "1", "1Gi", labels=labels)
        obj["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = gpus  # type: ignore[index]
        return obj

    objs = [
        gpu_node("n1", 2),
        device("n1", 2),
        resv,
        gpu_pod("trainer-1", "1", owner_labels),
        gpu_pod("greedy", "2"),
        gpu_pod("single", "1"),
    ]
    with LiveServer(FileSource(write_cluster(tmp_path / "c", objs), poll_interval=0)) as srv:
        wait_for(lambda: phase_is(srv, "gpu-hold", "Available"))
        annotations = srv.service.cache.objects["Reservation"]["gpu-hold"]["metadata"]["annotations"]
        held = json.loads(annotations[allocated])["gpu"]
        assert len(held) == 1 and held[0]["resources"]["koordinator.sh/gpu-core"] == "100"
        minor = held[0]["minor"]
        pods = srv.service.cache.pod_objects
        # the reserved GPU is not free for others: two GPUs no longer fit, one does
        assert filter_call(srv, pods["uid-greedy"], ["n1"])["FailedNodes"]["n1"] == "Insufficient gpu devices"
        assert filter_call(srv, pods["uid-single"], ["n1"])["NodeNames"] == ["n1"]
        # the owner receives the reserved GPU
        assert filter_call(srv, pods["uid-trainer-1"], ["n1"])["NodeNames"] == ["n1"]
        assert bind_call(srv, pods["uid-trainer-1"], "n1")["Error"] == ""
        got = wait_for(lambda: srv.service.cache.pods["uid-trainer-1"].annotations.get(allocated))
        assert [g["minor"] for g in json.loads(got)["gpu"]] == [minor]
        wait_for(
            lambda: (
                "scheduling.koordinator.sh/reservation-allocated" in srv.service.cache.pods["uid-trainer-1"].annotations
            )
        )
        # counted once: the other GPU is still free for a non-owner, two still are not (NodeResourcesFit
        # now refuses first: the owner's nvidia.com/gpu is requested on the node)
        assert filter_call(srv, pods["uid-single"], ["n1"])["NodeNames"] == ["n1"]
        assert filter_call(srv, pods["uid-greedy"], ["n1"])["FailedNodes"]["n1"] == "Insufficient nvidia.com/gpu"
        plugin = srv.service.framework.plugin("DeviceShare")
        assert plugin.devices.reservations["gpu-hold"].remainder() == []  # all of it went to the owner
        summary = srv.client.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/n1").json()
        assert summary, summary
