"""A quantity beyond int64 is refused like NaN: the object is skipped (log line, metric), nothing is half
applied, and the rest of the cluster keeps flowing through every source."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.api.quantity import QuantityError, int_value, milli_value
from app.cache.snapshot import ClusterCache
from app.framework.config import default_config
from app.framework.handle import Handle
from app.framework.runtime import Framework
from app.plugins.registry import default_registry
from app.sources.events import Event, EventType
from app.sources.files import FileSource
from tests.conftest import LiveServer

HUGE = ["9223372036854775808", "1e400", "99999999999999999999Ei", "1e999999999"]


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


@pytest.mark.parametrize("value", HUGE)
def test_quantities_beyond_int64_are_invalid(value: str) -> None:
    with pytest.raises(QuantityError, match="out of the int64 range"):
        int_value(value)
    with pytest.raises(QuantityError, match="out of the int64 range"):
        milli_value(value)
    assert int_value("9223372036854775807") == 2**63 - 1  # the largest that fits stays valid
    with pytest.raises(QuantityError):
        milli_value("9223372036854775807")  # ... but not as milli-cores


def _cache_with_plugins() -> ClusterCache:
    cache = ClusterCache()
    registry = default_registry()
    Framework(default_config(registry.names()), registry, Handle(cache))
    return cache


@pytest.mark.parametrize("value", HUGE)
def test_a_bad_node_in_a_relist_is_skipped_alone(value: str) -> None:
    cache = _cache_with_plugins()
    cache.replace("Node", [node("bad", value), node("good")])  # used to raise OverflowError half-way
    assert sorted(cache.nodes) == ["good"]
    assert cache.table.row("bad") is None and cache.table.row("good") is not None
    assert cache.rejected_by_kind == {"Node": 1}
    # a later good version of the same node is taken
    cache.apply(Event("Node", EventType.MODIFIED, node("bad")))
    assert sorted(cache.nodes) == ["bad", "good"]


def test_a_bad_pod_and_bad_cached_objects_are_rejected_alone() -> None:
    cache = _cache_with_plugins()
    cache.apply(Event("Node", EventType.ADDED, node("n1")))
    bad_pod = {
        "metadata": {"name": "p", "namespace": "d", "uid": "u1"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1e400"}}}]},
    }
    cache.apply(Event("Pod", EventType.ADDED, bad_pod))
    assert "u1" not in cache.pods and cache.nodes["n1"].requested == {}
    metric = {
        "metadata": {"name": "n1"},
        "status": {"updateTime": "2026-01-01T00:00:00Z", "nodeMetric": {"nodeUsage": {"resources": {"cpu": HUGE[2]}}}},
    }
    cache.apply(Event("NodeMetric", EventType.ADDED, metric))
    quota = {"metadata": {"name": "q", "namespace": "d"}, "spec": {"max": {"cpu": "1e400"}, "min": {"cpu": "1"}}}
    cache.apply(Event("ElasticQuota", EventType.ADDED, quota))
    gpu = {"type": "gpu", "resources": {"koordinator.sh/gpu-core": "NaN"}}
    nan = {"metadata": {"name": "n1"}, "spec": {"devices": [gpu]}}
    cache.apply(Event("Device", EventType.ADDED, nan))
    assert cache.rejected_by_kind == {"Pod": 1, "NodeMetric": 1, "ElasticQuota": 1, "Device": 1}
    assert cache.counts().get("NodeMetric", 0) == 0 and cache.counts().get("ElasticQuota", 0) == 0
    # the rest keeps flowing
    good = {"metadata": {"name": "ok", "namespace": "d", "uid": "u2"}, "spec": {"nodeName": "n1", "containers": []}}
    cache.apply(Event("Pod", EventType.ADDED, good))
    assert "u2" in cache.pods


async def test_file_source_keeps_polling_after_a_bad_node(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([node("bad", HUGE[0]), node("good")]))
    cache = _cache_with_plugins()
    src = FileSource(tmp_path, poll_interval=0.05, restamp_interval=0)
    await src.start(cache)
    try:
        assert src.ready() and sorted(cache.nodes) == ["good"]
        (tmp_path / "b.yaml").write_text(yaml.safe_dump(node("later")))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if "later" in cache.nodes:
                break
        assert sorted(cache.nodes) == ["good", "later"], "the polling loop died on the bad node"
    finally:
        await src.stop()


def test_metrics_count_rejections_by_kind(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([node("bad", HUGE[1]), node("good")]))
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        text = srv.client.get("/metrics").text
        assert 'koord_cache_rejected_objects_total{kind="Node"} 1.0' in text
        assert srv.client.get("/apis/v1/nodes/good").status_code == 200
        assert srv.client.get("/apis/v1/nodes/bad").status_code == 404
