"""Filter of a pod with a NUMA topology policy from the per-NUMA-node columns agrees with the exact per-node
check (``_filter_one``: the topology manager's admission of ``topology_hint.admit``) on random node fillings
and random pods (hypothesis, bounded examples)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.plugins.nodenumaresource.kit import cache_with, node, plugin, pod, synthetic_nrt

# (sockets, NUMA nodes per socket, cores per NUMA node, threads, GiB per NUMA node); None: no topology.
# The 17-NUMA-node machine has more NUMA nodes than the columns' slots (judged one by one).
SHAPES: list[tuple[int, int, int, int, int] | None] = [
    (2, 2, 4, 2, 8),
    (1, 4, 2, 2, 4),
    (2, 1, 8, 1, 16),
    (1, 17, 1, 1, 1),
    None,
]
POLICIES = [n.NUMA_POLICY_BEST_EFFORT, n.NUMA_POLICY_RESTRICTED, n.NUMA_POLICY_SINGLE_NUMA_NODE]
BINDS = ["", n.CPU_BIND_FULL_PCPUS, n.CPU_BIND_SPREAD_BY_PCPUS]


def _cluster() -> tuple[list[str], list[dict[str, Any]]]:
    names, objs = [], []
    for i, shape in enumerate(SHAPES):
        name = f"n{i}"
        names.append(name)
        objs.append(node(name, cpu="64", memory="256Gi"))
        if shape is not None:
            objs.append(synthetic_nrt(name, *shape))
    return names, objs


def _pod(name: str, cpus: int, memory_gib: int, policy: str, bind: str, qos: str) -> dict[str, Any]:
    annotations = {n.ANNOTATION_NUMA_TOPOLOGY_SPEC: json.dumps({"numaTopologyPolicy": policy})} if policy else {}
    if bind:
        annotations[n.ANNOTATION_RESOURCE_SPEC] = json.dumps({"requiredCPUBindPolicy": bind})
    return pod(name, str(cpus), qos=qos, memory=f"{memory_gib}Gi", annotations=annotations)


def _fill(p: NodeNUMAResource, names: list[str], fills: list[tuple[int, int, int, int, str, str]]) -> None:
    """Reserve the filling pods where they fit (a refusal leaves the node as it was)."""
    for k, (where, cpus, memory_gib, policy_i, bind, qos) in enumerate(fills):
        info = parse_pod(_pod(f"fill-{k}", cpus, memory_gib, ["", *POLICIES][policy_i], bind, qos))
        state = CycleState(0.0)
        if p.pre_filter(state, info).is_success():
            p.reserve(state, info, names[where % len(names)])


def _both(p: NodeNUMAResource, names: list[str], obj: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    info = parse_pod(obj)
    state = CycleState(0.0)
    status = p.pre_filter(state, info)
    assert status.is_success(), status.message
    rows = np.array([p.handle.snapshot.row(x) for x in names], dtype=np.int64)
    fast = p.filter_nodes(state, info, NodeBatch(rows, list(names)))
    fast_out = {names[pos]: f"{s.code}:{s.message}" for pos, s in fast.items()}
    ps = p._state(state, info)
    exact_out = {}
    for name in names:
        s = p._filter_one(ps, name, frozenset())
        if not s.is_success():
            exact_out[name] = f"{s.code}:{s.message}"
    return fast_out, exact_out


fill = st.tuples(
    st.integers(0, len(SHAPES) - 1),
    st.one_of(st.sampled_from([2, 4, 8]), st.integers(1, 12)),
    st.one_of(st.sampled_from([1, 2, 4, 8]), st.integers(1, 20)),
    st.integers(0, len(POLICIES)),
    st.sampled_from(BINDS),
    st.sampled_from(["LSR", "LS"]),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fills=st.lists(fill, max_size=10),
    cpus=st.one_of(st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 20)),  # NUMA node sizes: boundaries
    memory_gib=st.one_of(st.sampled_from([1, 4, 8, 16, 32]), st.integers(1, 40)),
    policy=st.sampled_from(POLICIES),
    bind=st.sampled_from(BINDS),
    qos=st.sampled_from(["LSR", "LS"]),
)
def test_numa_filter_columns_agree_with_the_exact_check(
    fills: list[tuple[int, int, int, int, str, str]], cpus: int, memory_gib: int, policy: str, bind: str, qos: str
) -> None:
    names, objs = _cluster()
    p = plugin(cache_with(*objs))
    _fill(p, names, fills)
    fast, exact = _both(p, names, _pod("probe", cpus, memory_gib, policy, bind, qos))
    assert fast == exact


def test_the_columns_follow_the_holders() -> None:
    """A node refused once its NUMA nodes fill is admitted again when the holder leaves (columns refreshed)."""
    names, objs = _cluster()
    p = plugin(cache_with(*objs))
    probe = _pod("probe", 8, 1, n.NUMA_POLICY_SINGLE_NUMA_NODE, "", "LS")
    fast, exact = _both(p, names, probe)
    assert fast == exact
    assert "n2" not in fast  # one NUMA node of 8 cpus holds 8 cpus
    info = parse_pod(_pod("big", 8, 1, n.NUMA_POLICY_SINGLE_NUMA_NODE, "", "LS"))
    info2 = parse_pod(_pod("big2", 8, 1, n.NUMA_POLICY_SINGLE_NUMA_NODE, "", "LS"))
    for i in (info, info2):
        state = CycleState(0.0)
        assert p.pre_filter(state, i).is_success()
        assert p.reserve(state, i, "n2").is_success()
    fast, exact = _both(p, names, probe)
    assert fast == exact
    assert "Unaligned NUMA Hint" in fast["n2"]
    p.manager.release(info.uid)
    fast, exact = _both(p, names, probe)
    assert fast == exact
    assert "n2" not in fast
    assert fast["n4"].endswith(n.ERR_MISSING_NUMA_RESOURCES)
