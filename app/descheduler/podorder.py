"""The order in which an over-utilised node's pods are evicted (``pkg/descheduler/utils/sorter/pod.go``,
``scorer.go``; ``sortPodsOnOneOverloadedNode`` in ``utilization_util.go``).

Ascending by: Koordinator priority class (free < batch < mid < prod < none), ``spec.priority``,
Kubernetes QoS (BestEffort < Burstable < Guaranteed), Koordinator QoS (BE < LS < LSR < LSE = SYSTEM <
none), ``controller.kubernetes.io/pod-deletion-cost``, ``scheduling.koordinator.sh/eviction-cost``;
then descending usage score against the excess over the high threshold (only over-used resources
weigh); then newest first.
"""

from __future__ import annotations

from app.api.koordext import PriorityClass, QoSClass
from app.api.timeparse import parse_time
from app.descheduler.model import PodView

ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"

PRIORITY_CLASS_ORDER = {
    PriorityClass.NONE: 5,
    PriorityClass.PROD: 4,
    PriorityClass.MID: 3,
    PriorityClass.BATCH: 2,
    PriorityClass.FREE: 1,
}
QOS_ORDER = {QoSClass.NONE: 5, QoSClass.SYSTEM: 4, QoSClass.LSE: 4, QoSClass.LSR: 3, QoSClass.LS: 2, QoSClass.BE: 1}
KUBE_QOS_ORDER = {"Guaranteed": 3, "Burstable": 2, "BestEffort": 1}


def _cost(annotations: dict[str, str], key: str) -> int:
    try:
        return int(annotations.get(key, "0"))
    except ValueError:
        return 0


def usage_score(pod_usage: dict[str, int], excess: dict[str, int], weights: dict[str, int]) -> float:
    """``ResourceUsageScorerPod``: weighted mean over the pod's resources of ``ratio`` (usage/excess) when
    below 1, else ``1/ratio + 1`` — a pod just big enough to clear the excess scores highest."""
    score, weight_sum = 0.0, 0
    for r, used in pod_usage.items():
        w = weights.get(r, 0)
        cap = excess.get(r, 0)
        if cap == 0:
            s = 0.0
        else:
            ratio = used / cap
            s = 1 / ratio + 1 if ratio >= 1 else ratio
        score += s * w
        weight_sum += w
    return score / weight_sum if weight_sum else 0.0


def _created(pod: PodView) -> float:
    try:
        return parse_time((pod.obj.get("metadata") or {}).get("creationTimestamp"))
    except ValueError:
        return 0.0


def sort_pods(
    pods: list[PodView],
    pod_metrics: dict[str, dict[str, int]],
    excess: dict[str, int],
    weights: dict[str, int],
) -> list[PodView]:
    """``pods`` in eviction order (stable; see the module docstring). ``excess`` maps each over-used
    resource to usage minus high threshold, ``weights`` its weight (others weigh 0); pods without a
    metric come after those with one at the usage step."""
    over_weights = {r: weights.get(r, 0) for r in excess}

    def key(pod: PodView) -> tuple[object, ...]:
        info = pod.info
        metric = pod_metrics.get(pod.key)
        score = usage_score(metric, excess, over_weights) if metric is not None else 0.0
        return (
            PRIORITY_CLASS_ORDER[info.priority_class],
            info.priority or 0,
            KUBE_QOS_ORDER.get(info.kube_qos, 0),
            QOS_ORDER[info.qos],
            _cost(info.annotations, ANNOTATION_DELETION_COST),
            _cost(info.annotations, ANNOTATION_EVICTION_COST),
            metric is None,
            -score,
            -_created(pod),
        )

    return sorted(pods, key=key)
