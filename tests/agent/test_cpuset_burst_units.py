"""Unit tests of cpuset enforcement (write order, rules, bad annotations) and CPU burst decisions.

The write-order tests run the real executor on a plain-file cgroup tree under tmp_path (no kernel rules), and
record the order of the writes that changed a file.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups import CgroupLayout
from agent.collectors.node import ProcessorInfo
from agent.executor import CgroupExecutor, CgroupWrite
from agent.metriccache import MetricCache
from agent.qos.context import NODE_CPU, QoSContext
from agent.qos.cpuburst import (
    COOLING,
    IDLE,
    OVERLOAD,
    REMAIN,
    RESET,
    SCALE_DOWN,
    SCALE_UP,
    UNKNOWN,
    BurstConfig,
    BurstLimiter,
    CPUBurst,
    change_by_node,
    node_state,
    pod_burst_config,
    quota_target,
    static_burst_us,
)
from agent.qos.cpuset import (
    CPUSetAllocator,
    CPUSetRule,
    ResourceStatusError,
    RuleError,
    parse_resource_status,
    pod_cpuset,
    rule_from_annotations,
)
from agent.states.nodeslo import validated_spec
from agent.states.pods import PodMeta, pod_meta
from agent.validator import NodeBounds

RS = "scheduling.koordinator.sh/resource-status"


class Recording(CgroupExecutor):
    """The executor, recording ``(dir, value)`` of every write that changed a file, in order."""

    def __init__(self, layout: CgroupLayout, **kw: Any) -> None:
        super().__init__(layout, **kw)
        self.order: list[tuple[str, str]] = []

    def update(self, write: CgroupWrite, *, verify: bool = False) -> bool:
        changed = super().update(write, verify=verify)
        if changed:
            self.order.append((write.rel_dir, write.value))
        return changed


def _tree(tmp_path: Path, files: dict[str, str]) -> CgroupLayout:
    """Plain files ``<tmp>/cpuset/<dir>/cpuset.cpus`` (and cpu quota files) with the given cpus."""
    for rel, cpus in files.items():
        for controller, name, value in (("cpuset", "cpuset.cpus", cpus), ("cpu", "cpu.cfs_quota_us", "100000")):
            d = tmp_path / controller / rel
            d.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(value + "\n")
            if controller == "cpu":
                (d / "cpu.cfs_period_us").write_text("100000\n")
    return CgroupLayout(root=tmp_path, kubepods="kubepods")


POD = "kubepods/podA"
CTR = "kubepods/podA/c1"


def test_leveled_moving_a_cpuset_widens_top_down_then_narrows_bottom_up(tmp_path: Path) -> None:
    """pod and container on cpu 0, wanted on cpu 1: union 0-1 on the pod, then on the container, then cpu 1 on
    the container, then on the pod (upstream LeveledUpdateBatch)."""
    layout = _tree(tmp_path, {"kubepods": "0-3", POD: "0", CTR: "0"})
    ex = Recording(layout, bounds=NodeBounds(4000, frozenset(range(4))))
    ex.update_leveled([[CgroupWrite("cpuset.cpus", POD, "1")], [CgroupWrite("cpuset.cpus", CTR, "1")]])
    assert ex.order == [(POD, "0-1"), (CTR, "0-1"), (CTR, "1"), (POD, "1")]
    assert (tmp_path / "cpuset" / CTR / "cpuset.cpus").read_text() == "1"


def test_leveled_pure_narrowing_writes_children_first_without_widening(tmp_path: Path) -> None:
    layout = _tree(tmp_path, {"kubepods": "0-3", POD: "0-3", CTR: "0-3"})
    ex = Recording(layout, bounds=NodeBounds(4000, frozenset(range(4))))
    ex.update_leveled([[CgroupWrite("cpuset.cpus", POD, "2-3")], [CgroupWrite("cpuset.cpus", CTR, "2-3")]])
    assert ex.order == [(CTR, "2-3"), (POD, "2-3")]


def test_leveled_pure_widening_writes_parents_first(tmp_path: Path) -> None:
    layout = _tree(tmp_path, {"kubepods": "0-3", POD: "1", CTR: "1"})
    ex = Recording(layout, bounds=NodeBounds(4000, frozenset(range(4))))
    ex.update_leveled([[CgroupWrite("cpuset.cpus", POD, "0-3")], [CgroupWrite("cpuset.cpus", CTR, "0-3")]])
    assert ex.order == [(POD, "0-3"), (CTR, "0-3")]  # the second pass finds both in place


def test_leveled_offline_cpus_are_refused_by_the_validator(tmp_path: Path) -> None:
    """cpu 7 is not online: neither the union nor the value reaches the file; the dir keeps its cpus."""
    layout = _tree(tmp_path, {"kubepods": "0-3", POD: "0", CTR: "0"})
    ex = Recording(layout, bounds=NodeBounds(4000, frozenset(range(4))))
    ex.update_leveled([[CgroupWrite("cpuset.cpus", POD, "7")], [CgroupWrite("cpuset.cpus", CTR, "7")]])
    assert ex.order == []
    assert (tmp_path / "cpuset" / POD / "cpuset.cpus").read_text().strip() == "0"


# -- rules -----------------------------------------------------------------------------------------


def _pod(
    name: str,
    qos: str | None,
    kube_qos: str,
    annotations: dict[str, str] | None = None,
    layout: CgroupLayout | None = None,
) -> PodMeta:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    obj = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}]},
        "status": {
            "phase": "Running",
            "qosClass": kube_qos,
            "containerStatuses": [{"name": "c", "containerID": f"containerd://cid-{name}"}],
        },
    }
    return pod_meta(obj, layout or CgroupLayout(root=Path("/nonexistent")))


RULE = CPUSetRule("none", ((0, frozenset({0, 1})), (1, frozenset({4, 5}))), frozenset())


def test_rules_per_qos_class() -> None:
    lsr = _pod("lsr", "LSR", "Guaranteed", {RS: '{"cpuset":"2-3"}'})
    assert pod_cpuset(lsr, RULE) == (frozenset({2, 3}), True)
    assert pod_cpuset(_pod("ls", "LS", "Burstable"), RULE) == (frozenset({0, 1, 4, 5}), False)
    numa = _pod("ls-numa", "LS", "Burstable", {RS: '{"numaNodeResources":[{"node":1,"resources":{"cpu":"2"}}]}'})
    assert pod_cpuset(numa, RULE) == (frozenset({4, 5}), False)
    system_rule = CPUSetRule("none", RULE.share_pools, frozenset({7}))
    assert pod_cpuset(_pod("sys", "SYSTEM", "Burstable"), system_rule) == (frozenset({7}), False)
    # unlabelled pods: the shared pool under the kubelet's none policy, left to the kubelet under static
    assert pod_cpuset(_pod("plain", None, "Burstable"), RULE) == (frozenset({0, 1, 4, 5}), False)
    static = CPUSetRule("static", RULE.share_pools)
    assert pod_cpuset(_pod("plain", None, "Guaranteed"), static) == (None, False)
    assert pod_cpuset(_pod("be", "BE", "BestEffort"), RULE) == (None, False)
    # an LSR pod without a cpuset yet: no rule -> untouched
    assert pod_cpuset(_pod("lsr2", "LSR", "Guaranteed"), None) == (None, False)


def test_rule_from_published_annotations() -> None:
    rule = rule_from_annotations(
        {
            "node.koordinator.sh/cpu-shared-pools": (
                '[{"socket":0,"node":0,"cpuset":"0-1"},{"socket":1,"node":1,"cpuset":"4"}]'
            ),
            "kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"static","reservedCPUs":"0"}',
        }
    )
    assert rule == CPUSetRule("static", ((0, frozenset({0, 1})), (1, frozenset({4}))), frozenset())
    with pytest.raises(RuleError):
        rule_from_annotations({"node.koordinator.sh/cpu-shared-pools": '[{"node":0,"cpuset":"3-1"}]'})
    with pytest.raises(RuleError):
        rule_from_annotations({"node.koordinator.sh/cpu-shared-pools": "{nope"})


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ("not json", "invalid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"cpuset":"3-1"}', "cpuset"),
        ('{"cpuset":5}', "cpuset"),
        ('{"numaNodeResources":{}}', "numaNodeResources"),
        ('{"numaNodeResources":[{"node":-1}]}', "numaNodeResources[0].node"),
        ('{"numaNodeResources":[{"node":0,"resources":{"cpu":"lots"}}]}', "numaNodeResources[0].resources"),
    ],
)
def test_bad_resource_status_is_refused_with_where(raw: str, where: str) -> None:
    with pytest.raises(ResourceStatusError, match=where.replace("[", r"\[").replace("]", r"\]")):
        parse_resource_status(raw)


def test_bad_resource_status_skips_that_pod_logs_once_and_enforces_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    layout = _tree(tmp_path, {"kubepods": "0-3"})
    good = _pod("good", "LSR", "Guaranteed", {RS: '{"cpuset":"2"}'}, layout)
    bad = _pod("bad", "LSR", "Guaranteed", {RS: '{"cpuset":"2-"}'}, layout)
    ls = _pod("ls", "LS", "Burstable", None, layout)
    for p in (good, bad, ls):
        assert p.cgroup_dir is not None
        (tmp_path / "cpuset" / p.cgroup_dir / "cid-x").mkdir(parents=True)
    ctx = _ctx(layout, [good, bad, ls])
    strategy = CPUSetAllocator()
    with caplog.at_level(logging.WARNING, logger="agent.qos.cpuset"):
        plan = strategy.plan(ctx, CPUSetRule("none", ((0, frozenset({0, 1, 3})),)))
        strategy.plan(ctx, CPUSetRule("none", ((0, frozenset({0, 1, 3})),)))
    assert list(plan.skipped) == ["ns/bad"]
    assert [r.getMessage() for r in caplog.records].count(
        f"pod ns/bad: malformed {RS}, its cpuset is not enforced: "
        "cpuset: invalid cpuset '2-': '2-' is not a cpu or a range"
    ) == 1
    assert plan.cpus == {"uid-good": frozenset({2}), "uid-ls": frozenset({0, 1, 3})}
    assert [(w.rel_dir, w.value) for w in plan.levels[0]] == [(good.cgroup_dir, "2"), (ls.cgroup_dir, "0-1,3")]
    assert [(w.rel_dir, w.value) for w in plan.levels[1]] == [
        (f"{good.cgroup_dir}/cid-x", "2"),
        (f"{ls.cgroup_dir}/cid-x", "0-1,3"),
    ]
    assert [w.rel_dir for w in plan.quota_writes] == [good.cgroup_dir]  # the cpuset pod's quota is unset


def test_besteffort_pods_are_left_to_cpu_suppress(tmp_path: Path) -> None:
    layout = _tree(tmp_path, {"kubepods": "0-3"})
    be = _pod("be", "LS", "BestEffort", {RS: '{"cpuset":"1"}'}, layout)
    plan = CPUSetAllocator().plan(_ctx(layout, [be]), RULE)
    assert plan.cpus == {} and plan.levels == [[], []]


# -- burst -----------------------------------------------------------------------------------------


def _ctx(
    layout: CgroupLayout,
    pods: list[PodMeta],
    slo: dict[str, Any] | None = None,
    now: float = 1000.0,
    cache: MetricCache | None = None,
    cpus: int = 4,
) -> QoSContext:
    return QoSContext(
        now=now,
        interval=1.0,
        layout=layout,
        slo=validated_spec(slo),
        pods=pods,
        cache=cache or MetricCache(1.0, 600),
        processors=[ProcessorInfo(i, i, 0, 0) for i in range(cpus)],
        capacity_cpu=cpus * 1000,
        capacity_memory=1 << 34,
    )


def test_static_burst_values() -> None:
    """limit x cpuBurstPercent x 100000 us: 2 cores x 1000 % = 2000000; 0.5 core x 200 % = 100000."""
    assert static_burst_us(2000, BurstConfig(policy="auto", cpu_burst_percent=1000)) == 2_000_000
    assert static_burst_us(500, BurstConfig(policy="cpuBurstOnly", cpu_burst_percent=200)) == 100_000
    assert static_burst_us(2000, BurstConfig(policy="cfsQuotaBurstOnly")) == 0
    assert static_burst_us(2000, BurstConfig(policy="none")) == 0
    assert static_burst_us(0, BurstConfig(policy="auto")) == 0


def test_node_state_from_the_shared_pool() -> None:
    """4 cpus, an LSR pod requesting 1 core (using 0.9) and a BE pod using 1.0: the pool is 3 cpus and
    holds node - 1.9 cores. Threshold 50 %, cooling from 45 %."""
    lsr = _pod("lsr", "LSR", "Guaranteed")
    be = _pod("be", "BE", "BestEffort")
    used = {lsr.uid: 0.9, be.uid: 1.0}
    assert node_state(2.5, 4, [lsr, be], used, 50) == IDLE  # 0.6 / 3 = 20 %
    assert node_state(3.25, 4, [lsr, be], used, 50) == COOLING  # 1.35 / 3 = 45 %
    assert node_state(3.4, 4, [lsr, be], used, 50) == OVERLOAD  # 1.5 / 3 = 50 %
    assert node_state(None, 4, [lsr, be], used, 50) == UNKNOWN


def test_operations_changed_by_the_node_state() -> None:
    assert change_by_node(OVERLOAD, SCALE_UP) == SCALE_DOWN
    assert change_by_node(OVERLOAD, REMAIN) == SCALE_DOWN
    assert change_by_node(OVERLOAD, RESET) == RESET
    assert change_by_node(COOLING, SCALE_UP) == REMAIN
    assert change_by_node(UNKNOWN, SCALE_UP) == REMAIN
    assert change_by_node(IDLE, SCALE_UP) == SCALE_UP


def test_quota_targets_clamped_to_base_and_ceiling() -> None:
    """base 100000 (1 core), ceil 300000 (300 %)."""
    assert quota_target(100_000, 100_000, 300_000, SCALE_UP) == 120_000
    assert quota_target(280_000, 100_000, 300_000, SCALE_UP) == 300_000  # 336000 clamped
    assert quota_target(120_000, 100_000, 300_000, SCALE_DOWN) == 100_000  # 96000 raised to base
    assert quota_target(250_000, 100_000, 300_000, SCALE_DOWN) == 200_000
    assert quota_target(250_000, 100_000, 300_000, RESET) == 100_000
    assert quota_target(150_000, 100_000, 300_000, REMAIN) == 150_000


class _Fixed(random.Random):
    def random(self) -> float:
        return 0.4


def test_burst_limiter_tokens() -> None:
    """period 10 s, 300 %: capacity 2000, starts at int(2000 x 0.2) = 400 tokens."""
    lim = BurstLimiter(10, 300, now=0.0, rng=_Fixed())
    assert (lim.capacity, lim.tokens) == (2000, 400)
    assert lim.allow(3.0, 200) and lim.tokens == 100  # 400 - 100 x 3
    assert not lim.allow(5.0, 200) and lim.tokens == -100  # 100 - 100 x 2
    assert lim.allow(10.0, 50) and lim.tokens == 150  # -100 + 50 x 5 (below 60 %: saved)
    assert lim.allow(12.0, 80) and lim.tokens == 150  # between 60 and 100 %: unchanged
    assert not lim.expired(30.0) and lim.expired(32.5)


def test_pod_annotation_overrides_node_config() -> None:
    node_cfg = BurstConfig(policy="none")
    pod = _pod("ls", "LS", "Burstable", {"koordinator.sh/cpuBurst": '{"policy":"auto","cpuBurstPercent":200}'})
    assert pod_burst_config(pod, node_cfg) == BurstConfig(policy="auto", cpu_burst_percent=200)
    broken = _pod("ls2", "LS", "Burstable", {"koordinator.sh/cpuBurst": '{"cpuBurstPercent":"x"}'})
    assert pod_burst_config(broken, node_cfg) == node_cfg


def _stat(tmp_path: Path, rel: str, periods: int, throttled: int) -> None:
    (tmp_path / "cpu" / rel / "cpu.stat").write_text(f"nr_periods {periods}\nnr_throttled {throttled}\n")


def test_throttled_ls_container_scales_up_pod_first_on_an_idle_node(tmp_path: Path) -> None:
    """LS pod, limit 1 core (base 100000, ceil 300000), policy auto: round 1 only samples cpu.stat; round 2
    sees nr_throttled grow on an idle node -> 120000 on the pod dir, then the container (pod first when
    rising). cfs burst: 1 core x 1000 % = 1000000 on the container and the pod. An overloaded node turns the
    next round into a scale down (120000 x 0.8 = 96000, raised to base 100000), container first."""
    layout = _tree(tmp_path, {"kubepods": "0-3"})
    ls = _pod("ls", "LS", "Burstable", None, layout)
    assert ls.cgroup_dir is not None
    cdir = f"{ls.cgroup_dir}/cid-ls"
    _tree(tmp_path, {ls.cgroup_dir: "0-3", cdir: "0-3"})
    slo = {"spec": {"cpuBurstStrategy": {"policy": "auto"}}}
    cache = MetricCache(1.0, 600)
    for t in range(990, 1001):
        cache.append(NODE_CPU, float(t), 0.5)  # 0.5 of 4 cpus: idle
    strategy = CPUBurst()
    _stat(tmp_path, cdir, 10, 0)
    first = strategy.plan(_ctx(layout, [ls], slo, 1000.0, cache))
    assert first is not None and first.state == IDLE
    assert [(w.resource, w.rel_dir, w.value) for w in first.writes] == [
        ("cpu.cfs_burst_us", cdir, "1000000"),
        ("cpu.cfs_burst_us", ls.cgroup_dir, "1000000"),
    ]
    _stat(tmp_path, cdir, 20, 3)
    second = strategy.plan(_ctx(layout, [ls], slo, 1001.0, cache))
    assert second is not None and second.operations == {"ns/ls/c": SCALE_UP}
    quota = [(w.rel_dir, w.value) for w in second.writes if w.resource == "cpu.cfs_quota_us"]
    assert quota == [(ls.cgroup_dir, "120000"), (cdir, "120000")]
    for rel in (ls.cgroup_dir, cdir):
        (tmp_path / "cpu" / rel / "cpu.cfs_quota_us").write_text("120000")
    cache = MetricCache(1.0, 600)
    for t in range(990, 1003):
        cache.append(NODE_CPU, float(t), 1.9)  # 1.9 of 4 cpus = 47.5 %: within 90 % of the 50 % threshold
    _stat(tmp_path, cdir, 30, 6)
    third = strategy.plan(_ctx(layout, [ls], slo, 1002.0, cache))
    assert third is not None and third.state == COOLING and third.operations == {"ns/ls/c": REMAIN}
    assert [w for w in third.writes if w.resource == "cpu.cfs_quota_us"] == []
    cache = MetricCache(1.0, 600)
    for t in range(990, 1004):
        cache.append(NODE_CPU, float(t), 2.2)  # 55 %: overloaded
    _stat(tmp_path, cdir, 40, 6)
    fourth = strategy.plan(_ctx(layout, [ls], slo, 1003.0, cache))
    assert fourth is not None and fourth.state == OVERLOAD and fourth.operations == {"ns/ls/c": SCALE_DOWN}
    quota = [(w.rel_dir, w.value) for w in fourth.writes if w.resource == "cpu.cfs_quota_us"]
    assert quota == [(cdir, "100000"), (ls.cgroup_dir, "100000")]


def test_no_burst_strategy_no_writes_and_lsr_is_never_burst(tmp_path: Path) -> None:
    layout = _tree(tmp_path, {"kubepods": "0-3"})
    lsr = _pod("lsr", "LSR", "Guaranteed", None, layout)
    ctx = _ctx(layout, [lsr], {"spec": {"cpuBurstStrategy": {"policy": "auto"}}})
    plan = CPUBurst().plan(ctx)
    assert plan is not None and plan.writes == []
    ctx.slo.cpu_burst_strategy = None
    assert CPUBurst().plan(ctx) is None


def test_resource_status_numa_nodes() -> None:
    raw = json.dumps(
        {
            "cpuset": "",
            "numaNodeResources": [
                {"node": 0, "resources": {"memory": "1Gi"}},
                {"node": 1, "resources": {"cpu": "2"}},
                {"node": 2, "resources": {"kubernetes.io/batch-cpu": "500"}},
            ],
        }
    )
    assert parse_resource_status(raw).cpu_numa_nodes == (1, 2)
    assert parse_resource_status(None).cpuset == frozenset()


def test_v2_delegated_tree_writes_cpuset_cpus_in_the_unified_hierarchy(tmp_path: Path) -> None:
    """On cgroup v2 the same ``cpuset.cpus`` file sits in the pod dir of the single hierarchy; an empty file
    (inherits the parent's cpus) is filled with the wanted cpus; ``cpu.max`` takes the unset quota as ``max``."""
    from agent.cgroups import CgroupVersion

    for rel, cpus in (("kubepods", "0-3"), (POD, ""), (CTR, "")):
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
        (tmp_path / rel / "cpuset.cpus").write_text(cpus + "\n")
        (tmp_path / rel / "cpu.max").write_text("100000 100000\n")
    layout = CgroupLayout(root=tmp_path, kubepods="kubepods", version=CgroupVersion.V2)
    ex = Recording(layout, bounds=NodeBounds(4000, frozenset(range(4))))
    ex.update_leveled([[CgroupWrite("cpuset.cpus", POD, "2-3")], [CgroupWrite("cpuset.cpus", CTR, "2-3")]])
    ex.update_batch([CgroupWrite("cpu.cfs_quota_us", POD, "-1"), CgroupWrite("cpu.cfs_quota_us", CTR, "-1")])
    assert (tmp_path / CTR / "cpuset.cpus").read_text() == "2-3"
    assert (tmp_path / POD / "cpuset.cpus").read_text() == "2-3"
    assert (tmp_path / CTR / "cpu.max").read_text() == "max"
    assert ex.order[:2] == [(POD, "2-3"), (CTR, "2-3")]  # widened top-down (from the empty set), nothing to narrow
