"""The binding cycle over real HTTP, as kube-scheduler drives it: filter then bind per pod, binds of
different pods concurrent, a bind held open while a Permit plugin waits.

- Concurrent filter+bind pairs never over-commit a node: Reserve re-checks the node.
- Permit Wait / Allow / Reject / timeout with concurrent binds, through a small gang-like plugin
  (``Gate``) that allows or rejects the waiting pods of its group by uid, as Coscheduling will.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.cache.podinfo import PodInfo
from app.framework.config import PluginSpec, SchedulerConfig
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import PermitPlugin, ReservePlugin
from app.framework.status import SUCCESS, Status
from app.plugins.registry import default_registry
from app.sources.files import FileSource
from tests.conftest import LiveServer, filter_body

BATCH_CPU = "kubernetes.io/batch-cpu"
GROUP, SIZE, TIMEOUT, REJECT = "gate/group", "gate/size", "gate/timeout", "gate/reject"


def _node(name: str, batch_cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", BATCH_CPU: batch_cpu},
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", BATCH_CPU: batch_cpu},
        },
    }


def _pod(name: str, batch_cpu: str = "1000", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {BATCH_CPU: batch_cpu}}}],
        },
    }


def _write(tmp: Path, objs: list[dict[str, Any]]) -> Path:
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


def _bind_body(pod: dict[str, Any], node: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


async def _filter_then_bind(client: httpx.AsyncClient, pod: dict[str, Any], node: str) -> str:
    r = await client.post("/filter", json=filter_body(pod, [node]))
    assert r.status_code == 200
    if node not in (r.json()["NodeNames"] or []):
        return "filtered out"
    r = await client.post("/bind", json=_bind_body(pod, node))
    assert r.status_code == 200
    error: str = r.json()["Error"]
    return error


def test_concurrent_filter_and_bind_pairs_never_overcommit(tmp_path: Path) -> None:
    # 30 pods of 1000m batch-cpu on a node with 8300m: kube-scheduler filters each (the node is empty
    # then) and binds them concurrently; before the binding cycle re-checked, 21 of them were bound
    pods = [_pod(f"batch-{i}") for i in range(30)]
    source = FileSource(_write(tmp_path, [_node("big", "8300"), *pods]), poll_interval=0)
    with LiveServer(source) as srv:

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                filtered = [await client.post("/filter", json=filter_body(p, ["big"])) for p in pods]
                assert all(r.json()["NodeNames"] == ["big"] for r in filtered)  # every pod fits an empty node
                binds = [client.post("/bind", json=_bind_body(p, "big")) for p in pods]
                return [r.json()["Error"] for r in await asyncio.gather(*binds)]

        errors = asyncio.run(run())
        assert errors.count("") == 8
        assert set(errors) - {""} == {f"NodeResourcesFit: Insufficient {BATCH_CPU}"}
        assert srv.client.get("/apis/v1/nodes/big").json()["requested"][BATCH_CPU] == "8000"
        assert len(source._bindings) == 8
        refused = [p["metadata"]["name"] for p, e in zip(pods, errors, strict=True) if e]
        for name in refused:  # refused pods stay pending, unassumed
            assert srv.service.cache.find_pod(namespace="default", name=name).node_name == ""
        assert not srv.service.cache.assumed.keys() - {f"uid-{p['metadata']['name']}" for p in pods}


def test_interleaved_filter_bind_pairs_never_overcommit(tmp_path: Path) -> None:
    pods = [_pod(f"batch-{i}") for i in range(30)]
    source = FileSource(_write(tmp_path, [_node("big", "8300"), *pods]), poll_interval=0)
    with LiveServer(source) as srv:

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                return list(await asyncio.gather(*(_filter_then_bind(client, p, "big") for p in pods)))

        results = asyncio.run(run())
        assert results.count("") == 8
        assert srv.client.get("/apis/v1/nodes/big").json()["requested"][BATCH_CPU] == "8000"


class Gate(ReservePlugin, PermitPlugin):
    """A gang in miniature: pods labelled ``gate/group`` wait at Permit until ``gate/size`` of the
    group wait, then all are allowed by uid; a pod labelled ``gate/reject`` rejects every waiting
    member of its group. Records Reserve/Unreserve per pod."""

    name = "Gate"

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.log: list[str] = []

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"reserve {pod.name}")
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.log.append(f"unreserve {pod.name}")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        group = pod.labels.get(GROUP)
        if group is None:
            return SUCCESS, 0.0
        waiting = self.handle.waiting_pods
        members = [w for w in waiting if w.pod.labels.get(GROUP) == group]
        if pod.labels.get(REJECT):
            for w in members:
                waiting.reject(w.uid, self.name, f"group {group} rejected by {pod.name}")
            return Status.unschedulable(f"group {group} rejected"), 0.0
        if len(members) + 1 >= int(pod.labels.get(SIZE, "1")):
            for w in members:
                waiting.allow(w.uid, self.name)
            return SUCCESS, 0.0
        return Status.wait(), float(pod.labels.get(TIMEOUT, "10"))


def _gate_server(tmp: Path, pods: list[dict[str, Any]]) -> tuple[LiveServer, FileSource, list[Gate]]:
    registry = default_registry()
    made: list[Gate] = []

    def new_gate(args: dict[str, Any], handle: Handle) -> Gate:
        made.append(Gate(handle))
        return made[-1]

    registry.register("Gate", new_gate)
    config = SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("Gate")))
    source = FileSource(_write(tmp, [_node("big", "64000"), _node("other", "64000"), *pods]), poll_interval=0)
    return LiveServer(source, config, registry), source, made


def _requested(srv: LiveServer, node: str) -> str | None:
    value: str | None = srv.client.get(f"/apis/v1/nodes/{node}").json()["requested"].get(BATCH_CPU)
    return value


def test_permit_wait_holds_the_bind_until_the_group_is_complete(tmp_path: Path) -> None:
    group = [_pod(f"w-{i}", **{GROUP: "g1", SIZE: "3"}) for i in range(3)]
    loner = _pod("loner")
    srv, source, gates = _gate_server(tmp_path, [*group, loner])
    with srv:

        async def run() -> dict[str, Any]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                first = [asyncio.create_task(client.post("/bind", json=_bind_body(p, "big"))) for p in group[:2]]
                await asyncio.sleep(0.3)
                held = all(not t.done() for t in first)
                # while they wait they are assumed: their batch-cpu is held on the node
                requested_while_waiting = _requested(srv, "big")
                # binds of other pods are not blocked by the waiting ones
                t0 = time.monotonic()
                loner_answer = (await client.post("/bind", json=_bind_body(loner, "other"))).json()
                loner_seconds = time.monotonic() - t0
                last = (await client.post("/bind", json=_bind_body(group[2], "big"))).json()
                answers = [(await t).json() for t in first]
                return {
                    "held": held,
                    "requested": requested_while_waiting,
                    "loner": loner_answer,
                    "loner_seconds": loner_seconds,
                    "answers": [*answers, last],
                }

        out = asyncio.run(run())
        assert out["held"], "binds answered before the group was complete"
        assert out["requested"] == "2000"
        assert out["loner"] == {"Error": ""} and out["loner_seconds"] < 1.0
        assert out["answers"] == [{"Error": ""}] * 3
        assert _requested(srv, "big") == "3000"
        assert {k for k, v in source._bindings.items() if v == "big"} == {f"default/w-{i}" for i in range(3)}
        assert not any(line.startswith("unreserve") for line in gates[0].log)


def test_permit_timeout_answers_the_error_and_releases_the_node(tmp_path: Path) -> None:
    group = [_pod(f"t-{i}", **{GROUP: "g2", SIZE: "3", TIMEOUT: "0.5"}) for i in range(2)]
    srv, source, gates = _gate_server(tmp_path, group)
    with srv:

        async def run() -> list[dict[str, Any]]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                answers = await asyncio.gather(*(client.post("/bind", json=_bind_body(p, "big")) for p in group))
                return [r.json() for r in answers]

        t0 = time.monotonic()
        answers = asyncio.run(run())
        assert 0.4 < time.monotonic() - t0 < 5
        assert answers == [{"Error": "Gate: rejected due to timeout after waiting 500ms at plugin Gate"}] * 2
        assert _requested(srv, "big") in (None, "0")
        assert source._bindings == {}
        unreserved = sorted(line for line in gates[0].log if line.startswith("unreserve"))
        assert unreserved == ["unreserve t-0", "unreserve t-1"]
        for p in group:
            assert srv.service.cache.find_pod(namespace="default", name=p["metadata"]["name"]).node_name == ""


def test_permit_reject_by_uid_fails_every_waiting_member(tmp_path: Path) -> None:
    group = [_pod(f"r-{i}", **{GROUP: "g3", SIZE: "5"}) for i in range(2)]
    breaker = _pod("r-breaker", **{GROUP: "g3", REJECT: "true"})
    srv, source, _ = _gate_server(tmp_path, [*group, breaker])
    with srv:

        async def run() -> list[dict[str, Any]]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                waiting = [asyncio.create_task(client.post("/bind", json=_bind_body(p, "big"))) for p in group]
                await asyncio.sleep(0.3)
                broke = (await client.post("/bind", json=_bind_body(breaker, "big"))).json()
                return [*[(await t).json() for t in waiting], broke]

        answers = asyncio.run(run())
        assert answers == [
            {"Error": "Gate: group g3 rejected by r-breaker"},
            {"Error": "Gate: group g3 rejected by r-breaker"},
            {"Error": "Gate: group g3 rejected"},
        ]
        assert source._bindings == {}
        assert _requested(srv, "big") in (None, "0")


def test_a_second_bind_of_a_waiting_pod_is_refused(tmp_path: Path) -> None:
    group = [_pod(f"d-{i}", **{GROUP: "g4", SIZE: "2"}) for i in range(2)]
    srv, source, _ = _gate_server(tmp_path, group)
    with srv:

        async def run() -> list[dict[str, Any]]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                first = asyncio.create_task(client.post("/bind", json=_bind_body(group[0], "big")))
                await asyncio.sleep(0.3)
                again = (await client.post("/bind", json=_bind_body(group[0], "other"))).json()
                mate = (await client.post("/bind", json=_bind_body(group[1], "big"))).json()
                return [again, (await first).json(), mate]

        again, first, mate = asyncio.run(run())
        assert again == {"Error": "pod default/d-0 is already assumed on node 'big': its binding is in flight"}
        assert first == {"Error": ""} and mate == {"Error": ""}
        assert source._bindings == {"default/d-0": "big", "default/d-1": "big"}
        assert _requested(srv, "other") in (None, "0")


def test_a_waiting_bind_whose_caller_gave_up_is_rejected(tmp_path: Path) -> None:
    # kube-scheduler's request timed out (httpTimeout shorter than the wait): it requeues the pod, so
    # the pod must not stay assumed here, nor be bound behind its back when the group completes
    group = [_pod(f"c-{i}", **{GROUP: "g5", SIZE: "2", TIMEOUT: "30"}) for i in range(2)]
    srv, source, gates = _gate_server(tmp_path, group)
    with srv:
        with httpx.Client(base_url=srv.url, timeout=0.3) as impatient:
            try:
                impatient.post("/bind", json=_bind_body(group[0], "big"))
                raise AssertionError("the bind answered while its group was incomplete")
            except httpx.ReadTimeout:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and srv.service.framework.waiting_pods.get("uid-c-0") is not None:
            time.sleep(0.05)
        assert srv.service.framework.waiting_pods.get("uid-c-0") is None
        assert srv.service.cache.find_pod(namespace="default", name="c-0").node_name == ""
        assert "unreserve c-0" in gates[0].log
        assert source._bindings == {}
