"""NUMA-aware Score (upstream scoring.go): under a NUMA policy a node is scored over the NUMA nodes the pod
would get, with what holders took there; and a bound pod's malformed resource-status holds nothing."""

from __future__ import annotations

import json

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from tests.plugins.nodenumaresource.kit import cache_with, node, nrt, plugin, pod, run_cycle

STATUS = "scheduling.koordinator.sh/resource-status"
SINGLE = {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"}


def _held(name: str, node_name: str, cpuset: str) -> dict:
    return pod(name, "1", node_name=node_name, annotations={STATUS: json.dumps({"cpuset": cpuset})})


def test_score_is_taken_over_the_chosen_numa_node() -> None:
    # "busy" has 8 cpus taken on each NUMA node; "idle" none: the pod's best NUMA node is freer on "idle"
    cache = cache_with(
        node("busy", labels=SINGLE),
        nrt("busy", "two-numa-ht"),
        node("idle", labels=SINGLE),
        nrt("idle", "two-numa-ht"),
        _held("a", "busy", "0-3,16-19"),
        _held("b", "busy", "8-11,24-27"),
    )
    p = plugin(cache, {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}]}})
    info = parse_pod(pod("lsr", "4"))
    state = CycleState(0.0)
    assert p.pre_filter(state, info).is_success()
    rows, _ = cache.table.rows_of(["busy", "idle"])
    batch = NodeBatch(rows, ["busy", "idle"])
    assert p.filter_nodes(state, info, batch) == {}
    scores = p.score_nodes(state, info, batch).tolist()
    # LeastAllocated cpu over one NUMA node of 16 cpus: busy (16 - 8 - 4) * 100 / 16, idle (16 - 4) * 100 / 16
    assert scores == [25, 75]


def test_a_malformed_resource_status_holds_nothing_and_the_rest_flows() -> None:
    bad = pod("bad", "1", node_name="n", annotations={STATUS: '{"cpuset":"7-3"}'})
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht"), bad, _held("good", "n", "0")))
    assert p.node_cpus("n")["holders"] == [{"pod": "default/good", "uid": "uid-good", "cpuset": "0"}]
    assert run_cycle(p, pod("lsr", "2"), "n") == ("1,9", "")
