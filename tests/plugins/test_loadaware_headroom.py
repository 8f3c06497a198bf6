"""LoadAware's cut-offs (app/plugins/loadaware/headroom.py) against upstream's float test.

Upstream refuses a node when ``int64(math.Round(float64(base+estimate) / float64(total) * 100)) >
threshold``. The plugin instead compares the pod's estimate with a per-node cut-off worked out when the
row is written; these tests check, over wide random inputs and at the rounding boundaries, that both
refuse exactly the same (base, allocatable, threshold, estimate).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cache.podinfo import parse_pod
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.plugins.loadaware.headroom import (
    UNLIMITED,
    largest_fitting_estimate,
    last_fitting_total,
    usage_percent,
)
from app.plugins.loadaware.plugin import _inverted
from tests.plugins.test_loadaware import (
    ALLOC_96,
    ANN_SCALING_FACTORS,
    NODE,
    Env,
    assert_status,
    metric_obj,
    node_obj,
    pod_obj,
)

GI = 1024**3


def upstream_refuses(base: int, allocatable: int, threshold: int, estimate: int) -> bool:
    """The test as the old array code ran it: float64 division, Go's half-away-from-zero rounding."""
    if threshold == 0 or allocatable == 0:
        return False
    x = np.float64(base + estimate) / np.float64(allocatable) * 100
    whole = np.trunc(x)
    frac = x - whole
    rounded = int(whole + (1.0 if frac >= 0.5 else -1.0 if frac <= -0.5 else 0.0))
    return rounded > threshold


def test_usage_percent_rounds_half_away_from_zero() -> None:
    assert usage_percent(65, 100) == 65
    assert usage_percent(655, 1000) == 66  # 65.5 -> 66, not banker's 66/65
    assert usage_percent(645, 1000) == 65  # 64.5 -> 65
    assert usage_percent(125, 1000) == 13  # 12.5 -> 13 (half to even would give 12)
    assert usage_percent(0, 7) == 0


def test_unchecked_resources_are_unlimited() -> None:
    assert largest_fitting_estimate(500, 1000, 0) == UNLIMITED  # threshold 0: not checked
    assert largest_fitting_estimate(500, 0, 65) == UNLIMITED  # no allocatable: never refused


def test_cut_off_at_the_rounding_boundary() -> None:
    # 16 cores, threshold 65 %: 65.4999.. % rounds to 65 and passes, 65.5 % rounds to 66 and fails.
    cut = largest_fitting_estimate(10_000, 16_000, 65)
    assert usage_percent(10_000 + cut, 16_000) == 65
    assert usage_percent(10_000 + cut + 1, 16_000) == 66
    assert cut == 10_479 - 10_000  # 10479 / 16000 = 65.49375 %, 10480 / 16000 = 65.5 %


def test_base_already_over_the_threshold_gives_a_negative_cut_off() -> None:
    cut = largest_fitting_estimate(15_000, 16_000, 65)
    assert cut < 0  # even a zero estimate fails
    assert upstream_refuses(15_000, 16_000, 65, 0)


@settings(max_examples=1500, deadline=None)
@given(
    base=st.integers(min_value=0, max_value=2 * 1024 * GI),
    allocatable=st.integers(min_value=1, max_value=1024 * GI),
    threshold=st.integers(min_value=1, max_value=200),
    estimate=st.integers(min_value=0, max_value=1024 * GI),
)
def test_cut_off_refuses_exactly_what_upstream_refuses(
    base: int, allocatable: int, threshold: int, estimate: int
) -> None:
    cut = largest_fitting_estimate(base, allocatable, threshold)
    assert (estimate > cut) == upstream_refuses(base, allocatable, threshold, estimate)


@settings(max_examples=500, deadline=None)
@given(
    allocatable=st.integers(min_value=1, max_value=2**62),
    threshold=st.one_of(st.integers(min_value=-200, max_value=200), st.integers(min_value=-(2**62), max_value=2**62)),
    base=st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_the_cut_off_is_the_last_fitting_total_less_the_base(allocatable: int, threshold: int, base: int) -> None:
    """The last fitting total depends on allocatable and threshold only (kept per pair, issue 29): it fits and
    one more does not, for any threshold (negative and huge ones end too), and the cut-off of any base is it
    less the base, clamped to int64."""
    total = last_fitting_total(allocatable, threshold)
    assert usage_percent(total, allocatable) <= threshold < usage_percent(total + 1, allocatable)
    if threshold != 0:
        assert largest_fitting_estimate(base, allocatable, threshold) == max(-(2**63), min(UNLIMITED, total - base))


@settings(max_examples=1000, deadline=None)
@given(
    allocatable=st.integers(min_value=1, max_value=512_000),
    threshold=st.integers(min_value=1, max_value=100),
    base=st.integers(min_value=0, max_value=512_000),
    offset=st.integers(min_value=-3, max_value=3),
)
def test_cut_off_matches_near_the_boundary(allocatable: int, threshold: int, base: int, offset: int) -> None:
    """Milli-core sized inputs, with the estimate a few units either side of the cut-off."""
    cut = largest_fitting_estimate(base, allocatable, threshold)
    estimate = max(0, cut + offset)
    assert (estimate > cut) == upstream_refuses(base, allocatable, threshold, estimate)
    if cut >= 0:
        assert not upstream_refuses(base, allocatable, threshold, cut)
        assert upstream_refuses(base, allocatable, threshold, cut + 1)


def test_filter_refuses_over_the_cut_off_and_a_row_never_written_checks_nothing() -> None:
    """Through the plugin: a node at 70 % cpu (default threshold 65 %) refuses a pod; a table row the plugin
    never wrote (zeros, as every new or freed row starts) passes it, as it did before cut-offs were stored."""
    env = Env({})
    env.apply("Node", node_obj(NODE, ALLOC_96))
    env.apply("NodeMetric", metric_obj(NODE, usage={"cpu": "67200m", "memory": "10Gi"}))  # 70 % of 96 cores
    pod = pod_obj("p", req={"cpu": "1", "memory": "1Gi"})
    assert_status(env.filter(pod), "node(s) cpu usage exceed threshold")
    ghost = env.cache.table.add("never-written")  # a row with no Node behind it: the plugin never writes it
    failures = env.plugin.filter_nodes(
        CycleState(env.now), parse_pod(pod), NodeBatch(np.array([ghost], dtype=np.int64), ["never-written"])
    )
    assert failures == {}


@given(
    st.lists(
        st.one_of(st.floats(allow_nan=False, width=64), st.just(-np.inf)),
        min_size=1,
        max_size=20,
    ),
    st.floats(min_value=0, max_value=4e9, allow_nan=False),
    st.integers(min_value=0, max_value=10**6),
)
def test_expired_is_exactly_not_fresh(updates: list[float], now: float, expiration: int) -> None:
    """Filter's one-comparison expiry test negates Score's freshness test for every stored updateTime,
    -inf (a NodeMetric without updateTime) included; NaN is never stored."""
    from types import SimpleNamespace

    from app.plugins.loadaware.plugin import LoadAwareScheduling

    plugin = SimpleNamespace(args=SimpleNamespace(node_metric_expiration_seconds=expiration))
    update = np.array(updates, dtype=np.float64)
    fresh = LoadAwareScheduling._fresh(plugin, update, now)  # type: ignore[arg-type]
    expired = LoadAwareScheduling._expired(plugin, update, now)  # type: ignore[arg-type]
    assert np.array_equal(expired, ~fresh)
    assert bool(expired[update == -np.inf].all())


def test_a_negative_estimate_on_a_node_over_the_threshold_passes_as_upstream() -> None:
    """A pod annotated with a negative scaling factor (accepted, as upstream accepts it) has a negative
    estimate: on a node already over the threshold it passes where its estimate brings the total back
    under (upstream's float test), and fails where it does not. A negative cut-off is not rounded up to
    -1, nor the estimate up to 0."""
    env = Env({"allowCustomizeEstimation": True})
    env.apply("Node", node_obj(NODE, ALLOC_96))
    env.apply("NodeMetric", metric_obj(NODE, usage={"cpu": "67200m", "memory": "10Gi"}))  # 70 % of 96 cores
    pod = pod_obj("p", req={"cpu": "1", "memory": "1Gi"})
    assert_status(env.filter(pod), "node(s) cpu usage exceed threshold")
    for cores, fits in (("10", True), ("2", False)):  # -10 cores: 59.6 %; -2 cores: 67.9 % (threshold 65 %)
        shrinking = pod_obj(
            f"shrinking-{cores}",
            req={"cpu": cores, "memory": "1Gi"},
            annotations={ANN_SCALING_FACTORS: '{"cpu": -100}'},
        )
        estimate = int(env.plugin.pod_estimate(CycleState(env.now), parse_pod(shrinking))[0])
        assert estimate == -int(cores) * 1000
        base = 67_200 + 0  # no assigned pods: the NodeMetric's usage is the base
        assert upstream_refuses(base, 96_000, 65, estimate) is not fits
        status = env.filter(shrinking)
        if fits:
            assert status is None
        else:
            assert_status(status, "node(s) cpu usage exceed threshold")


@given(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.lists(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1), min_size=1, max_size=8),
)
def test_the_stored_comparison_is_exact_over_int64(cut_off: int, estimates: list[int]) -> None:
    """Filter compares the inverted cut-off (uint64 column) with the inverted estimate: the same answer as
    ``estimate > cut_off`` for every int64 pair, negative ones included, with no float promotion."""
    stored = np.array([_inverted(cut_off)] * len(estimates), dtype=np.uint64)
    bound = np.array([_inverted(e) for e in estimates], dtype=np.uint64)
    exceed = stored > bound
    assert exceed.dtype == np.bool_
    assert exceed.tolist() == [e > cut_off for e in estimates]
