"""A Reservation of an LSR template holds a cpuset: its cpus are not free to others, and its owner gets them
(real HTTP, the Reservation plugin placing the reservation in the same service)."""

from __future__ import annotations

import json
from pathlib import Path

from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.nodenumaresource.kit import node, nrt, pod
from tests.plugins.reservation.fixtures import bind_call, filter_call, phase_is, reservation, wait_for, write_cluster

STATUS = "scheduling.koordinator.sh/resource-status"


def test_a_reserved_cpuset_is_held_and_handed_to_its_owner(tmp_path: Path) -> None:
    resv = reservation("lsr-hold", cpu="4", memory="1Gi")
    resv["spec"]["template"]["metadata"]["labels"] = {"koordinator.sh/qosClass": "LSR"}
    owner = pod("web-1", "4")
    owner["metadata"]["labels"]["app"] = "web"
    objs = [node("n1", cpu="16"), nrt("n1", "one-socket-ht"), resv, owner, pod("greedy", "14"), pod("small", "2")]
    with LiveServer(FileSource(write_cluster(tmp_path / "c", objs), poll_interval=0)) as srv:
        wait_for(lambda: phase_is(srv, "lsr-hold", "Available"))
        annotations = srv.service.cache.objects["Reservation"]["lsr-hold"]["metadata"]["annotations"]
        assert json.loads(annotations[STATUS]) == {"cpuset": "0-1,8-9"}
        pods = srv.service.cache.pod_objects
        # its 4 cpus are not free to others: 14 do not fit any more, 2 do, beside them
        verdict = filter_call(srv, pods["uid-greedy"], ["n1"])
        assert verdict["NodeNames"] == [], verdict
        assert filter_call(srv, pods["uid-small"], ["n1"])["NodeNames"] == ["n1"]
        assert bind_call(srv, pods["uid-small"], "n1")["Error"] == ""
        small = wait_for(lambda: srv.service.cache.pods["uid-small"].annotations.get(STATUS))
        assert json.loads(small) == {"cpuset": "2,10"}
        # the owner receives the reserved cpus
        assert filter_call(srv, pods["uid-web-1"], ["n1"])["NodeNames"] == ["n1"]
        assert bind_call(srv, pods["uid-web-1"], "n1")["Error"] == ""
        got = wait_for(lambda: srv.service.cache.pods["uid-web-1"].annotations.get(STATUS))
        assert json.loads(got) == {"cpuset": "0-1,8-9"}
