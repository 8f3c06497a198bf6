"""The agent's prediction round: samples from the metric cache, model upkeep, and the prod reclaimable.

Follows upstream ``predict_server.go`` ``Run`` and ``metricServer`` (``prediction.go``) and the NodeMetric
reporter's use of the ``ProdReclaimablePredictor`` (``states_nodemetric.go``):

- the agent calls it only once its states have synced (upstream's ``WaitForCacheSync``): at the first round the
  models of the known pods, the node and its items are restored from the checkpoint
  directory, every other checkpoint is removed;
- every ``training_interval`` (60 s) each active pod with samples gives the p90 of its cpu (cores) and memory
  (bytes) over the last interval, the node likewise (:meth:`PredictionLoop.tick`);
- every minute expired models are dropped and the oldest models checkpointed;
- :meth:`PredictionLoop.prod_reclaimable` is what the NodeMetric reports as ``prodReclaimableMetric`` (None until
  the first round, or when a model is missing).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from agent.metriccache import MetricCache
from agent.prediction.histogram import HistogramError
from agent.prediction.peak import PodView, prod_reclaimable
from agent.prediction.server import PodUsage, PredictionConfig, PredictionError, PredictServer
from agent.qos.context import NODE_CPU, NODE_MEMORY, pod_cpu_key, pod_memory_key
from agent.states.pods import PodMeta

log = logging.getLogger("agent.prediction")

#: upkeep (gc, checkpoint) period, seconds (upstream ``wait.Until(..., time.Minute)``).
UPKEEP_SECONDS = 60.0


def pod_view(pod: PodMeta) -> PodView:
    """The predictor's view of a pod: cpu/memory requests, creation time, terminating when deleted or done."""
    return PodView(
        uid=pod.uid,
        key=pod.key,
        priority_class=pod.priority_class,
        cpu_request=max(pod.requests.get("cpu", 0), 0),
        memory_request=max(pod.requests.get("memory", 0), 0),
        created=pod.created,
        terminating=pod.deleting or not pod.active,
    )


class PredictionLoop:
    """Runs the :class:`~agent.prediction.server.PredictServer` inside the agent's ticks.

    Args:
        config: prediction settings (checkpoint directory, half-lives, cold start, margin).
    """

    def __init__(self, config: PredictionConfig) -> None:
        self.server = PredictServer(config)
        self.restored = False
        self._trained_at = -1e18
        self._upkeep_at = -1e18

    def _p90(self, cache: MetricCache, key: str, now: float) -> float | None:
        agg = cache.aggregate(key, now - self.server.config.training_interval, now, "p90")
        return None if agg is None else agg.value

    def tick(self, cache: MetricCache, pods: Iterable[PodMeta], now: float) -> bool:
        """Train when the interval passed, and do the upkeep when due; True when a training round ran."""
        pods = list(pods)
        if not self.restored:
            self.restored = True
            try:
                restored, removed = self.server.restore(p.uid for p in pods)
            except OSError as exc:  # an unreadable directory: start without history rather than not at all
                log.error("prediction: checkpoints not restored from %s: %s", self.server.config.checkpoint_dir, exc)
                restored, removed = [], []
            if restored or removed:
                log.info("prediction: %d models restored, %d stale checkpoints removed", len(restored), len(removed))
        trained = False
        if now - self._trained_at >= self.server.config.training_interval:
            self._trained_at = now
            samples = []
            for pod in pods:
                if not pod.active:
                    continue
                cpu = self._p90(cache, pod_cpu_key(pod.uid), now)
                memory = self._p90(cache, pod_memory_key(pod.uid), now)
                if cpu is None or memory is None:
                    log.debug("prediction: pod %s has no samples this round", pod.key)
                    continue
                samples.append(PodUsage(pod.uid, pod.priority_class, cpu, memory))
            node_cpu, node_memory = self._p90(cache, NODE_CPU, now), self._p90(cache, NODE_MEMORY, now)
            node = None if node_cpu is None or node_memory is None else (node_cpu, node_memory)
            try:
                self.server.train(samples, node, now)
                trained = True
            except HistogramError as exc:
                log.warning("prediction: training round skipped: %s", exc)
        if now - self._upkeep_at >= UPKEEP_SECONDS:
            self._upkeep_at = now
            self.server.gc(now)
            self.server.checkpoint(now)
        return trained

    def prod_reclaimable(
        self, pods: Iterable[PodMeta], capacity: tuple[int, int], now: float
    ) -> tuple[int, int] | None:
        """(cpu milli-cores, memory bytes) prod pods leave below their predicted peak; None when not predictable."""
        if not self.server.synced:
            return None
        try:
            return prod_reclaimable(self.server, [pod_view(p) for p in pods], capacity, now)
        except PredictionError as exc:
            log.debug("prediction: no prod reclaimable this round: %s", exc)
            return None
