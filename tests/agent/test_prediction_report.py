"""prodReclaimableMetric end to end: metric cache -> prediction rounds -> NodeMetric on the fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.metriccache import MetricCache
from agent.prediction.loop import PredictionLoop
from agent.prediction.server import PredictionConfig
from agent.qos.context import NODE_CPU, NODE_MEMORY, pod_cpu_key, pod_memory_key
from agent.reporter import APIMetricWriter, CollectPolicy, build_status
from agent.states.pods import pod_meta
from app.api.kinds import KINDS
from app.api.timeparse import format_time
from app.client.config import load_configuration
from app.client.sync import Client
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer

GI = 1 << 30
T0 = 1_790_000_000.0


def pod(name: str, uid: str, cpu: str, memory: str, created: float, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "labels": labels,
            "creationTimestamp": format_time(created),
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
                }
            ]
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    fake = FakeAPIServer(tokens={TOKEN})
    try:
        with Client(load_configuration(write_kubeconfig(tmp_path / "kubeconfig", fake.url)), timeout=5) as c:
            yield c
    finally:
        fake.close()


def test_prod_reclaimable_reaches_the_nodemetric(tmp_path: Path, client: Client) -> None:
    web = pod_meta(pod("web", "uid-web", "4", "8Gi", T0 - 2 * 86400.0), None)  # prod (Guaranteed -> LSR)
    batch = pod_meta(pod("job", "uid-job", "2", "2Gi", T0 - 2 * 86400.0, **{"koordinator.sh/qosClass": "BE"}), None)
    assert web.created == T0 - 2 * 86400.0
    loop = PredictionLoop(PredictionConfig(checkpoint_dir=tmp_path / "ckpt"))
    cache = MetricCache(1.0, 4000.0)
    assert loop.prod_reclaimable([web, batch], (16000, 64 * GI), T0) is None  # nothing trained yet
    # one hour of 1 s samples: web steady at 2 cores / 4 GiB, the batch pod at 1 core, the node 3.5 cores / 8 GiB
    for i in range(3600):
        t = T0 + i
        cache.append(pod_cpu_key("uid-web"), t, 2.0)
        cache.append(pod_memory_key("uid-web"), t, 4.0 * GI)
        cache.append(pod_cpu_key("uid-job"), t, 1.0)
        cache.append(pod_memory_key("uid-job"), t, 1.0 * GI)
        cache.append(NODE_CPU, t, 3.5)
        cache.append(NODE_MEMORY, t, 8.0 * GI)
        loop.tick(cache, [web, batch], t)
    now = T0 + 3599
    assert len(loop.server.models["uid-web"].cpu.weights) == 158 and "uid-job" in loop.server.models
    reclaimable = loop.prod_reclaimable([web, batch], (16000, 64 * GI), now)
    assert reclaimable is not None
    # pod predictor: web 4000 - int(2001 * 1.1) = 1799 milli; the priority predictor's peak adds the system's
    # 0.5 cores and the no-class tier's 25 milli, so cpu = 4000 - int((2001 + 539 + 25) * 1.1) = 1179
    assert reclaimable[0] == 1179
    assert 0 < reclaimable[1] < 8 * GI - 4 * GI  # memory: request 8 GiB minus more than the 4 GiB used

    status = build_status(cache, [web, batch], now, CollectPolicy(), prod_reclaimable=reclaimable)
    assert status is not None
    APIMetricWriter(client).write("node-a", CollectPolicy().spec(), status)
    stored = client.get(f"{KINDS['NodeMetric'].collection_path(None)}/node-a")
    resources = stored["status"]["prodReclaimableMetric"]["resource"]["resources"]
    assert resources["cpu"] == "1179m"
    assert resources["memory"] == str(reclaimable[1])
    # checkpoints were taken (the first upkeep saves every model) so a restarted agent keeps this history
    assert (tmp_path / "ckpt" / "uid-web").is_file()


def test_no_metric_without_prediction(tmp_path: Path) -> None:
    cache = MetricCache(1.0, 400.0)
    cache.append(NODE_CPU, T0, 1.0)
    cache.append(NODE_MEMORY, T0, GI)
    status = build_status(cache, [], T0, CollectPolicy())
    assert status is not None and "prodReclaimableMetric" not in status


def test_an_unusable_checkpoint_directory_is_logged_not_fatal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    loop = PredictionLoop(PredictionConfig(checkpoint_dir=blocker / "ckpt"))
    cache = MetricCache(1.0, 400.0)
    cache.append(NODE_CPU, T0, 1.0)
    cache.append(NODE_MEMORY, T0, GI)
    assert loop.tick(cache, [], T0)  # trained, although the checkpoint could not be written
    assert loop.server.synced and "saving the prediction checkpoint" in caplog.text
