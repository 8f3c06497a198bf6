"""The predict server: one decaying-histogram model per pod, the node, each priority class and the system.

Follows upstream ``pkg/koordlet/prediction/predict_server.go``, ``prediction.go`` and ``config.go``:

- :class:`PredictionConfig` holds upstream's defaults: checkpoints in ``/prediction-checkpoints``, cold start
  24 h, safety margin 10 %, memory half-life 24 h, cpu half-life 12 h, training every minute, a model
  unseen for 30 minutes is dropped, a model is checkpointed at most every 10 minutes, at most 12 per round.
- :meth:`PredictServer.train` (``training``), once per training interval: each pod's model gets one sample of
  its usage (the p90 of the last interval, in cores and bytes), each priority class's model on the node
  (``__node-koord-prod__`` ...; ``__node-__`` for pods of no class) the sum over its pods (0 when it has
  none), the node's model (``__node__``) the node's usage, and the system model (``__node-sys__``) the node's
  usage minus all pods' (floored at 0). Every sample weighs 1 at its time.
- :meth:`PredictServer.prediction` answers ``p60``, ``p90``, ``p95``, ``p98`` and ``max`` of a model as
  ``(cpu milli-cores, memory bytes)``, truncated to integers as upstream's ``int64`` conversions.
- :meth:`PredictServer.gc` drops models not updated for ``model_expiration`` and their checkpoints;
  :meth:`PredictServer.checkpoint` saves the models checkpointed longest ago (at most ``checkpoint_max_per_step``
  whose last checkpoint is older than ``checkpoint_interval``); :meth:`PredictServer.restore` loads the
  checkpoints of known models at start and removes the rest.

Raises:
    PredictionError: a model that does not exist, or bad configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent.prediction.checkpoint import CheckpointError, FileCheckpointer, ModelCheckpoint
from agent.prediction.histogram import (
    DecayingHistogram,
    HistogramError,
    cpu_histogram,
    format_timestamp,
    memory_histogram,
    parse_timestamp,
)
from app.api.koordext import PriorityClass

log = logging.getLogger("agent.prediction")

#: ``DefaultNodeID``, ``DefaultNodeItemIDFmt``, ``SystemItemID`` of ``prediction.go``.
NODE_UID = "__node__"
SYSTEM_ITEM = "sys"
#: ``extension.KnownPriorityClasses``.
KNOWN_PRIORITY_CLASSES = (
    PriorityClass.PROD,
    PriorityClass.MID,
    PriorityClass.BATCH,
    PriorityClass.FREE,
    PriorityClass.NONE,
)
#: The percentiles a prediction answers (``GetPrediction``).
PERCENTILES = {"p60": 0.6, "p90": 0.9, "p95": 0.95, "p98": 0.98, "max": 1.0}


def node_item_uid(item: str) -> str:
    """``__node-<item>__``: the model of one item of the node (a priority class, ``sys``)."""
    return f"__node-{item}__"


class PredictionError(LookupError):
    """No prediction: the model is unknown (never trained, or dropped), or the configuration is invalid."""


@dataclass(frozen=True, slots=True)
class PredictionConfig:
    """``prediction.Config`` with upstream's defaults; durations in seconds.

    Raises:
        PredictionError: a half-life or interval that is not > 0, a negative cold start or safety margin.
    """

    checkpoint_dir: Path = Path("/prediction-checkpoints")
    cold_start_seconds: float = 24 * 3600.0
    safety_margin_percent: int = 10
    memory_half_life: float = 24 * 3600.0
    cpu_half_life: float = 12 * 3600.0
    training_interval: float = 60.0
    model_expiration: float = 30 * 60.0
    checkpoint_interval: float = 10 * 60.0
    checkpoint_max_per_step: int = 12

    def __post_init__(self) -> None:
        for name in ("memory_half_life", "cpu_half_life", "training_interval", "model_expiration"):
            if not getattr(self, name) > 0:
                raise PredictionError(f"prediction config {name} must be > 0, got {getattr(self, name)}")
        if self.cold_start_seconds < 0 or self.safety_margin_percent < 0 or self.checkpoint_max_per_step < 0:
            raise PredictionError("prediction config: cold start, safety margin and checkpoints per step must be >= 0")


@dataclass(slots=True)
class Model:
    """``PredictModel``: the cpu (cores) and memory (bytes) histograms, when last updated and checkpointed."""

    cpu: DecayingHistogram
    memory: DecayingHistogram
    last_updated: float = 0.0
    last_checkpointed: float = 0.0


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One pod's sample for a training round: uid, priority class (with defaults), cpu cores, memory bytes."""

    uid: str
    priority_class: PriorityClass
    cpu: float
    memory: float


@dataclass(slots=True)
class Prediction:
    """``Result``: for each of ``p60``/``p90``/``p95``/``p98``/``max``, (cpu milli-cores, memory bytes)."""

    data: dict[str, tuple[int, int]] = field(default_factory=dict)


class PredictServer:
    """Models by UID, trained from usage samples and kept across restarts by checkpoints (module docstring).

    Args:
        config: :class:`PredictionConfig`.
    """

    def __init__(self, config: PredictionConfig | None = None) -> None:
        self.config = config or PredictionConfig()
        self.models: dict[str, Model] = {}
        self.checkpointer = FileCheckpointer(self.config.checkpoint_dir)
        #: True after the first training round (``HasSynced``).
        self.synced = False

    def _new_model(self) -> Model:
        return Model(cpu_histogram(self.config.cpu_half_life), memory_histogram(self.config.memory_half_life))

    def update_model(self, uid: str, cpu: float, memory: float, now: float) -> None:
        """Add one sample (cpu cores, memory bytes, at ``now`` epoch seconds) to the model of ``uid``.

        Raises:
            HistogramError: a negative or non-finite value is refused before anything changes.
        """
        if cpu < 0 or memory < 0:
            raise HistogramError(f"model {uid}: usage must be >= 0, got cpu={cpu} memory={memory}")
        model = self.models.get(uid)
        if model is None:
            model = self.models[uid] = self._new_model()
        model.cpu.add_sample(cpu, 1.0, now)
        model.memory.add_sample(memory, 1.0, now)
        model.last_updated = now

    def train(self, pods: Iterable[PodUsage], node: tuple[float, float] | None, now: float) -> None:
        """One training round (``training``): pods, priority classes, the node and the system.

        ``node`` is the node's (cpu cores, memory bytes), None when unknown (the node and its items are then
        left alone, as upstream skips the node model; the system then counts the pods' usage as 0).
        """
        per_class: dict[str, tuple[float, float]] = {}
        all_cpu = all_memory = 0.0
        seen = False
        for pod in pods:
            if pod.cpu < 0 or pod.memory < 0:
                log.warning("prediction: pod %s has negative usage; skipped this round", pod.uid)
                continue
            self.update_model(pod.uid, pod.cpu, pod.memory, now)
            c, m = per_class.get(pod.priority_class.value, (0.0, 0.0))
            per_class[pod.priority_class.value] = (c + pod.cpu, m + pod.memory)
            all_cpu += pod.cpu
            all_memory += pod.memory
            seen = True
        if node is not None:
            self.update_model(NODE_UID, max(node[0], 0.0), max(node[1], 0.0), now)
        for cls in KNOWN_PRIORITY_CLASSES:
            c, m = per_class.get(cls.value, (0.0, 0.0))
            self.update_model(node_item_uid(cls.value), c, m, now)
        node_cpu, node_memory = node if node is not None else (0.0, 0.0)
        if seen:
            node_cpu, node_memory = max(node_cpu - all_cpu, 0.0), max(node_memory - all_memory, 0.0)
        self.update_model(node_item_uid(SYSTEM_ITEM), max(node_cpu, 0.0), max(node_memory, 0.0), now)
        self.synced = True

    def prediction(self, uid: str) -> Prediction:
        """The percentiles of the model of ``uid`` (``GetPrediction``).

        Raises:
            PredictionError: no such model.
        """
        model = self.models.get(uid)
        if model is None:
            raise PredictionError(f"UID {uid} not found in predict server")
        return Prediction(
            {
                name: (int(model.cpu.percentile(p) * 1000.0), int(model.memory.percentile(p)))
                for name, p in PERCENTILES.items()
            }
        )

    # ------------------------------------------------------------------ lifecycle
    def gc(self, now: float) -> list[str]:
        """Drop the models not updated for ``model_expiration`` seconds and their checkpoints; their UIDs."""
        if not self.synced:
            return []
        gone = [uid for uid, m in self.models.items() if now - m.last_updated > self.config.model_expiration]
        for uid in gone:
            del self.models[uid]
            try:
                self.checkpointer.remove(uid)
            except (OSError, CheckpointError) as exc:
                log.error("removing the prediction checkpoint of %s failed: %s", uid, exc)
        return gone

    def checkpoint(self, now: float) -> int:
        """Save the models whose checkpoint is oldest (``doCheckpoint``); the number saved."""
        if not self.synced:
            return 0
        saved = 0
        for uid, model in sorted(self.models.items(), key=lambda kv: kv[1].last_checkpointed):
            if saved >= self.config.checkpoint_max_per_step:
                break
            if now - model.last_checkpointed < self.config.checkpoint_interval:
                break
            ckpt = ModelCheckpoint(uid=uid, cpu=model.cpu.save(), memory=model.memory.save(), last_updated=now)
            try:
                self.checkpointer.save(ckpt, timestamp=format_timestamp(now))
            except (OSError, CheckpointError) as exc:
                log.error("saving the prediction checkpoint of %s failed: %s", uid, exc)
            model.last_checkpointed = now
            saved += 1
        return saved

    def restore(self, pod_uids: Iterable[str]) -> tuple[list[str], list[str]]:
        """Load the checkpoints of known models (``restoreModels``); remove the others from disk.

        Known: the given pod uids, the node, the system and every priority class. A checkpoint whose
        histograms do not load is removed too. Returns (restored UIDs, removed UIDs).
        """
        known = set(pod_uids) | {NODE_UID, node_item_uid(SYSTEM_ITEM)}
        known |= {node_item_uid(c.value) for c in KNOWN_PRIORITY_CLASSES}
        restored: list[str] = []
        removed: list[str] = []
        for ckpt, stamp in self.checkpointer.restore():
            model = self._new_model()
            problem = ckpt.error
            if problem is None and ckpt.uid in known:
                try:
                    model.cpu.load(ckpt.cpu)
                    model.memory.load(ckpt.memory)
                    model.last_updated = parse_timestamp(stamp) if stamp else 0.0
                except HistogramError as exc:
                    problem = str(exc)
            if problem is not None or ckpt.uid not in known:
                if problem:
                    log.error("prediction checkpoint %s is unusable (%s); removing it", ckpt.uid, problem)
                try:
                    self.checkpointer.remove(ckpt.uid)
                except (OSError, CheckpointError) as exc:
                    log.error("removing the prediction checkpoint of %s failed: %s", ckpt.uid, exc)
                removed.append(ckpt.uid)
                continue
            self.models[ckpt.uid] = model
            restored.append(ckpt.uid)
            log.info("restored the prediction model of %s (last updated %s)", ckpt.uid, stamp or "never")
        return restored, removed
