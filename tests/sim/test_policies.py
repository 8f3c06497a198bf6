"""Policy configurations the sim runs: upstream-valid DeviceShare args, and FGD's target workload."""

from __future__ import annotations

import pytest

from app.cache.snapshot import ClusterCache
from app.framework.handle import Handle
from app.plugins.deviceshare.plugin import new_device_share
from app.sim.errors import SimInputError
from app.sim.policies import builtin_policy, trace_workload, with_trace_workload
from app.sim.trace import TracePod


def _pod(name: str, cpu: int, gpus: int, milli: int, models: tuple[str, ...] | None = None) -> TracePod:
    return TracePod(name, cpu, 1024, gpus, milli, models, "LS", 0, None, 2)


def test_strategies_weigh_the_gpu_share_so_nodes_do_not_all_score_zero() -> None:
    for name in ("MostAllocated", "LeastAllocated", "FragmentationAware"):
        spec = builtin_policy(name).config.plugins[-1]
        assert spec.name == "DeviceShare"
        assert spec.args["scoringStrategy"]["resources"] == [{"name": "koordinator.sh/gpu-memory-ratio", "weight": 1}]
        plugin = new_device_share(spec.args, Handle(ClusterCache()))  # upstream-valid args
        assert plugin.args.weights == {"koordinator.sh/gpu-memory-ratio": 1}


def test_trace_workload_counts_shapes() -> None:
    pods = [_pod("a", 4000, 1, 500), _pod("b", 4000, 1, 500), _pod("c", 8000, 2, 1000, ("V100M16", "V100M32"))]
    assert trace_workload(pods, popularity_percent=100) == [
        {"cpu": "4000m", "memory": "0Mi", "gpuMilli": 500, "weight": 2},
        {"cpu": "8000m", "memory": "0Mi", "gpuMilli": 2000, "weight": 1, "gpuModel": ["V100M16", "V100M32"]},
    ]


def test_trace_workload_keeps_the_popular_shapes_as_the_reference_typical_pods() -> None:
    # 20 pods: shapes by count 10, 6, 3, 1; the first three cover 95 %, the last one is dropped
    pods = [_pod(f"a{i}", 4000, 1, 500) for i in range(10)]
    pods += [_pod(f"b{i}", 2000, 0, 0) for i in range(6)]
    pods += [_pod(f"c{i}", 0, 1, 1000) for i in range(3)]  # no cpu request counts as kube's 100m
    pods += [_pod("d", 8000, 8, 1000)]
    assert trace_workload(pods, popularity_percent=95) == [
        {"cpu": "4000m", "memory": "0Mi", "gpuMilli": 500, "weight": 10},
        {"cpu": "2000m", "memory": "0Mi", "gpuMilli": 0, "weight": 6},
        {"cpu": "100m", "memory": "0Mi", "gpuMilli": 1000, "weight": 3},
    ]
    assert trace_workload(pods) == trace_workload(pods, popularity_percent=95)  # the reference's default
    assert len(trace_workload(pods, popularity_percent=100)) == 4  # every shape


@pytest.mark.parametrize("percent", [0, -5, 100.5])
def test_popularity_outside_0_100_is_refused_with_the_option_named(percent: float) -> None:
    with pytest.raises(SimInputError, match=r"--pod-popularity-threshold: must be in \(0, 100\]"):
        trace_workload([_pod("a", 4000, 1, 500)], popularity_percent=percent)


def test_only_fragmentation_aware_without_a_workload_gets_the_trace_workload() -> None:
    pods = [_pod("a", 4000, 1, 500)]
    fgd = with_trace_workload(builtin_policy("FragmentationAware"), pods)
    args = fgd.config.plugins[-1].args
    assert args["fragmentationAware"]["workload"] == trace_workload(pods)
    plugin = new_device_share(args, Handle(ClusterCache()))
    assert plugin.args.workload is not None and len(plugin.args.workload) == 1
    most = builtin_policy("MostAllocated")
    assert with_trace_workload(most, pods) is most
    assert with_trace_workload(fgd, [_pod("z", 1, 0, 0)]) is fgd  # a given workload is kept


def test_random_does_not_prioritize_and_packs_gpus_inside_the_node() -> None:
    # the authors' Random baseline: a random feasible node, then the best-fit GPU there
    policy = builtin_policy("random")
    assert policy.name == "Random" and policy.prioritize is False
    spec = policy.config.plugins[-1]
    plugin = new_device_share(spec.args, Handle(ClusterCache()))
    assert plugin.args.strategy == "MostAllocated"
    assert builtin_policy("MostAllocated").prioritize is True
