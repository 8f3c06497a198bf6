"""A Reservation that fits no node preempts lower-priority pods, as kube-scheduler's DefaultPreemption would
for its reserve pod: over real HTTP, with the Kubernetes source on the fake API server (evictions through
the Eviction API; the test deletes each evicted pod as the kubelet would, and publishes the deletion)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.client.fake_apiserver import FakeAPIServer
from tests.conftest import LiveServer
from tests.plugins.reservation.fixtures import (
    PODS,
    RESERVATIONS,
    node,
    pod,
    reservation,
    reservation_view,
    serve_on_fake_apiserver,
    wait_for,
)

PDBS = "/apis/policy/v1/poddisruptionbudgets"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
KINDS = ("Node", "Pod", "Reservation", "PodDisruptionBudget", "PriorityClass")


def _pod(name: str, cpu: str, node_name: str, priority: int, **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu, "1Gi", node=node_name, **kw)
    p["spec"]["priority"] = priority
    return p


def _reservation(name: str = "r-hi", *, policy: str | None = None, by_class: bool = False) -> dict[str, Any]:
    """2 cpu, priority 9000 (given directly, or through the PriorityClass ``high``)."""
    r = reservation(name, cpu="2", memory="1Gi")
    tspec = r["spec"]["template"]["spec"]
    if by_class:
        tspec["priorityClassName"] = "high"
    else:
        tspec["priority"] = 9000
    if policy is not None:
        tspec["preemptionPolicy"] = policy
    return r


def _cluster() -> list[dict[str, Any]]:
    """Three full 4-cpu nodes: n1 only equal or higher priority pods; n2 three lower-priority pods (500, 100,
    1000); n3 two lower-priority pods (2000, 3000)."""
    return [
        _pod("same", "2", "n1", 9000),
        _pod("higher", "2", "n1", 10000),
        _pod("mid", "1", "n2", 500),
        _pod("low", "1", "n2", 100),
        _pod("keep", "2", "n2", 1000),
        _pod("b2000", "2", "n3", 2000),
        _pod("b3000", "2", "n3", 3000),
    ]


@contextmanager
def _serve(
    tmp_path: Path, pods: list[dict[str, Any]], *objs: tuple[str, dict[str, Any]]
) -> Iterator[tuple[LiveServer, FakeAPIServer]]:
    seeds = [("/api/v1/nodes", node(name)) for name in ("n1", "n2", "n3")] + [(PODS, p) for p in pods]
    seeds.append((PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                     "metadata": {"name": "high"}, "value": 9000}))  # fmt: skip
    with serve_on_fake_apiserver(tmp_path, KINDS, [*seeds, *objs]) as served:
        yield served


def _evicted(fake: FakeAPIServer) -> list[str]:
    return sorted(c.path.split("/")[-2] for c in fake.calls("POST") if c.path.endswith("/eviction"))


def _kubelet_deletes(fake: FakeAPIServer, pods: list[dict[str, Any]], names: list[str]) -> None:
    """Publish the deletion of the evicted pods ``names`` on the watched collection."""
    for p in pods:
        if p["metadata"]["name"] in names:
            fake.publish(PODS, "DELETED", p)


def _status_patches(fake: FakeAPIServer, name: str) -> list[dict[str, Any]]:
    path = f"{RESERVATIONS}/{name}/status"
    return [c.body for c in fake.calls("PATCH") if c.path.split("?")[0] == path]


def test_preempts_the_fewest_lowest_priority_pods_on_the_best_node_then_becomes_available(tmp_path: Path) -> None:
    pods = _cluster()
    with _serve(tmp_path, pods, (RESERVATIONS, _reservation())) as (srv, fake):
        wait_for(lambda: len(_evicted(fake)) >= 2, timeout=5)
        # n2's victims top out at 500 (n3's at 2000, n1 has none below 9000): of n2's, "keep" (1000) is
        # reprieved because evicting mid and low frees the 2 cpu; nothing else is touched
        assert _evicted(fake) == ["low", "mid"]
        eviction = next(c for c in fake.calls("POST") if c.path.endswith("/low/eviction"))
        assert eviction.body["deleteOptions"]["preconditions"]["uid"] == "uid-low"
        view = wait_for(lambda: (v := reservation_view(srv, "r-hi"))["nominatedNodeName"] and v)
        assert view["phase"] == "Pending" and view["nominatedNodeName"] == "n2"
        assert [(v["name"], v["priority"]) for v in view["victims"]] == [("mid", 500), ("low", 100)]
        wait_for(lambda: any(p["status"].get("nominatedNodeName") == "n2" for p in _status_patches(fake, "r-hi")))
        _kubelet_deletes(fake, pods, ["low", "mid"])
        view = wait_for(lambda: (v := reservation_view(srv, "r-hi"))["phase"] == "Available" and v, timeout=5)
        assert view["nodeName"] == "n2" and view["nominatedNodeName"] == "" and view["victims"] == []
        assert _evicted(fake) == ["low", "mid"]
        final = _status_patches(fake, "r-hi")[-1]["status"]
        assert final["phase"] == "Available" and final["nominatedNodeName"] is None


def test_a_pod_disruption_budget_sends_the_preemption_to_another_node(tmp_path: Path) -> None:
    """n1's only victim (priority 100) is covered by a PDB allowing no disruption; n2's (priority 500) is not:
    kube-scheduler's fewest-PDB-violations rule picks n2 although n1's victim has the lower priority."""
    pods = [
        _pod("guarded", "2", "n1", 100, labels={"app": "db"}),
        _pod("n1-top", "2", "n1", 9500),
        _pod("plain", "2", "n2", 500),
        _pod("n2-top", "2", "n2", 9500),
        _pod("n3-top", "4", "n3", 9500),
    ]
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 0},
        "status": {"disruptionsAllowed": 0},
    }
    with _serve(tmp_path, pods, (RESERVATIONS, _reservation(by_class=True)), (PDBS, pdb)) as (srv, fake):
        wait_for(lambda: _evicted(fake), timeout=5)
        assert _evicted(fake) == ["plain"]
        _kubelet_deletes(fake, pods, ["plain"])
        view = wait_for(lambda: (v := reservation_view(srv, "r-hi"))["phase"] == "Available" and v, timeout=5)
        assert view["nodeName"] == "n2"
        assert _evicted(fake) == ["plain"]


def test_preemption_policy_never_stays_pending_with_the_reason(tmp_path: Path) -> None:
    with _serve(tmp_path, _cluster(), (RESERVATIONS, _reservation(policy="Never"))) as (srv, fake):
        message = "0/3 nodes are available: 3 Insufficient cpu. not eligible due to preemptionPolicy=Never.."
        wait_for(lambda: reservation_view(srv, "r-hi")["message"] == message, timeout=5)
        view = reservation_view(srv, "r-hi")
        assert view["phase"] == "Pending" and view["nominatedNodeName"] == "" and view["victims"] == []
        assert _evicted(fake) == []


def test_no_lower_priority_pod_anywhere_says_what_preemption_found(tmp_path: Path) -> None:
    """Every pod has priority 9000 or more: no victim on any node, nothing evicted (kube-scheduler's message)."""
    pods = [_pod("a", "4", "n1", 9000), _pod("b", "4", "n2", 9001), _pod("c", "4", "n3", 20000)]
    with _serve(tmp_path, pods, (RESERVATIONS, _reservation())) as (srv, fake):
        message = (
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
            "3 No preemption victims found for incoming pod.."
        )
        wait_for(lambda: reservation_view(srv, "r-hi")["message"] == message, timeout=5)
        assert _evicted(fake) == []


def test_a_reservation_without_a_priority_never_preempts(tmp_path: Path) -> None:
    r = reservation("r-plain", cpu="2", memory="1Gi")
    with _serve(tmp_path, _cluster(), (RESERVATIONS, r)) as (srv, fake):
        wait_for(lambda: reservation_view(srv, "r-plain")["message"] == "0/3 nodes are available: 3 Insufficient cpu.")
        assert _evicted(fake) == []
