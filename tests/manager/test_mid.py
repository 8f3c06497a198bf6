"""Mid resources: upstream's MidResource plugin table (plugin_test.go) and the controller writing them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.api.koordext import MID_CPU, MID_MEMORY, PriorityClass, QoSClass
from app.api.timeparse import format_time
from app.cache.snapshot import ClusterCache
from app.manager.batch import MetricInput, NodeInput, PodInput
from app.manager.colocation import ColocationStrategy, node_strategy, parse_colocation_config
from app.manager.controllers import SLOControllers
from app.manager.mid import DEGRADE_MESSAGE, calculate_mid
from app.sources.files import FileSource

GI = 1 << 30
NOW = 1_790_000_000.0
# upstream's getTestNode: capacity 100 cores / 210Gi, allocatable 100 / 200Gi (kubelet reserves 10Gi)
NODE = NodeInput(capacity={"cpu": 100_000, "memory": 210 * GI}, allocatable={"cpu": 100_000, "memory": 200 * GI})
PODS = [
    PodInput("test/podA", "Running", PriorityClass.PROD, QoSClass.LS, {"cpu": 20_000, "memory": 40 * GI}),
    PodInput("test/podB", "Running", PriorityClass.BATCH, QoSClass.BE, {"cpu": 15_000, "memory": 30 * GI}),
]


def strategy(**kw: Any) -> ColocationStrategy:
    return ColocationStrategy.of({"enable": True, **kw})


def metric(age: float, usage: tuple[int, int], reclaimable: tuple[int, int] | None) -> MetricInput:
    return MetricInput(
        update_time=NOW - age,
        node_usage={"cpu": usage[0], "memory": usage[1]},
        prod_reclaimable=None if reclaimable is None else {"cpu": reclaimable[0], "memory": reclaimable[1]},
    )


@pytest.mark.parametrize(
    ("name", "kw", "m", "want"),
    [
        (
            "calculate correctly when node metric is valid",
            {"degradeTimeMinutes": 10},
            metric(20, (20_000, 45 * GI), (10_000, 15 * GI)),
            (10_000, 15 * GI),
        ),
        (
            # min(100000 * 0.1, 15000, unused 70000) + 80000 * 0.1; min(210Gi * 0.2, 30Gi, 160Gi) + 160Gi * 0.1
            "calculate correctly where the prod reclaimable exceeds the mid threshold",
            {
                "degradeTimeMinutes": 10,
                "midCPUThresholdPercent": 10,
                "midMemoryThresholdPercent": 20,
                "midUnallocatedPercent": 10,
            },
            metric(20, (30_000, 50 * GI), (15_000, 30 * GI)),
            (18_000, 46 * GI),
        ),
        (
            "calculate correctly when prod reclaimable is nil",
            {"degradeTimeMinutes": 10},
            metric(20, (30_000, 50 * GI), None),
            (0, 0),
        ),
        (
            "the node's unused resources cap the reclaimable",
            {"degradeTimeMinutes": 10},
            metric(20, (95_000, 205 * GI), (10_000, 15 * GI)),
            (5_000, 5 * GI),
        ),
    ],
)
def test_upstream_table(name: str, kw: dict[str, Any], m: MetricInput, want: tuple[int, int]) -> None:
    r = calculate_mid(strategy(**kw), NODE, PODS, m, NOW)
    assert not r.reset, name
    assert (r.cpu, r.memory) == want, name


def test_degrade_when_the_nodemetric_is_stale_or_missing() -> None:
    for m in (metric(30 * 60, (20_000, 45 * GI), (10_000, 15 * GI)), MetricInput(None), None):
        r = calculate_mid(strategy(degradeTimeMinutes=5), NODE, PODS, m, NOW)
        assert r.reset and r.cpu_message == DEGRADE_MESSAGE == r.memory_message


def test_message_names_the_terms() -> None:
    r = calculate_mid(
        strategy(midCPUThresholdPercent=10, midUnallocatedPercent=10),
        NODE,
        PODS,
        metric(20, (30_000, 50 * GI), (15_000, 30 * GI)),
        NOW,
    )
    assert r.cpu_message == (
        "midAllocatable[CPU(milli-core)]:18000 = min(nodeCapacity:100000 * thresholdRatio:0.1, "
        "ProdReclaimable:15000, NodeUnused:70000) + Unallocated:80000 * midUnallocatedRatio:0.1"
    )


def test_static_mode_and_the_reserved_ratio_labels() -> None:
    cfg = parse_colocation_config(
        json.dumps({"enable": True, "midReclaimMode": "static", "midCPUThresholdPercent": 15})
    )
    s = node_strategy(
        cfg,
        {
            "node.koordinator.sh/mid-static-cpu-reserved-ratio": "0.2",
            "node.koordinator.sh/mid-static-memory-reserved-ratio": "0.1",
        },
        {},
    )
    r = calculate_mid(ColocationStrategy.of(s), NODE, PODS, metric(20, (0, 0), None), NOW)
    # cpu: min(100000 * 0.2, 100000 * 0.15); memory: min(210Gi * 0.1, 210Gi * 1.0)
    assert (r.cpu, r.memory) == (15_000, int(210 * GI * 0.1))


def _write_cluster(path: Path, updated: float) -> None:
    config = {"colocation-config": json.dumps({"enable": True})}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
            "data": config,
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "16", "memory": "64Gi"}, "allocatable": {"cpu": "16", "memory": "64Gi"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-web"},
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "8", "memory": "16Gi"}}}],
            },
            "status": {"phase": "Running"},
        },
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "n1"},
            "status": {
                "updateTime": format_time(updated),
                "nodeMetric": {
                    "nodeUsage": {"resources": {"cpu": "4", "memory": "12Gi"}},
                    "systemUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}},
                },
                "podsMetric": [
                    {
                        "namespace": "default",
                        "name": "web",
                        "priority": "koord-prod",
                        "podUsage": {"resources": {"cpu": "3", "memory": "8Gi"}},
                    }
                ],
                "prodReclaimableMetric": {"resource": {"resources": {"cpu": "4200m", "memory": "6Gi"}}},
            },
        },
    ]
    import yaml

    (path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))


async def _until(cond: Any) -> None:
    import asyncio

    for _ in range(200):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def _settle(source: FileSource, cache: ClusterCache) -> None:
    import asyncio

    for _ in range(200):
        if source.ready() and "n1" in cache.nodes and cache.objects.get("NodeMetric"):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("cluster not loaded")


async def test_controller_writes_mid_resources_and_removes_them_when_the_nodemetric_goes_stale(tmp_path: Path) -> None:
    _write_cluster(tmp_path, NOW - 30)
    now = [NOW]
    source = FileSource(tmp_path, poll_interval=0, restamp_interval=0)
    cache = ClusterCache()
    controllers = SLOControllers(cache, source, clock=lambda: now[0])
    await source.start(cache)
    try:
        await _settle(source, cache)
        await controllers.run_once(full=True)
        await _until(lambda: MID_CPU in cache.nodes["n1"].allocatable)
        alloc = cache.nodes["n1"].allocatable
        assert alloc[MID_CPU] == 4200 and alloc[MID_MEMORY] == 6 * GI
        status = cache.nodes["n1"].obj["status"]
        assert status["allocatable"][MID_CPU] == "4200" and status["capacity"][MID_MEMORY] == "6Gi"
        assert "kubernetes.io/batch-cpu" in alloc  # batch is computed beside it
        now[0] = NOW + 16 * 60  # past degradeTimeMinutes (15): the NodeMetric is stale
        await controllers.run_once(full=True)
        await _until(lambda: MID_CPU not in cache.nodes["n1"].allocatable)
        assert MID_CPU not in cache.nodes["n1"].allocatable and MID_MEMORY not in cache.nodes["n1"].allocatable
    finally:
        await source.stop()
