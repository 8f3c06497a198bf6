"""Which cpus an LSE/LSR pod gets, per policy, on the three fake machines (tests/agent/fakesysfs.py), each
expectation worked by hand from upstream's accumulator order (cpu_accumulator.go):

- one-socket-ht: 1 socket, 1 NUMA node, cores 0-7, cpu i and i+8 are siblings (core i % 8).
- two-numa-ht: socket/NUMA node 0 = cpus 0-7 + siblings 16-23 (cores 0-7), node 1 = 8-15 + 24-31.
- four-numa: no SMT, NUMA node n = cpus 4n..4n+3, socket 0 = nodes 0-1, socket 1 = nodes 2-3.
"""

from __future__ import annotations

import json

from tests.plugins.nodenumaresource.kit import cache_with, node, nrt, plugin, pod, run_cycle

SPEC = "scheduling.koordinator.sh/resource-spec"
STATUS = "scheduling.koordinator.sh/resource-status"


def _spec(**kw: str) -> dict[str, str]:
    return {SPEC: json.dumps(kw)}


def _holder(name: str, node_name: str, cpuset: str, **spec: str) -> dict:
    ann = {STATUS: json.dumps({"cpuset": cpuset})}
    if spec:
        ann.update(_spec(**spec))
    return pod(name, "1", node_name=node_name, annotations=ann)


# ---------------------------------------------------------------- one socket, hyper-threads
def test_full_pcpus_takes_whole_cores_in_order() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht")))
    # cores 0 and 1 with both threads: 0,8 and 1,9
    assert run_cycle(p, pod("a", "4"), "n") == ("0-1,8-9", "")
    assert run_cycle(p, pod("b", "2"), "n") == ("2,10", "")


def test_spread_by_pcpus_takes_one_thread_per_core() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht")))
    assert run_cycle(p, pod("a", "4", annotations=_spec(preferredCPUBindPolicy="SpreadByPCPUs")), "n") == ("0-3", "")


def test_a_half_used_core_is_skipped_by_full_pcpus() -> None:
    # cpu 0 is held by a bound pod: core 0 keeps only cpu 8, so whole cores start at core 1
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht"), _holder("old", "n", "0")))
    assert run_cycle(p, pod("a", "4"), "n") == ("1-2,9-10", "")


def test_odd_count_under_preferred_full_pcpus_takes_a_half_core() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht")))
    assert run_cycle(p, pod("a", "3"), "n") == ("0-1,8", "")


def test_pcpu_level_exclusive_avoids_cores_of_other_exclusive_pods() -> None:
    # a PCPULevel pod holds cpu 8 (core 0): a PCPULevel spread pod skips core 0; a plain one does not
    held = _holder("old", "n", "8", preferredCPUExclusivePolicy="PCPULevel")
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht"), held))
    excl = _spec(preferredCPUBindPolicy="SpreadByPCPUs", preferredCPUExclusivePolicy="PCPULevel")
    assert run_cycle(p, pod("a", "2", annotations=excl), "n") == ("1-2", "")
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht"), held))
    plain = _spec(preferredCPUBindPolicy="SpreadByPCPUs")
    assert run_cycle(p, pod("b", "2", annotations=plain), "n") == ("0-1", "")


def test_node_full_pcpus_only_requires_whole_cores() -> None:
    labels = {"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"}
    p = plugin(cache_with(node("n", labels=labels), nrt("n", "one-socket-ht")))
    assert run_cycle(p, pod("a", "3"), "n") == ("", "node(s) requested cpus not multiple cpus per core")
    # the node's policy binds an LS pod too, when its request is integer
    assert run_cycle(p, pod("ls", "2", qos="LS"), "n") == ("0,8", "")
    assert run_cycle(p, pod("frac", "1500m", qos="LS"), "n") == ("", "the requested CPUs must be integer")


def test_kubelet_static_full_pcpus_only_acts_as_the_node_policy_and_keeps_reserved_cpus() -> None:
    kubelet = {"policy": "static", "options": {"full-pcpus-only": "true"}, "reservedCPUs": "0,8"}
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht", kubelet_policy=kubelet)))
    assert run_cycle(p, pod("a", "3"), "n")[1] == "node(s) requested cpus not multiple cpus per core"
    assert run_cycle(p, pod("b", "2"), "n") == ("1,9", "")


def test_conflicting_required_policy_is_unresolvable() -> None:
    labels = {"node.koordinator.sh/cpu-bind-policy": "SpreadByPCPUs"}
    p = plugin(cache_with(node("n", labels=labels), nrt("n", "one-socket-ht")))
    ann = _spec(requiredCPUBindPolicy="FullPCPUs")
    assert run_cycle(p, pod("a", "2", annotations=ann), "n")[1] == (
        "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
    )
    # SpreadByPCPUs node: a pod with no required policy is spread
    assert run_cycle(p, pod("b", "2"), "n") == ("0-1", "")


def test_not_enough_cpus() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht")))
    assert run_cycle(p, pod("a", "12"), "n")[1] == ""
    assert run_cycle(p, pod("b", "6"), "n") == ("", "not enough cpus available to satisfy request")


def test_only_lse_lsr_prod_pods_with_integer_cpus_get_a_cpuset() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "one-socket-ht")))
    assert run_cycle(p, pod("ls", "2", qos="LS"), "n") == ("", "")
    assert run_cycle(p, pod("be", "2", qos="BE"), "n") == ("", "")
    batch = pod("lsr-batch", "2")
    batch["metadata"]["labels"]["koordinator.sh/priority-class"] = "koord-batch"
    assert run_cycle(p, batch, "n") == ("", "")
    assert run_cycle(p, pod("frac", "1500m"), "n") == ("", "the requested CPUs must be integer")
    assert run_cycle(p, pod("lse", "2", qos="LSE"), "n") == ("0,8", "")


def test_a_node_without_topology_filters_binding_pods() -> None:
    p = plugin(cache_with(node("n")))
    assert run_cycle(p, pod("a", "2"), "n") == ("", "node(s) invalid CPU Topology")
    assert run_cycle(p, pod("ls", "2", qos="LS"), "n") == ("", "")


# ---------------------------------------------------------------- two sockets / NUMA nodes, HT
def test_two_numa_fits_in_one_numa_node_first() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "two-numa-ht")))
    assert run_cycle(p, pod("a", "4"), "n") == ("0-1,16-17", "")
    # node 0 now has fewer free cpus: LeastAllocated NUMA strategy moves to node 1
    assert run_cycle(p, pod("b", "4"), "n") == ("8-9,24-25", "")


def test_two_numa_more_than_a_socket_takes_a_whole_socket_then_cores() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "two-numa-ht")))
    assert run_cycle(p, pod("a", "20"), "n") == ("0-9,16-25", "")


def test_numa_node_level_exclusive_avoids_the_other_pods_numa_node() -> None:
    labels = {"node.koordinator.sh/numa-allocate-strategy": "MostAllocated"}
    held = _holder("old", "n", "0", preferredCPUExclusivePolicy="NUMANodeLevel")
    p = plugin(cache_with(node("n", labels=labels), nrt("n", "two-numa-ht"), held))
    assert run_cycle(p, pod("plain", "4"), "n") == ("1-2,17-18", "")
    p = plugin(cache_with(node("n", labels=labels), nrt("n", "two-numa-ht"), held))
    excl = _spec(preferredCPUExclusivePolicy="NUMANodeLevel")
    assert run_cycle(p, pod("excl", "4", annotations=excl), "n") == ("8-9,24-25", "")


# ---------------------------------------------------------------- four NUMA nodes, no HT
def test_four_numa_least_allocated_prefers_the_freer_socket() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "four-numa")))
    assert run_cycle(p, pod("a", "2"), "n") == ("0-1", "")
    # node 0 has 2 free; nodes 1-3 have 4; socket 1 (nodes 2, 3) is freer than socket 0
    assert run_cycle(p, pod("b", "3"), "n") == ("8-10", "")


def test_four_numa_most_allocated_packs() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "four-numa")), {"numaScoringStrategy": {"type": "MostAllocated"}})
    assert run_cycle(p, pod("a", "2"), "n") == ("0-1", "")
    assert run_cycle(p, pod("b", "3"), "n") == ("4-6", "")


def test_four_numa_a_socket_sized_request_and_kubelet_reserved() -> None:
    p = plugin(cache_with(node("n"), nrt("n", "four-numa")))
    assert run_cycle(p, pod("a", "6"), "n") == ("0-5", "")
    kubelet = {"policy": "static", "reservedCPUs": "0"}
    p = plugin(cache_with(node("n"), nrt("n", "four-numa", kubelet_policy=kubelet)))
    assert run_cycle(p, pod("b", "4"), "n") == ("8-11", "")


def test_unreserve_frees_the_cpus() -> None:
    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState

    p = plugin(cache_with(node("n"), nrt("n", "four-numa")))
    info = parse_pod(pod("a", "4"))
    state = CycleState(0.0)
    p.pre_filter(state, info)
    assert p.reserve(state, info, "n").is_success()
    assert p.pod_cpus(info.uid) == {"node": "n", "cpuset": "0-3"}
    p.unreserve(state, info, "n")
    assert p.pod_cpus(info.uid) is None
    assert run_cycle(p, pod("b", "4"), "n") == ("0-3", "")


def test_the_node_reservations_reserved_cpus_are_not_free() -> None:
    obj = nrt("n", "four-numa")
    obj["metadata"]["annotations"]["node.koordinator.sh/reservation"] = '{"reservedCPUs":"0-3"}'
    p = plugin(cache_with(node("n"), obj))
    # NUMA node 0 is reserved whole; socket 1 (nodes 2, 3: 8 free) is freer than socket 0 (4 free)
    assert run_cycle(p, pod("a", "4"), "n") == ("8-11", "")
    assert p.node_cpus("n")["numaNodes"][0]["reserved"] == "0-3"


def test_a_preemption_dry_run_gives_the_victims_cpus_back() -> None:
    import numpy as np

    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState
    from app.framework.interfaces import NodeBatch

    cache = cache_with(node("n"), nrt("n", "one-socket-ht"), _holder("victim", "n", "0-13"))
    p = plugin(cache)
    info = parse_pod(pod("lsr", "4"))
    state = CycleState(0.0)
    p.pre_filter(state, info)
    rows = np.array([cache.table.row("n")], dtype=np.int64)
    assert (
        p.filter_nodes(state, info, NodeBatch(rows, ["n"]))[0].message == "not enough cpus available to satisfy request"
    )
    victim = cache.pods["uid-victim"]
    assert p.filter_nodes(state, info, NodeBatch(rows, ["n"], removed=[[victim]])) == {}
