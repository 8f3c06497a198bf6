"""Coscheduling over real HTTP, driven as kube-scheduler drives the extender: ``/filter`` per pod, then
``/bind`` per pod from concurrent binding goroutines, each held open while its gang waits at Permit.

Covers: a gang binding all at once; a gang that cannot complete timing out with nothing left assumed;
the fail-fast capacity check; two competing gangs (one completes, no deadlock); Strict vs NonStrict on a
member failure; gang groups; once-satisfied replacement members; PreBind's annotations; the REST views.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.api import coscheduling as n
from app.framework.config import parse_config
from app.plugins.registry import default_registry
from app.sources.files import FileSource
from tests.conftest import ROOT, LiveServer, filter_body
from tests.plugins.gangkit import (
    annotations_of,
    bind,
    dumps,
    filter_verdict,
    gang_pod,
    node,
    pod,
    pod_group,
    start_binds,
    start_binds_in_order,
    write,
)

TIMEOUT_ERRORS = ("Coscheduling: rejected due to timeout after waiting", "JobRejectPlugin: Gang ")


def _server(tmp: Path, objs: list[dict[str, Any]], poll: float = 0) -> tuple[LiveServer, FileSource]:
    source = FileSource(write(tmp, objs), poll_interval=poll)
    return LiveServer(source), source


def _gang(srv: LiveServer, gang: str) -> dict[str, Any]:
    r = srv.client.get(f"/apis/v1/plugins/Coscheduling/gang/{gang}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_a_gang_of_8_binding_concurrently_is_bound_all_at_once(tmp_path: Path) -> None:
    members = [pod(f"train-{i}", group="train") for i in range(8)]
    srv, source = _server(tmp_path, [node("n1"), node("n2"), pod_group("train", 8, 30), *members])
    with srv:
        names = ["n1", "n2"]
        for m in members:  # kube-scheduler filters each member in its scheduling cycle
            assert filter_verdict(srv.client, m, names)["NodeNames"] == names

        async def run() -> tuple[bool, dict[str, Any], list[str]]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                first = start_binds(client, [(m, names[i % 2]) for i, m in enumerate(members[:7])])
                await asyncio.sleep(0.5)
                held = not any(t.done() for t in first)
                summary = _gang(srv, "default/train")
                last = await bind(client, members[7], "n2")
                return held, summary, [*(await asyncio.gather(*first)), last]

        held, waiting, errors = asyncio.run(run())
        assert held, "a member was answered before the gang was complete"
        assert len(waiting["waitingForBindChildren"]) == 7 and not waiting["boundChildren"]
        assert all(0 < p["timeLeftSeconds"] <= 30 for p in waiting["waitingPods"])
        assert errors == [""] * 8
        assert sorted(source._bindings) == sorted(f"default/train-{i}" for i in range(8))
        for i in range(8):
            ann = annotations_of(source, f"train-{i}")
            assert ann[n.ANNOTATION_BIND_GANG_GROUP_ID] == "default/train"
            assert ann[n.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "8"
            assert ann[n.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT] == "8"
        summary = _gang(srv, "default/train")
        assert len(summary["boundChildren"]) == 8 and summary["onceResourceSatisfied"] is True
        assert not summary["waitingForBindChildren"] and not summary["pendingChildren"]


def test_a_gang_of_8_on_a_cluster_fitting_7_binds_none_and_releases_everything(tmp_path: Path) -> None:
    # 7 nodes of 4 cpu hold 28 cpu (the 8 x 3 cpu gang passes the total-capacity check) but fit one
    # member each: kube-scheduler places 7 and finds no node for the 8th, which never reaches /bind
    members = [pod(f"big-{i}", "3", group="big") for i in range(8)]
    nodes = [node(f"n{i}", "4") for i in range(7)]
    srv, source = _server(tmp_path, [*nodes, pod_group("big", 8, 1), *members])
    with srv:
        assert filter_verdict(srv.client, members[0], [f"n{i}" for i in range(7)])["FailedAndUnresolvableNodes"] == {}

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                return list(
                    await asyncio.gather(*start_binds(client, [(m, f"n{i}") for i, m in enumerate(members[:7])]))
                )

        t0 = time.monotonic()
        errors = asyncio.run(run())
        assert 0.9 < time.monotonic() - t0 < 10
        assert all(e.startswith(TIMEOUT_ERRORS) for e in errors), errors
        assert any(e.startswith("Coscheduling: rejected due to timeout after waiting 1s") for e in errors)
        assert source._bindings == {}
        assert dict(srv.service.cache.assumed) == {}
        for i in range(7):
            assert srv.client.get(f"/apis/v1/nodes/n{i}").json()["requested"].get("cpu") in (None, "0")
        summary = _gang(srv, "default/big")
        assert not summary["waitingForBindChildren"] and len(summary["pendingChildren"]) == 8
        assert summary["onceResourceSatisfied"] is False


def test_a_gang_larger_than_the_free_capacity_fails_fast_naming_the_shortfall(tmp_path: Path) -> None:
    members = [pod(f"wide-{i}", group="wide") for i in range(8)]
    srv, _ = _server(tmp_path, [node("n1", "4"), node("n2", "3"), pod_group("wide", 8), *members])
    with srv:
        result = filter_verdict(srv.client, members[0], ["n1", "n2"])
        assert result["NodeNames"] == []
        reason = result["FailedAndUnresolvableNodes"]["n1"]
        assert reason == (
            "gangGroup [default/wide] cannot fit the cluster: 8 member(s) still to place request cpu 8, "
            "memory 8Gi; free: cpu 7, memory 128Gi; short of cpu 1"
        )
        assert asyncio.run(_bind_once(srv, members[0], "n1")) == f"Coscheduling: {reason}"
        assert dict(srv.service.cache.assumed) == {}


async def _bind_once(srv: LiveServer, obj: dict[str, Any], node_name: str) -> str:
    async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
        return await bind(client, obj, node_name)


def test_two_gangs_competing_for_one_cluster_never_deadlock(tmp_path: Path) -> None:
    # room for 4 one-cpu members; gangs a and b of 4 each arrive interleaved with long waits: the first
    # gang to hold capacity completes, the other's members are refused at once instead of holding the
    # rest of the cluster until both time out
    a = [pod(f"a-{i}", group="a") for i in range(4)]
    b = [pod(f"b-{i}", group="b") for i in range(4)]
    nodes = [node(f"n{i}", "1") for i in range(4)]
    srv, source = _server(tmp_path, [*nodes, pod_group("a", 4, 60), pod_group("b", 4, 60), *a, *b])
    with srv:

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                order = [(m, f"n{i}") for i, pair in enumerate(zip(a, b, strict=True)) for m in pair]
                return list(await asyncio.gather(*start_binds(client, order)))

        t0 = time.monotonic()
        errors = asyncio.run(run())
        assert time.monotonic() - t0 < 10, "the gangs waited on each other"
        by_gang = {"a": errors[0::2], "b": errors[1::2]}
        winners = [g for g, errs in by_gang.items() if errs == [""] * 4]
        assert len(winners) == 1, errors
        loser = "b" if winners == ["a"] else "a"
        assert all("cannot fit the cluster" in e for e in by_gang[loser]), by_gang[loser]
        assert sorted(source._bindings) == sorted(f"default/{winners[0]}-{i}" for i in range(4))
        assert dict(srv.service.cache.assumed).keys() <= {f"uid-{winners[0]}-{i}" for i in range(4)}


def _member_failure(tmp_path: Path, mode: str) -> tuple[list[str], dict[str, Any], FileSource]:
    """Gang of min 3 (4 pods): m-0 and m-1 wait, m-0's pod is deleted; then the members kube-scheduler
    would bind next arrive (m-1 again if it was rejected, m-2, m-3)."""
    members = [gang_pod(f"m-{i}", "m", "3", mode=mode, wait="20s") for i in range(4)]
    srv, source = _server(tmp_path, [node("n1"), *members], poll=0.1)
    with srv:

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                first = start_binds(client, [(members[0], "n1"), (members[1], "n1")])
                await asyncio.sleep(0.4)
                write(tmp_path, [node("n1"), *members[1:]])  # kubectl delete pod m-0
                deleted = await first[0]
                try:  # Strict: answered at once; NonStrict: still waiting after a while
                    sibling = await asyncio.wait_for(asyncio.shield(first[1]), 5 if mode == "Strict" else 0.5)
                    sibling_done = True
                except TimeoutError:
                    sibling, sibling_done = "", False
                retry = members[1:] if sibling_done else members[2:]
                late = await asyncio.gather(*start_binds(client, [(m, "n1") for m in retry]))
                if not sibling_done:
                    sibling = await first[1]
                return [deleted, str(sibling_done), sibling, *late]

        out = asyncio.run(run())
        return out, _gang(srv, "default/m"), source


def test_strict_mode_rejects_every_waiting_member_when_one_fails(tmp_path: Path) -> None:
    out, summary, source = _member_failure(tmp_path, "Strict")
    deleted, sibling_done, sibling, *retried = out
    assert deleted == "removed"
    assert sibling_done == "True"
    assert sibling == 'JobRejectPlugin: Gang "default/m" gets rejected due to Pod "m-0" in Unreserve'
    assert retried == ["", "", ""]  # m-1 retried with m-2 and m-3: the gang completes
    assert sorted(source._bindings) == ["default/m-1", "default/m-2", "default/m-3"]
    assert summary["mode"] == "Strict"


def test_non_strict_mode_keeps_the_other_members_waiting(tmp_path: Path) -> None:
    out, summary, source = _member_failure(tmp_path, "NonStrict")
    deleted, sibling_done, sibling, *late = out
    assert deleted == "removed"
    assert sibling_done == "False"  # m-1 kept waiting after m-0 failed
    assert (sibling, *late) == ("", "", "")
    assert sorted(source._bindings) == ["default/m-1", "default/m-2", "default/m-3"]
    assert summary["mode"] == "NonStrict" and len(summary["boundChildren"]) == 3


def test_a_gang_group_binds_only_when_every_gang_of_it_is_satisfied(tmp_path: Path) -> None:
    groups = dumps(["default/ga", "default/gb"])
    ga = [gang_pod(f"ga-{i}", "ga", "2", groups=groups, wait="20s") for i in range(2)]
    gb = [gang_pod(f"gb-{i}", "gb", "2", groups=groups, wait="20s") for i in range(2)]
    srv, source = _server(tmp_path, [node("n1"), *ga, *gb])
    with srv:

        async def run() -> tuple[bool, list[str]]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                early = start_binds(client, [(ga[0], "n1"), (ga[1], "n1"), (gb[0], "n1")])
                await asyncio.sleep(0.5)
                held = not any(t.done() for t in early)  # ga alone is satisfied, its group is not
                last = await bind(client, gb[1], "n1")
                return held, [*(await asyncio.gather(*early)), last]

        held, errors = asyncio.run(run())
        assert held and errors == [""] * 4
        for name in ("ga-0", "ga-1", "gb-0", "gb-1"):
            ann = annotations_of(source, name)
            assert ann[n.ANNOTATION_BIND_GANG_GROUP_ID] == "default/ga,default/gb"
            assert ann[n.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "4"
        summary = _gang(srv, "default/ga")
        assert summary["gangGroup"] == ["default/ga", "default/gb"]
        assert summary["gangGroupInfo"]["GangGroupId"] == "default/ga,default/gb"


def test_a_gang_group_fails_the_basic_check_while_a_member_gang_is_missing(tmp_path: Path) -> None:
    groups = dumps(["default/ga", "default/gone"])
    ga = [gang_pod(f"ga-{i}", "ga", "2", groups=groups) for i in range(2)]
    srv, _ = _server(tmp_path, [node("n1"), *ga])
    with srv:
        reason = filter_verdict(srv.client, ga[0], ["n1"])["FailedAndUnresolvableNodes"]["n1"]
        assert reason == (
            "gangGroup [default/ga default/gone] basic check: memberGangs [default/gone] doesn't exists, "
            "current gang: default/ga, podName: default/ga-0"
        )


def _once_satisfied_then_late_member(tmp_path: Path, policy: str) -> tuple[list[str], str, FileSource]:
    members = [pod(f"r-{i}", group="r") for i in range(3)]
    group = pod_group("r", 2, 1, {n.ANNOTATION_GANG_MATCH_POLICY: policy} if policy else None)
    srv, source = _server(tmp_path, [node("n1"), group, *members])
    with srv:

        async def run() -> tuple[list[str], str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                together = list(await asyncio.gather(*start_binds(client, [(members[0], "n1"), (members[1], "n1")])))
                await asyncio.sleep(0.2)  # the bound pods' watch events arrive
                return together, await bind(client, members[2], "n1")

        together, late = asyncio.run(run())
        return together, late, source


def test_once_satisfied_lets_a_replacement_member_of_a_running_gang_bind_alone(tmp_path: Path) -> None:
    together, late, source = _once_satisfied_then_late_member(tmp_path, "")  # once-satisfied is the default
    assert together == ["", ""] and late == ""
    assert sorted(source._bindings) == ["default/r-0", "default/r-1", "default/r-2"]
    assert annotations_of(source, "r-0")[n.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "2"
    assert n.ANNOTATION_BIND_GANG_GROUP_ID not in annotations_of(source, "r-2")  # bound alone: no gang binding


def test_only_waiting_makes_a_late_member_wait_for_a_whole_new_quorum(tmp_path: Path) -> None:
    together, late, source = _once_satisfied_then_late_member(tmp_path, n.MATCH_POLICY_ONLY_WAITING)
    assert together == ["", ""]
    assert late == "Coscheduling: rejected due to timeout after waiting 1s at plugin Coscheduling"
    assert sorted(source._bindings) == ["default/r-0", "default/r-1"]


def test_bad_gang_input_gets_upstreams_treatment(tmp_path: Path) -> None:
    objs = [
        node("n1"),
        # min-available not an integer: the annotation gang is never initialised
        gang_pod("badmin-0", "badmin", "two"),
        # label names a PodGroup that does not exist: an uninitialised gang
        pod("orphan-0", group="nosuchgroup"),
        # a PodGroup whose minMember is not an int32 is one upstream's informer cannot decode: ignored
        pod_group("badpg", "two"),
        pod("badpg-0", group="badpg"),
        # invalid mode / total / waiting-time / groups / policy fall back to Strict / min / default / alone / default
        gang_pod("lax-0", "lax", "1", mode="Sloppy", total="many", wait="soon", groups="not json", policy="eager"),
        # fewer children than minMember
        gang_pod("few-0", "few", "3"),
        # total-number below min-available is raised to min
        gang_pod("low-0", "low", "1", total="0"),
    ]
    srv, _ = _server(tmp_path, objs)
    with srv:

        def reason(obj: dict[str, Any]) -> str:
            return str(filter_verdict(srv.client, obj, ["n1"])["FailedAndUnresolvableNodes"].get("n1", ""))

        assert reason(objs[1]) == "gang has not init, gangName: default/badmin, podName: default/badmin-0"
        assert reason(objs[2]) == "gang has not init, gangName: default/nosuchgroup, podName: default/orphan-0"
        assert reason(objs[4]) == "gang has not init, gangName: default/badpg, podName: default/badpg-0"
        assert reason(objs[5]) == ""
        assert reason(objs[6]) == (
            "gangGroup [default/few] basic check: memberGangs [default/few] child pod not collect enough, "
            "current gang: default/few, podName: default/few-0"
        )
        # a pod the cache has never seen (only in the filter body) has no gang at all
        stranger = gang_pod("stranger-0", "stranger", "1")
        assert reason(stranger) == "can't find gang, gangName: default/stranger, podName: default/stranger-0"
        lax = _gang(srv, "default/lax")
        assert (lax["mode"], lax["totalChildrenNum"], lax["gangMatchPolicy"]) == ("Strict", 1, "once-satisfied")
        assert lax["waitTime"] == 600 * 10**9 and lax["gangGroup"] == ["default/lax"]
        assert _gang(srv, "default/badmin")["hasGangInit"] is False
        assert _gang(srv, "default/low")["totalChildrenNum"] == 1
        assert srv.client.get("/apis/v1/plugins/Coscheduling/gang/default/nope").json() == {
            "message": "cannot find gang default/nope"
        }
        assert srv.client.get("/apis/v1/plugins/Coscheduling/gang/default/nope").status_code == 404
        gangs = srv.client.get("/apis/v1/plugins/Coscheduling/gangs").json()
        assert {"default/lax", "default/few", "default/badmin", "default/nosuchgroup"} <= set(gangs)
        assert "default/badpg" in gangs and gangs["default/badpg"]["hasGangInit"] is False


def test_a_gang_waiting_longer_than_the_bind_http_timeout_is_refused(tmp_path: Path) -> None:
    config = parse_config(
        {"pluginConfig": [{"name": "Coscheduling", "args": {"bindHTTPTimeout": "30s"}}]}, default_registry().names()
    )
    members = [pod(f"slow-{i}", group="slow") for i in range(2)]
    source = FileSource(write(tmp_path, [node("n1"), pod_group("slow", 2, 60), *members]), poll_interval=0)
    with LiveServer(source, config) as srv:
        reason = filter_verdict(srv.client, members[0], ["n1"])["FailedAndUnresolvableNodes"]["n1"]
        assert reason == (
            "gang default/slow waits up to 1m0s at Permit, not less than the bind extender's httpTimeout 30s "
            "(Coscheduling args bindHTTPTimeout): kube-scheduler would abandon the bind first; shorten the "
            "gang's waiting time"
        )


def test_the_podgroup_example_binds_as_one_gang() -> None:
    # examples/gang/train.yaml on the example nodes, as `koord scheduler --cluster examples` serves it
    docs = list(yaml.safe_load_all((ROOT / "examples" / "gang" / "train.yaml").read_text()))
    workers = [d for d in docs if d["kind"] == "Pod"]
    source = FileSource(ROOT / "examples", poll_interval=0, restamp_interval=0)
    with LiveServer(source) as srv:
        for w in workers:
            assert "node-idle" in filter_verdict(srv.client, w, ["node-idle", "node-busy"])["NodeNames"]

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                binds = [
                    client.post(
                        "/bind",
                        json={
                            "PodName": w["metadata"]["name"],
                            "PodNamespace": "default",
                            "PodUID": "",
                            "Node": "node-idle",
                        },
                    )
                    for w in workers
                ]
                return [r.json()["Error"] for r in await asyncio.gather(*binds)]

        assert asyncio.run(run()) == [""] * 4
        for w in workers:
            ann = annotations_of(source, w["metadata"]["name"])
            assert ann[n.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "4"
        summary = _gang(srv, "default/train")
        assert (summary["mode"], summary["minRequiredNumber"], summary["waitTime"]) == ("Strict", 4, 120 * 10**9)


def test_waiting_and_running_counts_bound_members_for_a_late_member(tmp_path: Path) -> None:
    together, late, source = _once_satisfied_then_late_member(tmp_path, n.MATCH_POLICY_WAITING_AND_RUNNING)
    assert together == ["", ""] and late == ""  # 1 waiting + 2 bound >= minMember 2
    assert sorted(source._bindings) == ["default/r-0", "default/r-1", "default/r-2"]


def _unschedulable_member(tmp_path: Path, mode: str) -> tuple[dict[str, Any], list[str] | None]:
    """Strict/NonStrict gang of 3 x 1000 batch-cpu on two nodes of 1500: two members wait (one per node),
    the third fits no node (our NodeResourcesFit fails both) although the total capacity suffices."""
    batch = "kubernetes.io/batch-cpu"
    members = [gang_pod(f"u-{i}", "u", "3", mode=mode, wait="20s") for i in range(3)]
    for m in members:
        m["spec"]["containers"][0]["resources"]["requests"] = {batch: "1000"}
    nodes = [node("a"), node("b")]
    for nd in nodes:
        nd["status"]["allocatable"][batch] = "1500"
    srv, _ = _server(tmp_path, [*nodes, *members])
    with srv:

        async def run() -> tuple[dict[str, Any], list[str] | None]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                waiting = start_binds(client, [(members[0], "a"), (members[1], "b")])
                await asyncio.sleep(0.4)
                r = await client.post("/filter", json=filter_body(members[2], ["a", "b"]))
                try:
                    done = await asyncio.wait_for(asyncio.gather(*waiting), 5 if mode == "Strict" else 0.5)
                except TimeoutError:
                    done = None
                return r.json(), list(done) if done is not None else None

        return asyncio.run(run())


def test_a_strict_member_fitting_no_node_rejects_its_waiting_siblings(tmp_path: Path) -> None:
    result, errors = _unschedulable_member(tmp_path, "Strict")
    assert result["FailedNodes"] == {
        "a": "Insufficient kubernetes.io/batch-cpu",
        "b": "Insufficient kubernetes.io/batch-cpu",
    }
    assert errors == ['JobRejectPlugin: gets rejected due to member pod "default/u-2" is unschedulable'] * 2


def test_a_non_strict_member_fitting_no_node_leaves_its_siblings_waiting(tmp_path: Path) -> None:
    result, errors = _unschedulable_member(tmp_path, "NonStrict")
    assert result["NodeNames"] == [] and errors is None


def test_two_gangs_sharing_a_cluster_too_small_for_both_release_the_losers_hold(tmp_path: Path) -> None:
    # room for 6 one-cpu members, gangs a and b of 4 arrive interleaved: both start holding capacity, the
    # first member refused (b-2: b would need 2 more with 1 free) is unschedulable, so Strict b releases its
    # waiting members at once and a completes; nothing waits for the 60s timeout
    a = [pod(f"a-{i}", group="a") for i in range(4)]
    b = [pod(f"b-{i}", group="b") for i in range(4)]
    nodes = [node(f"n{i}", "1") for i in range(6)]
    srv, source = _server(tmp_path, [*nodes, pod_group("a", 4, 60), pod_group("b", 4, 60), *a, *b])
    with srv:

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                order = [(a[0], "n0"), (b[0], "n1"), (a[1], "n2"), (b[1], "n3"), (a[2], "n4"), (b[2], "n5")]
                first = await start_binds_in_order(client, order)
                rest = await start_binds_in_order(client, [(a[3], "n1"), (b[3], "n3")])
                return list(await asyncio.gather(*first, *rest))

        t0 = time.monotonic()
        errors = asyncio.run(run())
        assert time.monotonic() - t0 < 10
        a_errors = [errors[0], errors[2], errors[4], errors[6]]
        b_errors = [errors[1], errors[3], errors[5], errors[7]]
        assert a_errors == [""] * 4, errors
        assert "cannot fit the cluster" in b_errors[2]  # b-2, refused at the bind's re-check
        rejected = 'JobRejectPlugin: gets rejected due to member pod "default/b-2" is unschedulable'
        assert b_errors[0] == b_errors[1] == rejected
        assert b_errors[3] != ""  # b-3 arrives to a cluster a fills
        assert sorted(source._bindings) == [f"default/a-{i}" for i in range(4)]


def _bound(obj: dict[str, Any], node_name: str) -> dict[str, Any]:
    """``obj`` bound to ``node_name`` and Running (a member placed before this service started)."""
    obj["spec"]["nodeName"] = node_name
    obj["status"] = {"phase": "Running"}
    return obj


def test_a_member_bound_at_load_marks_its_gang_once_satisfied(tmp_path: Path) -> None:
    """Issue 28: a running gang (minMember 3) lost two members; their one replacement so far must pass
    Filter and Permit alone, as upstream's gang cache marks the group once resource satisfied when it
    adds a bound pod, although Pods are loaded before their PodGroup here."""
    running = _bound(pod("run-0", group="run"), "n1")
    replacement = pod("run-1", group="run")
    srv, source = _server(tmp_path, [node("n1"), running, replacement, pod_group("run", 3, 5)])
    with srv:
        summary = _gang(srv, "default/run")
        assert summary["onceResourceSatisfied"] is True
        assert filter_verdict(srv.client, replacement, ["n1"])["NodeNames"] == ["n1"]

        async def run() -> tuple[str, float]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                started = time.monotonic()
                error = await bind(client, replacement, "n1")
                return error, time.monotonic() - started

        error, took = asyncio.run(run())
        assert error == "" and took < 2.5  # not held at Permit for the gang's 5 s
        assert sorted(source._bindings) == ["default/run-1"]


def test_a_member_observed_bound_later_marks_its_gang_once_satisfied(tmp_path: Path) -> None:
    """A member bound by someone else (another scheduler, a restart) after load: the gang's PodGroup is
    known, the bound pod's update marks the group once satisfied, and a replacement passes alone."""
    first, replacement = pod("late-0", group="late"), pod("late-1", group="late")
    objs = [node("n1"), pod_group("late", 3, 5), first]
    srv, _ = _server(tmp_path, objs, poll=0.05)
    with srv:
        assert _gang(srv, "default/late")["onceResourceSatisfied"] is False
        write(tmp_path, [node("n1"), pod_group("late", 3, 5), _bound(first, "n1"), replacement])
        deadline = time.monotonic() + 10
        while not _gang(srv, "default/late")["onceResourceSatisfied"]:
            assert time.monotonic() < deadline, "the bound member was never seen"
            time.sleep(0.05)
        assert filter_verdict(srv.client, replacement, ["n1"])["NodeNames"] == ["n1"]


def test_the_member_completing_its_gang_passes_before_its_watch_event(tmp_path: Path) -> None:
    """Issue 28: kube-scheduler may filter the last member of a gang before the extender's watch delivers
    that pod; the pod being filtered counts as a child of its gang, so the completing member passes
    (the earlier members, filtered while the gang lacked children, were refused)."""
    members = [pod(f"done-{i}", group="done") for i in range(3)]
    srv, _ = _server(tmp_path, [node("n1"), pod_group("done", 3, 5), *members[:2]])
    with srv:
        refused = filter_verdict(srv.client, members[0], ["n1"])["FailedAndUnresolvableNodes"]["n1"]
        assert "child pod not collect enough" in refused
        assert filter_verdict(srv.client, members[2], ["n1"])["NodeNames"] == ["n1"]
        assert len(_gang(srv, "default/done")["children"]) == 2  # the filter did not add it to the cache
