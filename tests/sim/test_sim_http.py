"""A slice of the real trace through the service's HTTP verbs: capacity never exceeded, annotations
match the cache, and FragmentationAware fragments less than LeastAllocated."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.sim.allocations import check_allocations, read_gpu_usage
from app.sim.errors import SimInputError
from app.sim.experiment import Trace, events_for, load_trace, run_one
from app.sim.fragmentation import deviceshare_fragmentation
from app.sim.policies import builtin_policy
from app.sim.run import SimResult, Simulation
from app.sim.service import InProcessService
from app.sim.workload import EventKind
from app.sources.events import Event, EventType


@pytest.fixture
def trace(trace_slice: tuple[Path, Path]) -> Trace:
    return load_trace(*trace_slice, "static")


def test_slice_runs_with_consistent_accounting(trace: Trace) -> None:
    policy = builtin_policy("MostAllocated")
    events = events_for(trace, "static", 42, 1.3)
    with InProcessService(policy.config) as service:
        sim = Simulation(service, trace.nodes, policy, 42, deviceshare_fragmentation(trace.pods))
        sim.load_cluster()
        result = sim.run(events)
        assert result.problems == []
        cache = service.state.cache
        usage = service.read(lambda: read_gpu_usage(cache, sim.rows))
        assert usage.unannotated_pods == 0
        assert usage.annotated_pods == sim.bound_gpu_pods > 0  # every bound GPU pod carries its annotation
        assert (usage.used_milli <= 1000).all()
        assert int(usage.used_milli.sum()) == sim.allocated_milli  # annotations == what the sim saw bound
        tracked = sim.gpu_usage()  # the fragmentation samples' incremental read agrees with the full one
        assert (tracked.used_milli == usage.used_milli).all() and (tracked.exists == usage.exists).all()
        assert (tracked.annotated_pods, tracked.unannotated_pods) == (usage.annotated_pods, 0)
        # every bound pod in the source is bound in the cache to the same node
        bound = service.read(lambda: {p.name: p.node_name for p in cache.pods.values() if p.node_name})
        assert len(bound) == result.scheduled_pods
        # the server's seconds per verb: the latency histogram's sums, as the registry reports them
        registry = service.state.metrics.registry
        name = "koord_extender_request_duration_seconds_sum"
        read = {v: registry.get_sample_value(name, {"verb": v}) for v in ("filter", "prioritize", "bind")}
        assert service.read(sim._server_seconds) == read and all(v and v > 0 for v in read.values())
        assert result.server_seconds == pytest.approx(read)  # from 0 at the start of the run
        # the checker catches an over-allocated GPU
        node = next(n for n in trace.nodes if n.gpu)
        uid = next(u for u, p in cache.pods.items() if p.node_name == node.name and p.requests.get("nvidia.com/gpu"))
        obj = cache.pod_objects[uid]  # a copy: the cache changes only through an event
        obj["metadata"]["annotations"]["scheduling.koordinator.sh/device-allocated"] = (
            '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"300"}}]}'
        )
        service.read(lambda: cache.apply(Event("Pod", EventType.MODIFIED, obj)))
        problems = service.read(lambda: check_allocations(cache, sim.rows, sim.gpus))
        assert any("above 1000" in p for p in problems)
        assert any("annotation allocates 300 gpu-core in total" in p for p in problems)
    assert result.scheduled_pods > 0
    assert result.allocation_at(100) is not None and result.allocation_at(130) is not None
    assert 0 < result.allocation_at(100) <= 100  # type: ignore[operator]
    assert result.frag[70] is not None and result.frag[90] is not None
    assert set(result.client_seconds) == {"filter", "prioritize", "bind"}


def test_random_policy_never_prioritizes(trace: Trace) -> None:
    result = run_one(trace, builtin_policy("Random"), 7, inflate=0.5)
    assert result.problems == []
    assert result.client_seconds["prioritize"] == 0.0
    assert result.scheduled_pods > 0


def _frag(result: SimResult) -> float:
    values = [result.frag[70], result.frag[90]]
    assert all(v is not None for v in values)
    return sum(v for v in values if v is not None)


def test_fragmentation_aware_fragments_less_than_least_allocated(trace: Trace) -> None:
    fgd = run_one(trace, builtin_policy("FragmentationAware"), 42)
    spread = run_one(trace, builtin_policy("LeastAllocated"), 42)
    assert fgd.problems == [] and spread.problems == []
    assert _frag(fgd) < _frag(spread)


def test_timed_mode_departures_free_the_gpus(trace_slice: tuple[Path, Path]) -> None:
    trace = load_trace(*trace_slice, "timed")
    result = run_one(trace, builtin_policy("MostAllocated"), 1, mode="timed")
    assert result.problems == []
    assert result.arrived_pods == len(trace.pods)
    assert result.scheduled_pods > 0


def _placements(tmp_path: Path, policy: str, tie_break: str) -> list[str]:
    """Nodes of three identical 8-GPU nodes (listed out of name order) that three whole-GPU pods get."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n-{c},64000,262144,8,V100M32\n" for c in "cab"))
    pods = tmp_path / "pods.csv"
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
    pods.write_text(header + "".join(f"p{i},1000,1024,1,1000,,LS\n" for i in range(3)))
    trace = load_trace(nodes, pods, "static")
    chosen = builtin_policy(policy)
    with InProcessService(chosen.config) as service:
        sim = Simulation(service, trace.nodes, chosen, 3, None, tie_break=tie_break)
        sim.load_cluster()
        sim.run(events_for(trace, "static", 3, 0.01))  # no resampling: exactly p0, p1, p2 in shuffled order
        by_name = service.read(lambda: {p.name: p.node_name for p in service.state.cache.pods.values()})
    return [by_name[k] for k in sorted(by_name)]


def test_name_tie_break_takes_the_smallest_node_name_among_the_best(tmp_path: Path) -> None:
    # MostAllocated: every node ties on the empty cluster, then n-a is the fullest: all three there
    assert _placements(tmp_path, "MostAllocated", "name") == ["n-a", "n-a", "n-a"]
    # LeastAllocated: n-a first (tie), then n-b and n-c tie as the emptiest: n-b, then n-c
    assert sorted(_placements(tmp_path, "LeastAllocated", "name")) == ["n-a", "n-b", "n-c"]


def test_order_tie_break_fills_one_node_of_a_seeded_order_first(tmp_path: Path) -> None:
    # the authors' protocol: a fixed node order per run; MostAllocated keeps packing its first node
    placed = _placements(tmp_path, "MostAllocated", "order")
    assert len(set(placed)) == 1
    assert _placements(tmp_path, "MostAllocated", "order") == placed  # same seed, same order
    assert sorted(_placements(tmp_path, "LeastAllocated", "order")) == ["n-a", "n-b", "n-c"]


def test_unknown_tie_break_is_refused(trace: Trace) -> None:
    with pytest.raises(SimInputError, match="--tie-break: must be one of order, name, random, got 'first'"):
        run_one(trace, builtin_policy("MostAllocated"), 1, tie_break="first")


def test_tracked_gpu_usage_follows_departures(trace_slice: tuple[Path, Path]) -> None:
    """Timed mode binds and deletes pods: the incremental usage must equal a full re-read, before
    and after the departures (a stale share of a deleted pod would show as more use)."""
    trace = load_trace(*trace_slice, "timed")
    policy = builtin_policy("MostAllocated")
    events = events_for(trace, "timed", 3, 1.3)
    departures = [i for i, e in enumerate(events) if e.kind is EventKind.DEPART]
    assert departures, "the slice has departures"
    with InProcessService(policy.config) as service:
        sim = Simulation(service, trace.nodes, policy, 3, deviceshare_fragmentation(trace.pods))
        sim.load_cluster()
        cache = service.state.cache
        cut = departures[len(departures) // 2]
        for part in (events[:cut], events[cut:]):
            sim.run(part)
            tracked = sim.gpu_usage()
            full = service.read(lambda: read_gpu_usage(cache, sim.rows))
            assert (tracked.used_milli == full.used_milli).all()
            assert tracked.annotated_pods == full.annotated_pods == sim.bound_gpu_pods
            assert int(tracked.used_milli.sum()) == sim.allocated_milli
