"""NodeResourceTopology objects reach the scheduler's cache from both sources (cluster files, list/watch), keyed
by node; a malformed one is refused alone; ``/apis/v1/nodes/{name}`` shows the node's CPU topology."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.api.topology import TopologyError, format_cpuset, parse_cpuset, parse_node_resource_topology
from app.cache.snapshot import ClusterCache
from app.sources.events import Event, EventType
from app.sources.files import FileSource
from app.sources.kubernetes import KubernetesSource
from tests.client.conftest import write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer, WatchScript
from tests.conftest import LiveServer

NRT_PATH = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"


def nrt(name: str, *, sockets: int = 2, nodes: int = 2, cores_per_node: int = 4, **annotations: str) -> dict[str, Any]:
    """A NodeResourceTopology as the agent writes it: ``nodes`` NUMA nodes, 2 threads per core (cpu c and its
    sibling c + half), ``sockets`` sockets."""
    half = nodes * cores_per_node
    detail = []
    for cpu in range(2 * half):
        core = cpu % half
        numa = core // cores_per_node
        detail.append({"id": cpu, "core": core, "socket": numa * sockets // nodes, "node": numa})
    pools = [
        {"socket": n * sockets // nodes, "node": n, "cpuset": format_cpuset(d["id"] for d in detail if d["node"] == n)}
        for n in range(nodes)
    ]
    zones = []
    for n in range(nodes):
        q = str(2 * cores_per_node)
        zones.append(
            {
                "name": f"node-{n}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": q, "allocatable": q, "available": q},
                    {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"},
                ],
            }
        )
    base = {
        "node.koordinator.sh/cpu-topology": json.dumps({"detail": detail}),
        "node.koordinator.sh/cpu-shared-pools": json.dumps(pools),
        "kubelet.koordinator.sh/cpu-manager-policy": json.dumps({"policy": "static", "reservedCPUs": "0,8"}),
        "node.koordinator.sh/pod-cpu-allocs": "null",
    }
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name, "annotations": {**base, **annotations}},
        "topologyPolicies": ["None"],
        "zones": zones,
    }


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "16"}}}


# -- parsing ------------------------------------------------------------------------------------------------


def test_cpuset_list_format_round_trips() -> None:
    assert parse_cpuset("0-3,8-11") == {0, 1, 2, 3, 8, 9, 10, 11}
    assert parse_cpuset(" 5 , 1-2,") == {1, 2, 5}
    assert parse_cpuset("") == frozenset()
    assert format_cpuset({0, 1, 2, 3, 8, 9, 10, 11}) == "0-3,8-11"
    assert format_cpuset([5, 3, 4, 7]) == "3-5,7"
    assert format_cpuset([]) == ""
    for bad in ("a", "3-1", "-1", "1-2-3", "0-70000", "1,,x"):
        with pytest.raises(ValueError, match="invalid cpuset"):
            parse_cpuset(bad)


def test_parse_gives_the_summary_the_scheduler_shows() -> None:
    topo = parse_node_resource_topology(nrt("n1"))
    assert (len(topo.cpus), topo.sockets, topo.cores, topo.threads_per_core) == (16, 2, 8, 2)
    assert topo.kubelet_reserved == {0, 8}
    assert topo.numa_nodes[1].cpus == {4, 5, 6, 7, 12, 13, 14, 15}
    assert topo.numa_nodes[0].capacity == {"cpu": 8000, "memory": 32 * 1024**3}
    summary = topo.summary()
    assert summary["numaNodes"] == [
        {"node": 0, "cpus": "0-3,8-11", "cpuCount": 8, "memoryBytes": 32 * 1024**3},
        {"node": 1, "cpus": "4-7,12-15", "cpuCount": 8, "memoryBytes": 32 * 1024**3},
    ]
    assert summary["kubeletCPUManagerPolicy"] == {"policy": "static", "reservedCPUs": "0,8"}
    assert summary["kubeletAllocatedCPUs"] == "" and topo.kubelet_allocs == ()
    allocs = (
        '[{"namespace":"d","name":"g","uid":"u1","cpuset":"4-5","managedByKubelet":true},{"uid":"u2","cpuset":"12"}]'
    )
    held = parse_node_resource_topology(nrt("n1", **{"node.koordinator.sh/pod-cpu-allocs": allocs}))
    assert held.kubelet_allocated == {4, 5, 12}
    assert [(a.uid, a.managed_by_kubelet) for a in held.kubelet_allocs] == [("u1", True), ("u2", False)]
    assert (summary["cpus"], summary["sockets"], summary["cores"], summary["threadsPerCore"]) == (16, 2, 8, 2)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o["metadata"].pop("name"), "metadata.name: required"),
        (lambda o: o.update(zones={"node-0": {}}), "zones: expected a list"),
        (lambda o: o.update(topologyPolicies="None"), "topologyPolicies: expected a list"),
        (lambda o: o["zones"][0].pop("type"), r"zones\[0\]\.type: Field required"),
        (lambda o: o["zones"][1]["resources"][0].update(capacity="lots"), r"zones\[1\]\.resources\[0\] \(cpu\)"),
        (
            lambda o: o["metadata"]["annotations"].update({"node.koordinator.sh/cpu-topology": "{not json"}),
            "node.koordinator.sh/cpu-topology: invalid JSON",
        ),
        (
            lambda o: o["metadata"]["annotations"].update(
                {
                    "node.koordinator.sh/cpu-topology": '{"detail":[{"id":0,"core":0,"socket":0,"node":0},'
                    '{"id":0,"core":1,"socket":0,"node":0}]}'
                }
            ),
            "cpu 0 listed twice",
        ),
        (
            lambda o: o["metadata"]["annotations"].update(
                {"node.koordinator.sh/cpu-topology": '{"detail":[{"id":-1,"core":0,"socket":0,"node":0}]}'}
            ),
            r"cpu-topology: detail\.0\.id",
        ),
        (
            lambda o: o["metadata"]["annotations"].update(
                {"node.koordinator.sh/cpu-shared-pools": '[{"socket":0,"node":0,"cpuset":"7-3"}]'}
            ),
            "cpu-shared-pools: invalid cpuset",
        ),
        (
            lambda o: o["metadata"]["annotations"].update(
                {"kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"static","reservedCPUs":"x"}'}
            ),
            "cpu-manager-policy: invalid cpuset",
        ),
        (
            lambda o: o["metadata"]["annotations"].update({"node.koordinator.sh/pod-cpu-allocs": '{"uid":"u"}'}),
            "pod-cpu-allocs: expected a list or null",
        ),
        (
            lambda o: o["metadata"]["annotations"].update({"node.koordinator.sh/pod-cpu-allocs": '[{"cpuset":"0-"}]'}),
            "pod-cpu-allocs: invalid cpuset",
        ),
    ],
)
def test_malformed_objects_are_refused_naming_the_field(mutate: Any, message: str) -> None:
    obj = nrt("n1")
    mutate(obj)
    with pytest.raises(TopologyError, match=message):
        parse_node_resource_topology(obj)


def test_the_cache_refuses_a_bad_update_and_keeps_the_last_good_version() -> None:
    cache = ClusterCache()
    cache.apply(Event("Node", EventType.ADDED, node("n1")))
    cache.apply(Event("NodeResourceTopology", EventType.ADDED, nrt("n1")))
    assert cache.node_topologies["n1"].cores == 8
    bad = nrt("n1")
    bad["metadata"]["annotations"]["node.koordinator.sh/cpu-topology"] = "[]"
    cache.apply(Event("NodeResourceTopology", EventType.MODIFIED, bad))
    assert cache.rejected_by_kind == {"NodeResourceTopology": 1}
    assert cache.node_topologies["n1"].cores == 8
    assert cache.objects["NodeResourceTopology"]["n1"] == nrt("n1")
    cache.apply(Event("NodeResourceTopology", EventType.DELETED, nrt("n1")))
    assert "n1" not in cache.node_topologies and "n1" in cache.nodes


# -- the file source and the service -----------------------------------------------------------------------


def test_files_source_feeds_the_cache_and_the_node_route(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    (cluster / "nodes.yaml").write_text(yaml.safe_dump_all([node("n1"), node("n2"), node("n3")]))
    (cluster / "noderesourcetopology-n1.yaml").write_text(yaml.safe_dump(nrt("n1")))
    bad = nrt("n2")
    bad["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"] = "{}"
    (cluster / "noderesourcetopology-n2.yaml").write_text(yaml.safe_dump(bad))
    with LiveServer(FileSource(cluster, poll_interval=0.05, restamp_interval=0)) as srv:
        body = srv.client.get("/apis/v1/nodes/n1").json()
        topo = body["cpuTopology"]
        assert (topo["cpus"], topo["sockets"], topo["cores"], topo["threadsPerCore"]) == (16, 2, 8, 2)
        assert [(n["node"], n["cpus"], n["cpuCount"]) for n in topo["numaNodes"]] == [
            (0, "0-3,8-11", 8),
            (1, "4-7,12-15", 8),
        ]
        assert topo["topologyPolicies"] == ["None"]
        # the malformed one is refused alone: n2 has no topology, counted and logged; n2 and n3 still serve
        assert srv.client.get("/apis/v1/nodes/n2").json()["cpuTopology"] is None
        assert srv.client.get("/apis/v1/nodes/n3").json()["cpuTopology"] is None
        metrics = srv.client.get("/metrics").text
        assert 'koord_cache_rejected_objects_total{kind="NodeResourceTopology"} 1.0' in metrics
        # the agent rewrites n3's file: the poll delivers it
        (cluster / "noderesourcetopology-n3.yaml").write_text(yaml.safe_dump(nrt("n3", sockets=1, nodes=1)))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and srv.client.get("/apis/v1/nodes/n3").json()["cpuTopology"] is None:
            time.sleep(0.05)
        assert srv.client.get("/apis/v1/nodes/n3").json()["cpuTopology"]["sockets"] == 1


async def test_kubernetes_source_lists_and_watches_topologies(tmp_path: Path) -> None:
    fake = FakeAPIServer()
    fake.seed(NRT_PATH, nrt("n1"))
    bad = nrt("n2")
    bad["zones"] = "nope"
    fake.seed(NRT_PATH, bad)
    n3 = nrt("n3", sockets=1, nodes=1)
    n3["metadata"]["resourceVersion"] = "500"
    fake.watch_scripts[NRT_PATH].append(WatchScript(lines=[{"type": "ADDED", "object": n3}], end="hold"))
    source = KubernetesSource(("NodeResourceTopology",), kubeconfig=write_kubeconfig(tmp_path / "kc", fake.url))
    cache = ClusterCache()
    try:
        await source.start(cache)
        for _ in range(200):
            if "n3" in cache.node_topologies:
                break
            await asyncio.sleep(0.025)
    finally:
        await source.stop()
        fake.close()
    assert sorted(cache.node_topologies) == ["n1", "n3"]
    assert cache.node_topologies["n3"].sockets == 1
    assert cache.rejected_by_kind == {"NodeResourceTopology": 1}
    lists = [r for r in fake.requests if r.path.startswith(NRT_PATH) and r.query.get("watch") != "true"]
    assert lists and lists[0].method == "GET"
