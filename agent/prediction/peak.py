"""Prod reclaimable: how much of the prod pods' requests their predicted peak leaves unused.

Follows upstream ``pkg/koordlet/prediction/peak_predictor.go`` (``ProdReclaimablePredictor``), the minimum of two
predictors, each per resource; units are cpu **milli-cores** and memory **bytes**:

- pod predictor (``podReclaimablePredictor``), over the pods of priority class koord-prod or none: a pod created
  less than the cold start ago (24 h) or terminating/terminated counts nothing; otherwise its peak is
  ``p95(cpu) * (100 + safetyMargin) / 100`` and ``p98(memory) * (100 + safetyMargin) / 100`` of its own model;
  ``reclaimable += request - peak`` when positive, ``unReclaimable += peak``. A pod without a model is an error
  (the whole prediction fails, as upstream's ``AddPod`` returns it). Result:
  ``min(capacity - unReclaimable (>= 0), reclaimable)``.
- priority predictor (``priorityReclaimablePredictor``): ``peak = (p95/p98 of the system model + p95/p98 of the
  koord-prod and no-class models) * (100 + safetyMargin) / 100``; ``reclaimable = max(request of those pods
  (not terminating) - peak, 0)``; result ``min(capacity - peak (>= 0), reclaimable)``.

Raises:
    PredictionError: a model is missing (a new pod before its first training round), or the node's capacity is
    unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent.prediction.server import SYSTEM_ITEM, PredictionError, PredictServer, node_item_uid
from app.api.koordext import PriorityClass

#: Priority classes whose requests prod reclaimable lends (``isPriorityClassReclaimableForProd``).
RECLAIMABLE_CLASSES = (PriorityClass.PROD, PriorityClass.NONE)
#: Percentiles of the peak (``p95`` cpu, ``p98`` memory).
CPU_PERCENTILE = "p95"
MEMORY_PERCENTILE = "p98"


@dataclass(frozen=True, slots=True)
class PodView:
    """What the predictor reads of a pod: uid, key, priority class (with defaults), requests (cpu milli-cores,
    memory bytes), ``created`` (epoch seconds; None counts as in cold start) and ``terminating``
    (deletion requested, Succeeded or Failed)."""

    uid: str
    key: str
    priority_class: PriorityClass
    cpu_request: int
    memory_request: int
    created: float | None
    terminating: bool = False


def _with_margin(value: int, margin_percent: int) -> int:
    """``MultiplyMilliQuant`` / ``MultiplyQuant`` by ``(100 + margin) / 100``, truncated."""
    return int(value * (100 + margin_percent) / 100)


def pod_reclaimable(
    server: PredictServer, pods: Iterable[PodView], capacity: tuple[int, int], now: float
) -> tuple[int, int]:
    """``podReclaimablePredictor``: (cpu milli-cores, memory bytes) the prod pods' own peaks leave.

    Raises:
        PredictionError: a prod pod past its cold start has no model; duplicate pod uids.
    """
    cfg = server.config
    seen: set[str] = set()
    rec_cpu = rec_mem = unrec_cpu = unrec_mem = 0
    for pod in pods:
        if pod.priority_class not in RECLAIMABLE_CLASSES:
            continue
        if pod.uid in seen:
            raise PredictionError(f"pod {pod.key} already exist in the pod reclaimable predictor")
        seen.add(pod.uid)
        if pod.created is None or now - pod.created <= cfg.cold_start_seconds or pod.terminating:
            continue
        result = server.prediction(pod.uid).data
        peak_cpu = _with_margin(result[CPU_PERCENTILE][0], cfg.safety_margin_percent)
        peak_mem = _with_margin(result[MEMORY_PERCENTILE][1], cfg.safety_margin_percent)
        unrec_cpu += peak_cpu
        unrec_mem += peak_mem
        rec_cpu += max(pod.cpu_request - peak_cpu, 0)
        rec_mem += max(pod.memory_request - peak_mem, 0)
    return min(max(capacity[0] - unrec_cpu, 0), rec_cpu), min(max(capacity[1] - unrec_mem, 0), rec_mem)


def priority_reclaimable(server: PredictServer, pods: Iterable[PodView], capacity: tuple[int, int]) -> tuple[int, int]:
    """``priorityReclaimablePredictor``: (cpu milli-cores, memory bytes) the prod tier's and system's peak leave.

    Raises:
        PredictionError: the system or a priority-class model is missing.
    """
    margin = server.config.safety_margin_percent
    req_cpu = req_mem = 0
    for pod in pods:
        if pod.priority_class in RECLAIMABLE_CLASSES and not pod.terminating:
            req_cpu += pod.cpu_request
            req_mem += pod.memory_request
    sys_result = server.prediction(node_item_uid(SYSTEM_ITEM)).data
    peak_cpu, peak_mem = sys_result[CPU_PERCENTILE][0], sys_result[MEMORY_PERCENTILE][1]
    for cls in RECLAIMABLE_CLASSES:
        result = server.prediction(node_item_uid(cls.value)).data
        peak_cpu += result[CPU_PERCENTILE][0]
        peak_mem += result[MEMORY_PERCENTILE][1]
    peak_cpu, peak_mem = _with_margin(peak_cpu, margin), _with_margin(peak_mem, margin)
    rec_cpu, rec_mem = max(req_cpu - peak_cpu, 0), max(req_mem - peak_mem, 0)
    return min(max(capacity[0] - peak_cpu, 0), rec_cpu), min(max(capacity[1] - peak_mem, 0), rec_mem)


def prod_reclaimable(
    server: PredictServer, pods: Iterable[PodView], capacity: tuple[int, int] | None, now: float
) -> tuple[int, int]:
    """``ProdReclaimablePredictor`` (``minPredictor``): the smaller of :func:`pod_reclaimable` and
    :func:`priority_reclaimable`, per resource; ``capacity`` is the node's (cpu milli-cores, memory bytes).

    Raises:
        PredictionError: unknown capacity, or a model missing (see the two predictors).
    """
    if capacity is None:
        raise PredictionError("failed to get the prod reclaimable: node capacity is not set")
    pods = list(pods)
    by_pod = pod_reclaimable(server, pods, capacity, now)
    by_priority = priority_reclaimable(server, pods, capacity)
    return min(by_pod[0], by_priority[0]), min(by_pod[1], by_priority[1])
