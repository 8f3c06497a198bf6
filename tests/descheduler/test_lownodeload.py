"""LowNodeLoad scenarios after upstream's ``low_node_load_test.go`` / ``utilization_util_test.go``."""

from app.descheduler.anomaly import BasicDetector, State
from app.descheduler.classify import NodeClass
from app.descheduler.config import AnomalyCondition, DefaultEvictorArgs, parse_low_node_load_args
from app.descheduler.limits import EvictionLimits
from app.descheduler.lownodeload import LowNodeLoad
from app.descheduler.podorder import sort_pods
from app.descheduler.usage import node_usage

from .builders import metric, node, pod, view

ARGS = {
    "highThresholds": {"cpu": 70, "memory": 90},
    "lowThresholds": {"cpu": 30, "memory": 90},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}


def _plugin(extra=None, evictor=None):
    return LowNodeLoad(parse_low_node_load_args({**ARGS, **(extra or {})}), evictor or DefaultEvictorArgs())


def _cluster(hot_pods=None, **kw):
    hot_pods = hot_pods or {f"default/p{i}": {"cpu": "2"} for i in range(4)}
    pods = [pod(k.split("/")[1], "hot") for k in hot_pods]
    nodes = [node("hot"), node("cold"), node("mid")]
    metrics = [
        metric("hot", {"cpu": "1"}, hot_pods),  # 1 + 8 = 9 of 10 cores
        metric("cold", {"cpu": "1"}, {}),  # 10%
        metric("mid", {"cpu": "5"}, {}),  # 50%
    ]
    return view(nodes, pods, metrics, **kw)


def _classes(result):
    return {n.name: n.node_class for n in result.nodes}


def test_usage_is_system_plus_pods_not_node_usage_and_stale_metrics_are_skipped():
    v = _cluster()
    u = node_usage(v, v.nodes["hot"], ["cpu", "memory"], 180)
    assert u.usage == {"cpu": 9000, "memory": 0, "pods": 4}
    v.node_metrics["cold"] = metric("cold", {"cpu": "1"}, {}, age=181)
    assert node_usage(v, v.nodes["cold"], ["cpu"], 180) is None
    assert "cold" not in _classes(_plugin().balance(v))


def test_raw_allocatable_annotation_is_the_denominator():
    n = node("hot")
    n["metadata"]["annotations"] = {"node.koordinator.sh/raw-allocatable": '{"cpu": "20", "memory": "100Gi"}'}
    v = view([n], [], [metric("hot", {"cpu": "9"}, {})])
    assert v.nodes["hot"].allocatable["cpu"] == 20000


def test_classification_and_eviction_until_below_high():
    result = _plugin().balance(_cluster())
    # without prod thresholds prod ones are 100%: every schedulable node is under them (upstream)
    assert _classes(result) == {"hot": NodeClass.HIGH, "cold": NodeClass.BOTH_LOW, "mid": NodeClass.PROD_LOW}
    assert [e.node for e in result.evictions] == ["hot"] * len(result.evictions)
    assert {e.target for e in result.evictions} == {"cold"}
    assert result.evictions[0].reason == "node is overutilized, node cpu usage(90.00%)>threshold(70.00%)"
    assert len(result.evictions) == 1  # 9 - 2 = 7, no longer above 70%


def test_unschedulable_node_is_not_low():
    v = _cluster()
    v.nodes["cold"].unschedulable = True
    result = _plugin().balance(v)
    assert _classes(result)["cold"] == NodeClass.NORMAL
    assert result.evictions == []  # the only "low" node left is mid (prodLow): no node-balancing target


def test_number_of_nodes_stops_the_round():
    result = _plugin({"numberOfNodes": 2}).balance(_cluster())
    assert result.evictions == []
    assert "numberOfNodes" in result.messages[0]


def test_deviation_thresholds():
    # average cpu = (90 + 10 + 50) / 3 = 50%; low = 50-10 = 40%, high = 50+10 = 60%
    args = {
        "useDeviationThresholds": True,
        "highThresholds": {"cpu": 10},
        "lowThresholds": {"cpu": 10},
        "anomalyCondition": {"consecutiveAbnormalities": 1},
    }
    plugin = LowNodeLoad(parse_low_node_load_args(args))
    result = plugin.balance(_cluster())
    hot = next(n for n in result.nodes if n.name == "hot")
    assert hot.high["cpu"] == 6000 and hot.low["cpu"] == 4000
    assert hot.high["memory"] == hot.low["memory"] == 100 * 1024**3  # 0 = capacity
    assert _classes(result) == {"hot": NodeClass.HIGH, "cold": NodeClass.BOTH_LOW, "mid": NodeClass.PROD_LOW}
    assert len(result.evictions) == 2  # 9 -> 7 -> 5 (<= 6)


def test_prod_thresholds_classify_prod_high_and_both_low():
    prod = {"labels": {"koordinator.sh/priority-class": "koord-prod"}, "priority": 9500}
    pods = [pod("a", "n1", **prod), pod("c", "n1", **prod), pod("b", "n2")]
    n1 = {"default/a": {"cpu": "2"}, "default/c": {"cpu": "1500m"}}
    v = view(
        [node("n1"), node("n2")],
        pods,
        [metric("n1", {"cpu": "0"}, n1), metric("n2", {"cpu": "0"}, {"default/b": {"cpu": "1"}})],
    )
    plugin = LowNodeLoad(
        parse_low_node_load_args(
            {
                "highThresholds": {"cpu": 70},
                "lowThresholds": {"cpu": 30},
                "prodHighThresholds": {"cpu": 25},
                "prodLowThresholds": {"cpu": 5},
                "anomalyCondition": {"consecutiveAbnormalities": 1},
            }
        )
    )
    result = plugin.balance(v)
    assert _classes(result) == {"n1": NodeClass.PROD_HIGH, "n2": NodeClass.BOTH_LOW}
    # c would score first (closest to the 1-core excess) but no longer fits n2 once a's 2 cores are added there
    assert [(e.name, e.target, e.prod) for e in result.evictions] == [("a", "n2", True)]
    assert {s.name: s.reason for s in result.skipped}["c"].startswith("pod fits no target")


def test_anomaly_detector_needs_more_than_consecutive_abnormalities_rounds():
    plugin = _plugin({"anomalyCondition": {"consecutiveAbnormalities": 5}})
    counts = [len(plugin.balance(_cluster()).evictions) for _ in range(6)]
    assert counts == [0, 0, 0, 0, 0, 1]


def test_basic_detector_reset_timeout_and_recovery():
    cond = AnomalyCondition(timeout=60, consecutive_abnormalities=2, consecutive_normalities=1)
    d = BasicDetector(cond)
    assert [d.mark(False, 0) for _ in range(3)] == [State.OK, State.OK, State.ANOMALY]
    assert d.current(59) == State.ANOMALY and d.current(61) == State.OK
    d = BasicDetector(cond)
    d.mark(False, 0)
    d.reset(0)  # no-op on OK: the partial count survives
    assert d.abnormalities == 1
    d.mark(False, 0)
    assert d.mark(False, 0) == State.ANOMALY
    d.mark(False, 1)  # extra abnormal marks do not extend the timeout
    assert d.expiration == 60
    d.mark(True, 2)
    assert d.mark(True, 3) == State.OK  # normalities 2 > 1


def test_nodefit_adds_usage_to_target_and_refuses_past_high():
    # cold has room for 6 cores under 70% (1 used): pods of 4 cores each, only one fits
    hot = {f"default/p{i}": {"cpu": "4"} for i in range(2)}
    v = view(
        [node("hot", cpu="10"), node("cold")],
        [pod("p0", "hot"), pod("p1", "hot")],
        [metric("hot", {"cpu": "1"}, hot), metric("cold", {"cpu": "1"}, {})],
    )
    result = _plugin().balance(v)
    assert [e.name for e in result.evictions] == ["p0"] or [e.name for e in result.evictions] == ["p1"]
    reasons = {s.name: s.reason for s in result.skipped}
    assert "fits no target node" in next(iter(reasons.values()))


def test_evictor_filter_and_pdb():
    hot = {f"default/{n}": {"cpu": "2"} for n in ("ds", "mirror", "bare", "local", "crit", "pdb", "ok")}
    ds_owner = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d", "controller": True}]
    pods = [
        pod("ds", "hot", owners=ds_owner),
        pod("mirror", "hot", annotations={"kubernetes.io/config.mirror": "x"}),
        pod("bare", "hot", owners=None),
        pod("local", "hot", volumes=[{"name": "v", "emptyDir": {}}]),
        pod("crit", "hot", priority=2000001000),
        pod("pdb", "hot", labels={"app": "guarded"}),
        pod("ok", "hot"),
    ]
    pdb = {
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}},
        "status": {"disruptionsAllowed": 0},
    }
    nodes = [node("hot", cpu="20"), node("cold", cpu="20")]
    v = view(nodes, pods, [metric("hot", {"cpu": "1"}, hot), metric("cold", {"cpu": "1"}, {})], pdbs=[pdb])
    result = _plugin().balance(v)
    assert [e.name for e in result.evictions] == ["ok"]
    reasons = {s.name: s.reason for s in result.skipped}
    assert reasons["ds"] == "pod is a DaemonSet pod"
    assert reasons["mirror"] == "pod is a mirror pod"
    assert reasons["bare"] == "pod does not have any ownerRefs"
    assert reasons["local"].startswith("pod has local storage")
    assert reasons["crit"] == "pod is system critical"
    assert reasons["pdb"] == "PodDisruptionBudget guard allows no disruption"


def test_limits_per_node_and_total():
    hot = {f"default/p{i}": {"cpu": "1"} for i in range(6)}
    v = view(
        [node("hot"), node("cold", cpu="100")],
        [pod(f"p{i}", "hot") for i in range(6)],
        [metric("hot", {"cpu": "3"}, hot), metric("cold", {"cpu": "1"}, {})],
    )
    result = _plugin().balance(v, EvictionLimits(per_node=1))
    assert len(result.evictions) == 1
    assert any("per node" in s.reason for s in result.skipped)


def test_pod_order_priority_class_qos_cost_usage_and_age():
    v = view(
        [node("n")],
        [
            pod("prod", "n", labels={"koordinator.sh/priority-class": "koord-prod"}, priority=9000),
            pod("batch", "n", labels={"koordinator.sh/priority-class": "koord-batch"}, priority=5000),
            pod("costly", "n", annotations={"controller.kubernetes.io/pod-deletion-cost": "100"}),
            pod("old", "n", created="2025-01-01T00:00:00Z"),
            pod("new", "n", created="2026-06-01T00:00:00Z"),
            pod("big", "n", created="2025-01-01T00:00:00Z"),
        ],
        [],
    )
    pods = v.pods_by_node["n"]
    metrics = {f"default/{p.info.name}": {"cpu": 500} for p in pods}
    metrics["default/big"] = {"cpu": 2000}
    order = [p.info.name for p in sort_pods(pods, metrics, {"cpu": 2000}, {"cpu": 1})]
    # unlabelled BestEffort pods default to koord-batch with priority 0: before "batch" (5000), "prod" last;
    # among them deletion cost, then usage nearest the excess, then newest first
    assert order == ["big", "new", "old", "costly", "batch", "prod"]


def test_pods_with_an_unfinished_migration_job_are_not_chosen_again():
    v = _cluster()
    v.migrating = {f"default/p{i}": f"job-{i}" for i in range(4)}
    result = _plugin().balance(v)
    assert result.evictions == []
    assert {s.reason for s in result.skipped} == {
        f"pod is already being migrated by PodMigrationJob job-{i}" for i in range(4)
    }


def test_limits_per_namespace_and_total_across_nodes():
    hot = {f"ns{i % 2}/p{i}": {"cpu": "1"} for i in range(6)}
    hot2 = {f"ns0/q{i}": {"cpu": "1"} for i in range(6)}
    pods = [pod(f"p{i}", "hot", ns=f"ns{i % 2}") for i in range(6)] + [pod(f"q{i}", "hot2", ns="ns0") for i in range(6)]
    nodes = [node("hot"), node("hot2"), node("cold", cpu="100")]
    metrics = [metric("hot", {"cpu": "3"}, hot), metric("hot2", {"cpu": "3"}, hot2), metric("cold", {"cpu": "1"}, {})]
    result = _plugin().balance(view(nodes, pods, metrics), EvictionLimits(per_namespace=2))
    by_ns: dict[str, int] = {}
    for e in result.evictions:
        by_ns[e.namespace] = by_ns.get(e.namespace, 0) + 1
    # each hot node needs 2 evictions (9 -> 7 cores); ns0 runs out on the second node
    assert by_ns["ns0"] == 2 and len(result.evictions) < 4
    assert any("per namespace" in s.reason for s in result.skipped)
    result = _plugin().balance(view(nodes, pods, metrics), EvictionLimits(total=3))
    assert len(result.evictions) == 3
    assert any("in total" in s.reason for s in result.skipped)


def test_node_pools_use_their_own_thresholds_and_sources_are_not_seen_twice():
    gpu = {"matchLabels": {"pool": "gpu"}}
    all_nodes = {"matchLabels": {}}
    args = {
        "highThresholds": {"cpu": 95},
        "lowThresholds": {"cpu": 30},
        "anomalyCondition": {"consecutiveAbnormalities": 1},
        "nodePools": [
            {"name": "gpu", "nodeSelector": gpu, "highThresholds": {"cpu": 60}},
            {"name": "all", "nodeSelector": all_nodes, "highThresholds": {"cpu": 50}},
        ],
    }
    nodes = [node("g-hot"), node("g-cold"), node("c-hot"), node("c-cold")]
    for n in nodes[:2]:
        n["metadata"]["labels"]["pool"] = "gpu"
    hot = {f"default/g{i}": {"cpu": "2"} for i in range(4)}
    chot = {f"default/c{i}": {"cpu": "1"} for i in range(6)}
    pods = [pod(f"g{i}", "g-hot") for i in range(4)] + [pod(f"c{i}", "c-hot") for i in range(6)]
    metrics = [
        metric("g-hot", {"cpu": "0"}, hot),
        metric("g-cold", {"cpu": "0"}, {}),
        metric("c-hot", {"cpu": "0"}, chot),
        metric("c-cold", {"cpu": "0"}, {}),
    ]
    result = LowNodeLoad(parse_low_node_load_args(args)).balance(view(nodes, pods, metrics))
    by_pool = {}
    for n in result.nodes:
        by_pool.setdefault(n.pool, {})[n.name] = n.node_class
    # the default pool (95 %) sees no source; gpu (60 %): g-hot at 80 %; "all" (50 %) excludes g-hot, a processed source
    assert by_pool["__default_node_pool__"]["g-hot"] == NodeClass.PROD_LOW  # between low and high
    assert by_pool["gpu"] == {"g-hot": NodeClass.HIGH, "g-cold": NodeClass.BOTH_LOW}
    assert "g-hot" not in by_pool["all"] and by_pool["all"]["c-hot"] == NodeClass.HIGH
    assert {e.node for e in result.evictions} == {"g-hot", "c-hot"}
    assert all(e.target in ("g-cold",) for e in result.evictions if e.node == "g-hot")


def test_sources_in_weighted_usage_order():
    nodes = [node("warm"), node("hotter"), node("cold", cpu="100")]
    pods = [pod("w", "warm"), pod("h", "hotter")]
    metrics = [
        metric("warm", {"cpu": "6"}, {"default/w": {"cpu": "2"}}),
        metric("hotter", {"cpu": "7"}, {"default/h": {"cpu": "2"}}),
        metric("cold", {"cpu": "1"}, {}),
    ]
    result = _plugin().balance(view(nodes, pods, metrics), EvictionLimits(total=1))
    assert [e.node for e in result.evictions] == ["hotter"]


def _one_core_pods(prefix, node_name, count):
    pods = [pod(f"{prefix}{i}", node_name) for i in range(count)]
    return pods, {f"default/{prefix}{i}": {"cpu": "1"} for i in range(count)}


DEVIATION = {
    "useDeviationThresholds": True,
    "lowThresholds": {"cpu": 10},
    "highThresholds": {"cpu": 10},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
    "nodeFit": False,
}


def test_deviation_each_source_stops_back_within_mean_plus_high():
    """Upstream's stop rule (``continueEvictionCond`` over ``evictPods``, ``utilization_util.go``), worked
    by hand: 10-core nodes at 95 %, 60 %, 10 %, 15 % cpu; mean 45 %, so high = 55 % (5500m) and low =
    35 % (3500m). Targets cold1 and cold2 can take (5500 - 1000) + (5500 - 1500) = 8500m. hot (9500m)
    gives up 1-core pods until it is no longer above 5500m: 4 (9500 -> 5500); warm (6000m): 1
    (-> 5000m). Five in all, 3500m of the targets' room left unused."""
    hot, hot_metrics = _one_core_pods("h", "hot", 9)
    warm, warm_metrics = _one_core_pods("w", "warm", 6)
    v = view(
        [node("hot"), node("warm"), node("cold1"), node("cold2")],
        hot + warm,
        [
            metric("hot", {"cpu": "500m"}, hot_metrics),
            metric("warm", {}, warm_metrics),
            metric("cold1", {"cpu": "1"}, {}),
            metric("cold2", {"cpu": "1500m"}, {}),
        ],
    )
    result = LowNodeLoad(parse_low_node_load_args(DEVIATION)).balance(v)
    reports = {r.name: r for r in result.nodes}
    assert {n: (r.low["cpu"], r.high["cpu"]) for n, r in reports.items()} == dict.fromkeys(
        ("hot", "warm", "cold1", "cold2"), (3500, 5500)
    )
    assert _classes(result) == {
        "hot": NodeClass.HIGH,
        "warm": NodeClass.HIGH,
        "cold1": NodeClass.BOTH_LOW,
        "cold2": NodeClass.BOTH_LOW,
    }
    evicted = [(e.node, e.name) for e in result.evictions]
    assert [n for n, _ in evicted] == ["hot"] * 4 + ["warm"]
    assert {s.name: s.reason for s in result.skipped}["h4"] == "source node no longer needs evictions"


def test_deviation_targets_room_is_up_to_mean_plus_high():
    """When the targets' room is the limit: hot has 40 cores at 95 %, t and m 10 cores at 20 % and 65 %;
    mean (95 + 20 + 65) / 3 = 60 %, high 70 %, low 50 %. Only t (2000m) is a target, and upstream's
    ``targetAvailableUsage`` gives it room up to ITS high threshold (7000m): 5000m, so hot gives up 5
    1-core pods and stays above its own 28000m — not 3 (room up to t's low threshold, 5000m), not 10
    (until hot is back at 28000m)."""
    hot, hot_metrics = _one_core_pods("h", "hot", 38)
    v = view(
        [node("hot", cpu="40"), node("t"), node("m")],
        hot,
        [metric("hot", {}, hot_metrics), metric("t", {"cpu": "2"}, {}), metric("m", {"cpu": "6500m"}, {})],
    )
    result = LowNodeLoad(parse_low_node_load_args(DEVIATION)).balance(v)
    reports = {r.name: r for r in result.nodes}
    assert (reports["hot"].low["cpu"], reports["hot"].high["cpu"]) == (20000, 28000)
    assert (reports["t"].low["cpu"], reports["t"].high["cpu"]) == (5000, 7000)
    assert _classes(result) == {"hot": NodeClass.HIGH, "t": NodeClass.BOTH_LOW, "m": NodeClass.PROD_LOW}
    assert len(result.evictions) == 5


def test_deviation_low_threshold_without_its_high_one_is_the_mean():
    """A low threshold configured without its high one (upstream accepts it): Go reads the missing high as
    0, so in deviation mode the high threshold is the mean itself. Mean cpu (90 + 10 + 50) / 3 = 50 %:
    low 40 %, high 50 %; hot gives up two 2-core pods (9000m -> 5000m). It used to end the round with a
    KeyError."""
    args = {**DEVIATION, "lowThresholds": {"cpu": 10}}
    del args["highThresholds"]
    result = LowNodeLoad(parse_low_node_load_args(args)).balance(_cluster())
    hot = next(n for n in result.nodes if n.name == "hot")
    assert (hot.low["cpu"], hot.high["cpu"]) == (4000, 5000)
    assert _classes(result) == {"hot": NodeClass.HIGH, "cold": NodeClass.BOTH_LOW, "mid": NodeClass.PROD_LOW}
    assert len(result.evictions) == 2
