"""``spec.preAllocation: true`` over real HTTP (Kubernetes source on the fake API server): a running owner pod
satisfies the Reservation, which adopts it (Waiting on its node, the pod annotated), and turns Available for
its owners once that pod is gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.plugins.reservation.fixtures import (
    PODS,
    RESERVATIONS,
    filter_call,
    node,
    pod,
    reservation,
    reservation_view,
    serve_on_fake_apiserver,
    wait_for,
)

KINDS = ("Node", "Pod", "Reservation")
WEB = {"app": "web"}
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def _pre_allocating(name: str = "r-pre", cpu: str = "3") -> dict[str, Any]:
    r = reservation(name, cpu=cpu, memory="1Gi")
    r["spec"]["preAllocation"] = True
    return r


def _seeds(*objs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """n1 runs web-0 (an owner, 2 cpu) and leaves 2 cpu free; n2 is empty (4 cpu)."""
    cluster = [("/api/v1/nodes", node("n1")), ("/api/v1/nodes", node("n2"))]
    cluster.append((PODS, pod("web-0", "2", "1Gi", node="n1", labels=WEB)))
    return cluster + [(RESERVATIONS, o) for o in objs]


def test_pre_allocation_adopts_a_matching_running_pod_then_becomes_available(tmp_path: Path) -> None:
    """3 cpu fit n1 only with web-0's 2 counted as the Reservation's: it is adopted there, not placed on n2."""
    with serve_on_fake_apiserver(tmp_path, KINDS, _seeds(_pre_allocating())) as (srv, fake):
        view = wait_for(lambda: (v := reservation_view(srv, "r-pre"))["phase"] == "Waiting" and v)
        assert view["nodeName"] == "n1"
        assert view["currentOwners"] == [{"namespace": "default", "name": "web-0", "uid": "uid-web-0"}]
        assert view["allocated"] == {"cpu": "2", "memory": "1Gi"} and view["remaining"] == {"cpu": "1", "memory": "0"}
        annotate = [c for c in fake.calls("PATCH") if c.path.endswith("/pods/web-0")]
        assert json.loads(annotate[-1].body["metadata"]["annotations"][ALLOCATED]) == {
            "name": "r-pre",
            "uid": "ruid-r-pre",
        }
        # counted once: n1 has 4 cpu, web-0's 2 inside the Reservation's 3, so a 1-cpu non-owner still fits
        other = pod("other", "1", "100Mi")
        assert filter_call(srv, other, ["n1"])["NodeNames"] == ["n1"]
        assert (
            filter_call(srv, pod("bigger", "2", "100Mi"), ["n1"])["FailedNodes"]["n1"] == "Insufficient cpu (reserved)"
        )
        # web-0 ends: the Reservation holds its whole 3 cpu for new owners
        fake.publish(PODS, "DELETED", pod("web-0", "2", "1Gi", node="n1", labels=WEB))
        view = wait_for(lambda: (v := reservation_view(srv, "r-pre"))["phase"] == "Available" and v, timeout=5)
        assert view["nodeName"] == "n1" and view["currentOwners"] == [] and view["remaining"]["cpu"] == "3"


def test_pre_allocation_without_a_matching_pod_is_placed_as_usual(tmp_path: Path) -> None:
    r = _pre_allocating()
    r["spec"]["owners"] = [{"labelSelector": {"matchLabels": {"app": "db"}}}]
    with serve_on_fake_apiserver(tmp_path, KINDS, _seeds(r)) as (srv, fake):
        view = wait_for(lambda: (v := reservation_view(srv, "r-pre"))["phase"] == "Available" and v)
        assert view["nodeName"] == "n2" and view["currentOwners"] == []
        assert not [c for c in fake.calls("PATCH") if c.path.endswith("/pods/web-0")]


def test_a_reservation_without_pre_allocation_does_not_adopt(tmp_path: Path) -> None:
    with serve_on_fake_apiserver(tmp_path, KINDS, _seeds(reservation("r-plain", cpu="3", memory="1Gi"))) as (srv, _):
        view = wait_for(lambda: (v := reservation_view(srv, "r-plain"))["phase"] == "Available" and v)
        assert view["nodeName"] == "n2" and view["currentOwners"] == []
