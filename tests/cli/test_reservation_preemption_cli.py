"""`koord reservation` and `koord explain reservation` for a Reservation that fits no node: why, and what its
preemption takes (a dry run on a follower replica, the preemption under way on the leader)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.sources.files import FileSource
from app.sources.leaderlease import LeaseFollower
from tests.conftest import LiveServer
from tests.plugins.reservation.fixtures import RESERVATIONS, node, reservation_view, wait_for, write_cluster
from tests.plugins.test_reservation_preemption_http import _cluster, _evicted, _reservation, _serve

COLUMNS = {"COLUMNS": "200"}
FIT = "0/3 nodes are available: 3 Insufficient cpu."


class _OtherLeader:
    """A Lease held by another kube-scheduler: this replica is a follower and places nothing."""

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        return {"spec": {"holderIdentity": "other_1", "renewTime": now, "leaseDurationSeconds": 15}}


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[LiveServer]:
    objs = [node("n1"), node("n2"), node("n3"), *_cluster(), _reservation(), _reservation("r-never", policy="Never")]
    leader = LeaseFollower(_OtherLeader(), "kube-system", "kube-scheduler", "me", poll_seconds=0.05)
    with LiveServer(FileSource(write_cluster(tmp_path / "c", objs), poll_interval=0), leader=leader) as srv:
        yield srv


def test_explain_reservation_says_why_no_node_fits_and_what_preemption_would_take(follower: LiveServer) -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["explain", "reservation", "r-hi", "--server", follower.url], env=COLUMNS)
    assert r.exit_code == 0, r.output
    assert "Reservation r-hi: Pending" in r.output and FIT in r.output
    assert "default/mid, default/low" in r.output and "default/b2000" in r.output  # candidates per node
    assert (
        "preemption would evict 2 pod(s) on node n2: default/mid (priority 500), default/low (priority 100)" in r.output
    )
    r = runner.invoke(cli, ["explain", "reservation", "r-hi", "--server", follower.url, "-o", "json"])
    answer = json.loads(r.output)
    assert answer["nodes"] == {n: {"reasons": ["Insufficient cpu"]} for n in ("n1", "n2", "n3")}
    pre = answer["preemption"]
    assert pre["priority"] == 9000 and pre["eligible"] and pre["node"] == "n2"
    assert pre["candidates"] == {"n2": ["default/mid", "default/low"], "n3": ["default/b2000"]}
    assert reservation_view(follower, "r-hi")["victims"] == []  # a dry run: nothing nominated, nothing evicted
    assert follower.service.source.evictions == []
    r = runner.invoke(cli, ["explain", "reservation", "r-never", "--server", follower.url], env=COLUMNS)
    assert r.exit_code == 0, r.output
    assert "no preemption: not eligible due to preemptionPolicy=Never." in r.output
    r = runner.invoke(cli, ["explain", "reservation", "ghost", "--server", follower.url])
    assert r.exit_code == 1 and "not found" in r.output


def test_reservation_show_and_list_give_the_nominated_node_and_victims(tmp_path: Path) -> None:
    with _serve(tmp_path, _cluster(), (RESERVATIONS, _reservation())) as (srv, fake):
        wait_for(lambda: len(_evicted(fake)) == 2, timeout=5)
        wait_for(lambda: reservation_view(srv, "r-hi")["nominatedNodeName"] == "n2")
        runner = CliRunner()
        r = runner.invoke(cli, ["reservation", "show", "r-hi", "--server", srv.url], env=COLUMNS)
        assert r.exit_code == 0, r.output
        assert "r-hi: nominated node n2, victims: default/mid (priority 500), default/low (priority 100)" in r.output
        assert f"r-hi: {FIT}" in r.output
        r = runner.invoke(cli, ["reservation", "list", "--server", srv.url, "-o", "json"])
        [item] = json.loads(r.output)
        assert item["nominatedNodeName"] == "n2" and [v["name"] for v in item["victims"]] == ["mid", "low"]
        r = runner.invoke(cli, ["explain", "reservation", "r-hi", "--server", srv.url], env=COLUMNS)
        assert "preemption under way on node n2: evicting default/mid (priority 500), default/low" in r.output
