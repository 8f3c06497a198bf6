"""Prediction: decaying histograms, the predict server and prod reclaimable against hand-worked series.

Bucket arithmetic used below (cpu buckets: first 0.025 cores, ratio 1.05): a value v falls into bucket
``floor(log(v * 0.05 / 0.025 + 1) / log(1.05))`` and a percentile answers the end of its bucket,
``0.025 * (1.05**(b + 1) - 1) / 0.05``. So 1 core is bucket 22 (log 3 / log 1.05 = 22.52), 2 cores bucket 32
(log 5 / log 1.05 = 32.99), 3 cores bucket 39 (log 7 / log 1.05 = 39.88); 0 is bucket 0, whose end is 0.025.
"""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from agent.prediction.histogram import (
    CPU_BUCKETS,
    MEMORY_BUCKETS,
    DecayingHistogram,
    ExponentialBuckets,
    HistogramError,
    cpu_histogram,
)
from agent.prediction.peak import PodView, pod_reclaimable, priority_reclaimable, prod_reclaimable
from agent.prediction.server import (
    NODE_UID,
    PodUsage,
    PredictionConfig,
    PredictionError,
    PredictServer,
    node_item_uid,
)
from app.api.koordext import PriorityClass

HOUR = 3600.0
DAY = 24 * HOUR
T0 = 1_790_000_000.0 - (1_790_000_000.0 % DAY)  # midnight UTC
GI = 1 << 30
STEP = 300.0  # one training sample every 5 minutes keeps the tests cheap; the arithmetic is the same


def bucket_end(first: float, v: float) -> float:
    """End of the bucket of ``v`` for 5 % growth: the value a percentile landing there answers."""
    b = math.floor(math.log(v * 0.05 / first + 1) / math.log(1.05))
    return first * (1.05 ** (b + 1) - 1) / 0.05


# ---------------------------------------------------------------------------------------------- histogram


def test_bucket_layouts_match_upstream() -> None:
    # ceil(log_1.05(1024 * 0.05 / 0.025 + 1)) + 1 = ceil(156.3) + 1; memory: ceil(log_1.05(2Ti * 0.05 / 5Mi + 1)) + 1
    assert CPU_BUCKETS.num_buckets == 158
    assert MEMORY_BUCKETS.num_buckets == 205
    assert CPU_BUCKETS.find_bucket(0.01) == 0
    assert CPU_BUCKETS.find_bucket(1.0) == 22
    assert CPU_BUCKETS.find_bucket(2.0) == 32
    assert CPU_BUCKETS.find_bucket(3.0) == 39
    assert CPU_BUCKETS.find_bucket(1e9) == 157
    assert CPU_BUCKETS.bucket_start(0) == 0.0
    assert CPU_BUCKETS.bucket_start(1) == pytest.approx(0.025)
    with pytest.raises(HistogramError):
        CPU_BUCKETS.bucket_start(158)
    with pytest.raises(HistogramError, match=r"ratio must be > 1\.0"):
        ExponentialBuckets(1.0, 0.1, 1.0, 1e-4)


def test_empty_histogram_answers_zero_and_refuses_bad_samples() -> None:
    h = cpu_histogram(12 * HOUR)
    assert h.is_empty() and h.percentile(0.95) == 0.0
    with pytest.raises(HistogramError, match="non-negative"):
        h.add_sample(1.0, -1.0, T0)
    with pytest.raises(HistogramError, match="finite"):
        h.add_sample(float("nan"), 1.0, T0)
    assert h.is_empty() and h.total == 0.0
    with pytest.raises(HistogramError, match="half-life"):
        DecayingHistogram(CPU_BUCKETS, 0)


def test_half_life_halves_old_weight() -> None:
    h = cpu_histogram(12 * HOUR)
    h.add_sample(1.0, 1.0, T0)
    h.add_sample(3.0, 1.0, T0 + 12 * HOUR)  # one half-life later: weighs twice the first
    assert h.weights[39] == pytest.approx(2 * h.weights[22])
    # 1/3 of the weight at 1 core: the median reaches the 3-core bucket, p30 stays at 1 core
    assert h.percentile(0.5) == pytest.approx(bucket_end(0.025, 3.0))
    assert h.percentile(0.3) == pytest.approx(bucket_end(0.025, 1.0))


def test_reference_time_moves_after_100_half_lives_without_changing_percentiles() -> None:
    h = cpu_histogram(HOUR)
    h.add_sample(1.0, 1.0, T0)
    first_ref = h.reference
    h.add_sample(3.0, 1.0, T0 + 150 * HOUR)  # past ref + 100 half-lives: renormalised, no overflow
    assert h.reference > first_ref
    assert math.isfinite(h.total) and h.percentile(1.0) == pytest.approx(bucket_end(0.025, 3.0))
    assert h.percentile(0.5) == pytest.approx(bucket_end(0.025, 3.0))  # 1 core is 2**-150 of the weight: gone


def test_checkpoint_round_trip_and_refusals() -> None:
    h = cpu_histogram(12 * HOUR)
    for i in range(10):
        h.add_sample(1.0 if i < 7 else 3.0, 1.0, T0 + i * HOUR)
    saved = orjson.loads(orjson.dumps(h.save()))
    assert max(saved["bucketWeights"].values()) == 10000
    assert saved["referenceTimestamp"].endswith("Z")
    back = cpu_histogram(12 * HOUR)
    back.load(saved)
    assert back.total == pytest.approx(h.total)
    assert back.reference == h.reference
    for p in (0.5, 0.6, 0.9, 0.95, 1.0):
        assert back.percentile(p) == pytest.approx(h.percentile(p))
    for bad, msg in (
        ({"totalWeight": -1}, "totalWeight"),
        ({"totalWeight": 1, "bucketWeights": {"999": 1}}, "outside"),
        ({"totalWeight": 1, "bucketWeights": {"x": 1}}, "not an integer"),
        ({"totalWeight": 1, "bucketWeights": {"3": -2}}, "non-negative integer"),
        ({"totalWeight": 1, "bucketWeights": {"3": 2}, "referenceTimestamp": "yesterday"}, "RFC 3339"),
    ):
        fresh = cpu_histogram(12 * HOUR)
        with pytest.raises(HistogramError, match=msg):
            fresh.load(bad)
        assert fresh.is_empty() and fresh.total == 0.0  # nothing half-applied


# ---------------------------------------------------------------------------------------------- series

PROD = PriorityClass.PROD


def steady(t: float) -> tuple[float, float]:
    """A steady pod: 2 cores, 4 GiB, all day."""
    return 2.0, 4.0 * GI


def daily_peak(t: float) -> tuple[float, float]:
    """1 core / 2 GiB, except 10:00-12:00 every day: 3 cores / 6 GiB."""
    hour = ((t - T0) % DAY) / HOUR
    return (3.0, 6.0 * GI) if 10 <= hour < 12 else (1.0, 2.0 * GI)


def train(server: PredictServer, pods: dict[str, object], start: float, end: float, system: float = 0.5) -> None:
    """Train every STEP seconds over [start, end); the node is the pods' sum plus ``system`` cores / GiB."""
    t = start
    while t < end:
        samples = [PodUsage(uid, PROD, *fn(t)) for uid, fn in pods.items()]  # type: ignore[operator]
        node = (sum(s.cpu for s in samples) + system, sum(s.memory for s in samples) + system * GI)
        server.train(samples, node, t)
        t += STEP


def view(uid: str, cpu: int, memory: int, created: float | None) -> PodView:
    return PodView(uid, f"default/{uid}", PROD, cpu, memory, created)


@pytest.fixture
def server(tmp_path: Path) -> PredictServer:
    return PredictServer(PredictionConfig(checkpoint_dir=tmp_path / "ckpt"))


def test_steady_pod_peak_and_reclaimable(server: PredictServer) -> None:
    train(server, {"steady": steady}, T0, T0 + 2 * DAY)
    p = server.prediction("steady").data
    # 2 cores -> bucket 32, whose end is 0.5 * (1.05**33 - 1) = 2.00159 cores -> 2001 milli at every percentile
    assert p["p60"][0] == p["p95"][0] == p["max"][0] == 2001
    # 4 GiB -> bucket floor(log(4Gi * 0.05 / 5Mi + 1) / log 1.05) = 76, end 100Mi * (1.05**77 - 1)
    assert p["p98"][1] == int(bucket_end(5 << 20, 4.0 * GI))
    # request 4 cores / 8 GiB, created 2 days ago: peak = p95 * 1.1 = 2201 milli, p98 * 1.1 bytes
    pods = [view("steady", 4000, 8 * GI, T0)]
    peak_mem = int(p["p98"][1] * 1.1)
    cpu, mem = pod_reclaimable(server, pods, (16000, 64 * GI), T0 + 2 * DAY)
    assert (cpu, mem) == (4000 - 2201, 8 * GI - peak_mem)
    # the priority predictor adds the system's peak (0.5 cores -> end of its bucket) and the no-class tier's
    # (no pods: zeros fall into bucket 0, whose end is 0.025 cores = 25 milli) to the prod tier's
    sys_p95 = server.prediction(node_item_uid("sys")).data["p95"][0]
    assert sys_p95 == int(bucket_end(0.025, 0.5) * 1000) == 539
    assert server.prediction(node_item_uid("")).data["p95"][0] == 25
    by_prio = priority_reclaimable(server, pods, (16000, 64 * GI))
    assert by_prio[0] == 4000 - int((2001 + 539 + 25) * 1.1) == 1179
    assert prod_reclaimable(server, pods, (16000, 64 * GI), T0 + 2 * DAY) == (
        min(cpu, by_prio[0]),
        min(mem, by_prio[1]),
    )


def test_daily_peak_is_predicted_not_the_current_trough(server: PredictServer) -> None:
    train(server, {"web": daily_peak}, T0, T0 + 2 * DAY)
    p = server.prediction("web").data
    # with a 12 h half-life the 10-12h peaks weigh (2 - 2**(10/12)) + (8 - 2**(34/12)) = 1.09 of 15 = 7.3 %:
    # p90 is still the trough (1 core), p95 the peak (3 cores)
    assert p["p90"][0] == int(bucket_end(0.025, 1.0) * 1000)
    assert p["p95"][0] == int(bucket_end(0.025, 3.0) * 1000) == 3019
    assert p["p60"][0] == int(bucket_end(0.025, 1.0) * 1000)
    # usage now (midnight) is 1 core: the current-usage figure would lend 4 - 1 = 3 cores of a 4-core request;
    # the prediction lends only request - p95 * 1.1 = 4000 - 3320
    cpu, _ = pod_reclaimable(server, [view("web", 4000, 8 * GI, T0)], (16000, 64 * GI), T0 + 2 * DAY)
    assert cpu == 4000 - int(3019 * 1.1) == 680


def test_new_pod_without_history_lends_nothing(server: PredictServer) -> None:
    train(server, {"steady": steady}, T0, T0 + 2 * DAY)
    now = T0 + 2 * DAY
    old = view("steady", 4000, 8 * GI, T0)
    fresh = view("fresh", 8000, 16 * GI, now - HOUR)  # in its 24 h cold start, and never trained
    with pytest.raises(PredictionError, match="fresh not found"):
        server.prediction("fresh")
    alone = pod_reclaimable(server, [old], (16000, 64 * GI), now)
    assert pod_reclaimable(server, [old, fresh], (16000, 64 * GI), now) == alone
    # a pod past its cold start but without a model fails the whole prediction (upstream's AddPod error)
    with pytest.raises(PredictionError):
        pod_reclaimable(server, [old, view("ghost", 1000, GI, T0)], (16000, 64 * GI), now)
    with pytest.raises(PredictionError, match="capacity"):
        prod_reclaimable(server, [old], None, now)


def test_restart_restores_the_checkpoint(tmp_path: Path) -> None:
    cfg = PredictionConfig(checkpoint_dir=tmp_path / "ckpt")
    before = PredictServer(cfg)
    train(before, {"web": daily_peak, "gone": steady}, T0, T0 + 2 * DAY)
    now = T0 + 2 * DAY
    assert before.checkpoint(now) == 9  # web, gone, the node, sys and five priority classes
    assert before.checkpoint(now + 60) == 0  # nothing older than the 10-minute interval
    files = sorted(p.name for p in cfg.checkpoint_dir.iterdir())
    assert "web" in files and NODE_UID in files and node_item_uid("koord-prod") in files
    (cfg.checkpoint_dir / "web.tmp").write_text("half")  # a crash mid-write
    (cfg.checkpoint_dir / "broken").write_text("{not json")

    after = PredictServer(cfg)  # the restarted agent; "gone" is no longer on the node
    restored, removed = after.restore(["web", "broken"])
    assert "web" in restored and "gone" in removed and "broken" in removed
    assert not (cfg.checkpoint_dir / "gone").exists() and not (cfg.checkpoint_dir / "web.tmp").exists()
    assert after.prediction("web").data == before.prediction("web").data
    assert after.models["web"].last_updated == now  # upstream stamps LastUpdated with the checkpoint time
    # without the checkpoint a restarted agent would know nothing of the peak
    assert PredictServer(PredictionConfig(checkpoint_dir=tmp_path / "empty")).restore(["web"]) == ([], [])


def test_gc_drops_expired_models_and_their_checkpoints(server: PredictServer) -> None:
    train(server, {"a": steady}, T0, T0 + HOUR)
    server.checkpoint(T0 + HOUR)
    assert (server.config.checkpoint_dir / "a").exists()
    server.train([], (1.0, GI), T0 + 2 * HOUR)  # "a" is gone from the node
    assert "a" in server.gc(T0 + 2 * HOUR)
    assert "a" not in server.models and not (server.config.checkpoint_dir / "a").exists()


def test_config_validation() -> None:
    with pytest.raises(PredictionError, match="cpu_half_life"):
        PredictionConfig(cpu_half_life=0)
    cfg = PredictionConfig()
    assert (cfg.cold_start_seconds, cfg.safety_margin_percent) == (DAY, 10)
    assert (cfg.cpu_half_life, cfg.memory_half_life, cfg.training_interval) == (12 * HOUR, DAY, 60.0)
