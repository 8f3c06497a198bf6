"""Plain pods (not LSE/LSR, no NUMA policy of their own) cost the plugin nothing per node: PreFilter skips
them while no node has a node-side policy, and Score (reached without PreFilter, as /prioritize does) too."""

from __future__ import annotations

import numpy as np

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from tests.plugins.nodenumaresource.kit import cache_with, node, nrt, plugin, pod


def test_plain_pods_are_skipped_without_node_policies() -> None:
    p = plugin(cache_with(node("a"), nrt("a", "two-numa-ht"), node("b")))
    plain = parse_pod(pod("ls", "2", qos="LS"))
    assert p.pre_filter(CycleState(0.0), plain).is_skip()
    assert p.pre_score(CycleState(0.0), plain, NodeBatch(np.array([0, 1], dtype=np.int64), ["a", "b"])).is_skip()
    # an LSR pod is not
    assert p.pre_filter(CycleState(0.0), parse_pod(pod("lsr", "2"))).is_success()


def test_with_a_policy_node_only_that_node_judges_a_plain_pod() -> None:
    labels = {"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"}
    cache = cache_with(node("a", labels=labels), node("b"))  # a: no topology, so binding there is refused
    p = plugin(cache)
    plain = parse_pod(pod("ls", "2", qos="LS"))
    state = CycleState(0.0)
    assert p.pre_filter(state, plain).is_success()
    rows, _ = cache.table.rows_of(["a", "b"])
    failures = p.filter_nodes(state, plain, NodeBatch(rows, ["a", "b"]))
    assert {k: v.message for k, v in failures.items()} == {0: "node(s) invalid CPU Topology"}
    # the label going away makes the pod plain again
    cache_node = node("a")
    from app.sources.events import Event, EventType

    cache.apply(Event("Node", EventType.MODIFIED, cache_node))
    assert p.pre_filter(CycleState(0.0), plain).is_skip()


def test_prefilter_state_is_reused_for_the_same_view_only() -> None:
    """/bind re-runs PreFilter on the view /filter parsed: the same PodInfo object gets the same state
    without a second parse (issue 29); a new view of the pod (another spec) is parsed afresh."""
    p = plugin(cache_with(node("a"), nrt("a", "two-numa-ht")))
    lsr = parse_pod(pod("lsr", "2"))
    first, again = CycleState(0.0), CycleState(0.0)
    assert p.pre_filter(first, lsr).is_success() and p.pre_filter(again, lsr).is_success()
    assert again.get("NodeNUMAResource") is first.get("NodeNUMAResource")
    assert again.get("NodeNUMAResource").num_cpus == 2
    bigger = parse_pod(pod("lsr", "4"))
    state = CycleState(0.0)
    assert p.pre_filter(state, bigger).is_success()
    assert state.get("NodeNUMAResource").num_cpus == 4
    odd = parse_pod(pod("lsr", "1500m"))  # LSR with fractional cpus: refused, and refused again
    for _ in range(2):
        assert p.pre_filter(CycleState(0.0), odd).code.label == "UnschedulableAndUnresolvable"


def test_the_pod_parse_is_kept_for_the_same_podinfo_errors_included() -> None:
    """/prioritize and the binding cycle get /filter's PodInfo object: its parse (or its error) is reused, and
    the answers are those of a fresh parse; another PodInfo object is parsed anew."""
    p = plugin(cache_with(node("a"), nrt("a", "two-numa-ht")))
    lsr = parse_pod(pod("lsr", "2"))
    first = p.pre_filter(CycleState(0.0), lsr)
    parsed = p._parse(lsr)
    assert p._parse(lsr) is parsed  # kept
    assert p.pre_filter(CycleState(0.0), lsr) == first
    odd = parse_pod(pod("odd", "1500m", annotations={"scheduling.koordinator.sh/resource-spec": "{bad"}))
    again = [p.pre_filter(CycleState(0.0), odd) for _ in range(2)]
    assert again[0] == again[1] and again[0].is_rejected()
    assert (
        again[0].reasons
        == p.pre_filter(
            CycleState(0.0),
            parse_pod(pod("odd", "1500m", annotations={"scheduling.koordinator.sh/resource-spec": "{bad"})),
        ).reasons
    )
    other = parse_pod(pod("lsr", "2"))
    assert p._parse(other) is parsed  # equal in what the parse reads: shared (issue 29)


def test_equal_pods_share_a_parse_and_pods_differing_in_what_it_reads_do_not() -> None:
    """A workload's replicas (other PodInfo objects, other names) get the parse of the first; a pod that
    differs in its requests, QoS label, priority class or either spec annotation is parsed for itself,
    and each answer is that of a fresh plugin's parse."""
    p = plugin(cache_with(node("a"), nrt("a", "two-numa-ht")))
    spread = {"scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": "SpreadByPCPUs"}'}
    numa = {"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy": "SingleNUMANode"}'}
    base = pod("w-0", "2")
    batch = pod("w-b", "2")
    batch["spec"]["priority"] = 5500  # koord-batch
    variants = {
        "replica": pod("w-1", "2"),
        "cpu": pod("w-c", "4"),
        "memory": pod("w-m", "2", memory="2Gi"),
        "qos": pod("w-q", "2", qos="LS"),
        "priority": batch,
        "spec": pod("w-s", "2", annotations=spread),
        "numa": pod("w-n", "2", annotations=numa),
    }
    first = p._parse(parse_pod(base))
    for what, obj in variants.items():
        got = p._parse(parse_pod(obj))
        fresh = plugin(cache_with(node("a"), nrt("a", "two-numa-ht")))._parse(parse_pod(obj))
        assert got == fresh, what
        assert (got is first) == (what == "replica"), what
