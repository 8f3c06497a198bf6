"""Table tests of the batch formula (upstream plugins/batchresource/plugin_test.go shapes) and the config parsing."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.koordext import PriorityClass, QoSClass
from app.manager.batch import (
    DEGRADE_MESSAGE,
    MetricInput,
    NodeInput,
    PodInput,
    calculate_batch,
    is_resource_diff,
)
from app.manager.colocation import (
    ColocationConfigError,
    ColocationStrategy,
    node_strategy,
    parse_colocation_config,
)
from app.manager.mergecfg import merge_cfg

GI = 1 << 30
NOW = 1_000_000.0
NODE = NodeInput(capacity={"cpu": 100_000, "memory": 120 * GI}, allocatable={"cpu": 100_000, "memory": 120 * GI})


def strategy(**kw: Any) -> ColocationStrategy:
    return ColocationStrategy.of({"enable": True, **kw})


def pod(
    name: str, pclass: PriorityClass, cpu: int, mem: int, qos: QoSClass = QoSClass.LS, phase: str = "Running"
) -> PodInput:
    return PodInput(f"default/{name}", phase, pclass, qos, {"cpu": cpu, "memory": mem})


# Upstream's "calculate correctly" shape: 100 cores / 120Gi, reclaim 65 % cpu / 65 % memory.
PODS = [
    pod("ls", PriorityClass.PROD, 20_000, 20 * GI),
    pod("be", PriorityClass.BATCH, 40_000, 40 * GI, QoSClass.BE),
    pod("done", PriorityClass.PROD, 10_000, 10 * GI, phase="Succeeded"),
    pod("lse", PriorityClass.PROD, 10_000, 10 * GI, QoSClass.LSE),
]
METRIC = MetricInput(
    update_time=NOW - 10,
    system_usage={"cpu": 7_000, "memory": 12 * GI},
    pods={
        "default/ls": ("koord-prod", {"cpu": 10_000, "memory": 25 * GI}),
        "default/be": ("koord-batch", {"cpu": 30_000, "memory": 30 * GI}),
        "default/lse": ("koord-prod", {"cpu": 2_000, "memory": 5 * GI}),
        "default/gone": ("koord-prod", {"cpu": 1_000, "memory": 1 * GI}),
        "default/gone-be": ("koord-batch", {"cpu": 9_000, "memory": 9 * GI}),
    },
)


@pytest.mark.parametrize(
    ("name", "kw", "cpu", "memory"),
    [
        # cpu: 100000 - 35000 (margin) - 7000 (system) - (10000 ls + 10000 lse request + 1000 dangling) = 37000
        # memory: 120Gi - int(120Gi*0.35) - 12Gi - (25Gi + 5Gi + 1Gi)
        (
            "usage",
            {"cpuReclaimThresholdPercent": 65, "memoryReclaimThresholdPercent": 65},
            37_000,
            120 * GI - int(120 * GI * 0.35) - 43 * GI,
        ),
        (
            "memory by request",
            {"cpuReclaimThresholdPercent": 65, "memoryReclaimThresholdPercent": 65, "memoryCalculatePolicy": "request"},
            37_000,
            120 * GI - int(120 * GI * 0.35) - 0 - 30 * GI,
        ),
        (
            "maxUsageRequest",
            {
                "cpuReclaimThresholdPercent": 65,
                "memoryReclaimThresholdPercent": 65,
                "cpuCalculatePolicy": "maxUsageRequest",
                "memoryCalculatePolicy": "maxUsageRequest",
            },
            # max(req, usage): ls 20000/25Gi, lse 10000/10Gi, dangling 1000/1Gi
            100_000 - 35_000 - 7_000 - 31_000,
            120 * GI - int(120 * GI * 0.35) - 12 * GI - 36 * GI,
        ),
        (
            "batch thresholds cap",
            {
                "cpuReclaimThresholdPercent": 65,
                "memoryReclaimThresholdPercent": 65,
                "batchCPUThresholdPercent": 20,
                "batchMemoryThresholdPercent": 10,
            },
            20_000,
            int(120 * GI * 0.1),
        ),
        (
            "reclaim over 100 makes the margin negative",
            {"cpuReclaimThresholdPercent": 150, "memoryReclaimThresholdPercent": 65},
            100_000 + 50_000 - 7_000 - 21_000,
            120 * GI - int(120 * GI * 0.35) - 43 * GI,
        ),
    ],
)
def test_batch_formula(name: str, kw: dict[str, Any], cpu: int, memory: int) -> None:
    result = calculate_batch(strategy(**kw), NODE, PODS, METRIC, NOW)
    assert not result.reset, name
    assert (result.cpu, result.memory) == (cpu, memory), name


def test_system_usage_is_maxed_with_reservations_and_host_apps() -> None:
    node = NodeInput(
        capacity={"cpu": 100_000, "memory": 120 * GI},
        allocatable={"cpu": 90_000, "memory": 120 * GI},  # kubelet reserves 10 cores
        reserved={"memory": 20 * GI},  # annotation reservation
    )
    metric = MetricInput(NOW, {"cpu": 7_000, "memory": 12 * GI}, {}, (("koord-prod", {"cpu": 1_000, "memory": GI}),))
    r = calculate_batch(
        strategy(cpuReclaimThresholdPercent=100, memoryReclaimThresholdPercent=100), node, [], metric, NOW
    )
    assert (r.cpu, r.memory) == (90_000, 100 * GI)
    batch_app = MetricInput(
        NOW, {"cpu": 7_000, "memory": 12 * GI}, {}, (("koord-batch", {"cpu": 50_000, "memory": GI}),)
    )
    r = calculate_batch(strategy(cpuReclaimThresholdPercent=100), node, [], batch_app, NOW)
    assert r.cpu == 90_000  # host apps at batch priority do not count


@pytest.mark.parametrize(
    ("name", "metric"),
    [
        ("no NodeMetric", None),
        ("no updateTime", MetricInput(None)),
        ("older than degradeTimeMinutes", MetricInput(NOW - 15 * 60 - 1)),
    ],
)
def test_degrade_resets(name: str, metric: MetricInput | None) -> None:
    r = calculate_batch(strategy(), NODE, [], metric, NOW)
    assert r.reset, name
    assert r.cpu_message == DEGRADE_MESSAGE
    assert not calculate_batch(strategy(), NODE, [], MetricInput(NOW - 15 * 60), NOW).reset


def test_third_party_and_normalization() -> None:
    node = NodeInput(
        capacity={"cpu": 10_000, "memory": 10 * GI},
        allocatable={"cpu": 10_000, "memory": 10 * GI},
        third_party_batch={"kubernetes.io/batch-cpu": 1_000, "kubernetes.io/batch-memory": GI},
        cpu_normalization_ratio=1.5,
    )
    r = calculate_batch(
        strategy(cpuReclaimThresholdPercent=100, memoryReclaimThresholdPercent=100), node, [], MetricInput(NOW), NOW
    )
    assert (r.cpu, r.memory) == (13_500, 9 * GI)


@pytest.mark.parametrize(
    ("old", "new", "diff"),
    [
        (None, None, False),
        (None, 1, True),
        (1000, None, True),
        (1000, 1100, False),
        (1000, 1101, True),
        (0, 0, False),
        (0, 1, True),
    ],
)
def test_resource_diff(old: int | None, new: int | None, diff: bool) -> None:
    assert is_resource_diff(old, new, 0.1) is diff


# ------------------------------------------------------------------ colocation-config


def test_defaults_and_merge() -> None:
    cfg = parse_colocation_config(None)
    assert cfg.strategy["enable"] is False and cfg.strategy["cpuReclaimThresholdPercent"] == 60
    cfg = parse_colocation_config(
        '{"enable": true, "cpuReclaimThresholdPercent": 70, "nodeConfigs": '
        '[{"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "memoryReclaimThresholdPercent": 80},'
        ' {"name": "bad", "nodeSelector": {"matchLabels": {"pool": "b"}}, "degradeTimeMinutes": -1}]}'
    )
    assert cfg.strategy["memoryReclaimThresholdPercent"] == 65
    a = node_strategy(cfg, {"pool": "a"}, {})
    assert (a["cpuReclaimThresholdPercent"], a["memoryReclaimThresholdPercent"]) == (70, 80)
    assert node_strategy(cfg, {"pool": "b"}, {})["degradeTimeMinutes"] == 15  # invalid node config -> cluster
    labelled = node_strategy(cfg, {"node.koordinator.sh/cpu-reclaim-ratio": "0.29"}, {})
    assert labelled["cpuReclaimThresholdPercent"] == 28  # float x 100 truncated, as Go's int64(v * 100)
    annotated = node_strategy(
        cfg, {}, {"node.koordinator.sh/colocation-strategy": '{"cpuReclaimThresholdPercent": 50}'}
    )
    assert annotated["cpuReclaimThresholdPercent"] == 50
    assert merge_cfg({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": 3}, "l": [2], "n": None}) == {
        "a": {"b": 3, "c": 2},
        "l": [2],
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{nope", "colocation-config: not valid JSON"),
        ("[]", "expected a JSON object"),
        (
            '{"cpuReclaimThresholdPercent": "60"}',
            'colocation-config.cpuReclaimThresholdPercent: expected an integer, got "60"',
        ),
        ('{"enable": "yes"}', "colocation-config.enable: expected a boolean"),
        ('{"degradeTimeMinutes": 0}', "the cluster config is invalid: degradeTimeMinutes must be > 0, got 0"),
        ('{"midCPUThresholdPercent": 101}', "midCPUThresholdPercent must be in [0, 100], got 101"),
        ('{"resourceDiffThreshold": 0}', "resourceDiffThreshold must be > 0"),
    ],
)
def test_invalid_colocation_config(text: str, message: str) -> None:
    with pytest.raises(ColocationConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_colocation_config(text)
