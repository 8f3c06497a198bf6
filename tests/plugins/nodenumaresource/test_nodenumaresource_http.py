"""NodeNUMAResource over real HTTP, driven as kube-scheduler drives the extender (``/filter`` then
``/bind``): concurrent binds never share an exclusive cpu, NUMA topology policies filter and place,
PreBind writes resource-status and the effective resource-spec, bad annotations get a clear reason,
and the node and pod inspection routes show the cpus."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from app.api.topology import parse_cpuset
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.gangkit import annotations_of, bind, filter_verdict, write
from tests.plugins.nodenumaresource.kit import node, nrt, pod, synthetic_nrt

STATUS = "scheduling.koordinator.sh/resource-status"
SPEC = "scheduling.koordinator.sh/resource-spec"
NUMA_SPEC = "scheduling.koordinator.sh/numa-topology-spec"


def _server(tmp: Path, objs: list[dict[str, Any]]) -> tuple[LiveServer, FileSource]:
    source = FileSource(write(tmp, objs), poll_interval=0)
    return LiveServer(source), source


def _failed(verdict: dict[str, Any]) -> dict[str, str]:
    return dict(verdict.get("FailedNodes") or {}) | dict(verdict.get("FailedAndUnresolvableNodes") or {})


def test_50_concurrent_filter_and_bind_never_share_a_cpu(tmp_path: Path) -> None:
    # 64 cpus (2 sockets x 2 NUMA nodes x 8 cores x 2 threads); 50 LSR pods of 2 cpus ask for 100
    pods = [pod(f"lsr-{i}", "2", memory="256Mi") for i in range(50)]
    srv, source = _server(tmp_path, [node("n1", cpu="64", memory="256Gi"), synthetic_nrt("n1", 2, 2, 8, 2), *pods])
    with srv:

        async def one(client: httpx.AsyncClient, p: dict[str, Any]) -> str:
            r = await client.post("/filter", json={"Pod": p, "Nodes": None, "NodeNames": ["n1"]})
            assert r.status_code == 200, r.text
            if r.json()["NodeNames"] != ["n1"]:
                return "filtered"
            return await bind(client, p, "n1")

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=60.0) as client:
                return await asyncio.gather(*(one(client, p) for p in pods))

        errors = asyncio.run(run())
        bound = [p["metadata"]["name"] for p, e in zip(pods, errors, strict=True) if e == ""]
        assert len(bound) == 32, errors  # 64 cpus / 2: every cpu used once, the rest refused
        seen: set[int] = set()
        for name in bound:
            status = json.loads(annotations_of(source, name)[STATUS])
            cpus = parse_cpuset(status["cpuset"])
            assert len(cpus) == 2 and not cpus & seen, (name, status)
            seen |= cpus
        assert seen == set(range(64))
        refused = [e for e in errors if e]
        assert all(e == "filtered" or "Insufficient cpu" in e or "not enough cpus" in e for e in refused), refused


def test_numa_policies_filter_and_place(tmp_path: Path) -> None:
    single = {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"}
    restricted = {"node.koordinator.sh/numa-topology-policy": "Restricted"}
    objs = [
        node("single", cpu="32", memory="96Gi", labels=single),
        nrt("single", "two-numa-ht"),  # NUMA 0: 16 cpus 64Gi, NUMA 1: 16 cpus 32Gi
        node("restricted", cpu="32", memory="96Gi", labels=restricted),
        nrt("restricted", "two-numa-ht"),
        node("plain", cpu="32", memory="96Gi"),
        nrt("plain", "two-numa-ht"),
        node("bare", cpu="32", memory="96Gi"),  # no NodeResourceTopology
    ]
    big = pod("big", "20", memory="1Gi", qos="LS")
    mem = pod("mem", "4", memory="40Gi")
    best = pod("best", "2", qos="LS", annotations={NUMA_SPEC: json.dumps({"numaTopologyPolicy": "BestEffort"})})
    pod_single = pod("pod-single", "20", qos="LS", annotations={NUMA_SPEC: '{"numaTopologyPolicy":"SingleNUMANode"}'})
    srv, source = _server(tmp_path, [*objs, big, mem, best, pod_single])
    names = ["single", "restricted", "plain", "bare"]
    with srv:
        # 20 cpus fit no single NUMA node: SingleNUMANode refuses, Restricted spans two, others do not care
        v = filter_verdict(srv.client, big, names)
        assert v["NodeNames"] == ["restricted", "plain", "bare"]
        assert _failed(v)["single"] == "Unaligned NUMA Hint cause cpu prefer [] among [],memory prefer [] among []"
        # the pod's own policy: with a node's differing policy it is refused; without one it applies
        v = filter_verdict(srv.client, pod_single, names)
        failed = _failed(v)
        assert v["NodeNames"] == []
        assert "node(s) NUMA Topology policy not match" in failed["restricted"]
        assert "Unaligned NUMA Hint" in failed["single"] and "Unaligned NUMA Hint" in failed["plain"]
        assert "node(s) missing NUMA resources" in failed["bare"]
        v = filter_verdict(srv.client, best, names)
        assert "node(s) NUMA Topology policy not match" in _failed(v)["single"]
        # 40Gi fits only NUMA node 0 (64Gi): the LSR pod is placed there, its cpuset on node 0's cpus
        v = filter_verdict(srv.client, mem, ["single"])
        assert v["NodeNames"] == ["single"]
        r = srv.client.post("/prioritize", json={"Pod": mem, "Nodes": None, "NodeNames": ["single", "plain"]})
        assert r.status_code == 200, r.text
        assert asyncio.run(_bind(srv, mem, "single")) == ""
        status = json.loads(annotations_of(source, "mem")[STATUS])
        assert status == {
            "cpuset": "0-1,16-17",
            "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "40Gi"}}],
        }
        assert json.loads(annotations_of(source, "mem")[SPEC]) == {"preferredCPUBindPolicy": "FullPCPUs"}
        # the node route shows the cpus per NUMA node, the pod route the resource-status
        body = srv.client.get("/apis/v1/nodes/single").json()
        zone0 = body["cpuAllocation"]["numaNodes"][0]
        assert zone0["allocated"] == "0-1,16-17" and zone0["freeCount"] == 12
        assert body["cpuAllocation"]["numaTopologyPolicy"] == "SingleNUMANode"
        pod_body = srv.client.get("/apis/v1/pods/default/mem").json()
        assert STATUS in json.dumps(pod_body)


async def _bind(srv: LiveServer, p: dict[str, Any], node_name: str) -> str:
    async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
        return await bind(client, p, node_name)


def test_bad_annotations_get_a_clear_reason_not_a_500(tmp_path: Path) -> None:
    bad_json = pod("bad-json", "2", annotations={SPEC: "{not json"})
    bad_policy = pod("bad-policy", "2", annotations={SPEC: '{"preferredCPUBindPolicy":"Bogus"}'})
    bad_numa = pod("bad-numa", "2", annotations={NUMA_SPEC: '{"numaTopologyPolicy":"Sometimes"}'})
    frac = pod("frac", "1500m")
    srv, _ = _server(tmp_path, [node("n1"), nrt("n1", "two-numa-ht"), node("n2"), bad_json, bad_policy, bad_numa, frac])
    with srv:
        for p, needle in (
            (bad_json, "invalid scheduling.koordinator.sh/resource-spec annotation"),
            (bad_policy, "preferredCPUBindPolicy 'Bogus' is not one of"),
            (bad_numa, "numaTopologyPolicy 'Sometimes' is not one of"),
            (frac, "the requested CPUs must be integer"),
        ):
            r = srv.client.post("/filter", json={"Pod": p, "Nodes": None, "NodeNames": ["n1", "n2"]})
            assert r.status_code == 200, r.text
            v = r.json()
            assert v["NodeNames"] == [] and not v.get("Error")
            reasons = v["FailedAndUnresolvableNodes"]
            assert set(reasons) == {"n1", "n2"} and all(needle in reason for reason in reasons.values()), reasons
        # the rest keeps flowing: a good pod is placed, only where there is a topology
        good = pod("good", "2")
        assert filter_verdict(srv.client, good, ["n1", "n2"])["NodeNames"] == ["n1"]
