"""The default estimator: how much a pod will use, and the node allocatable load is judged against.

Mirrors ``pkg/scheduler/plugins/loadaware/estimator/default_estimator.go``.
"""

from __future__ import annotations

import logging
import re

import orjson

from app.api.koordext import (
    ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS,
    ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED,
    ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED,
    ANNOTATION_NODE_RAW_ALLOCATABLE,
    BATCH_CPU,
    BATCH_MEMORY,
    translate_resource_name,
)
from app.api.quantity import QuantityError, parse_resource_list
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo
from app.plugins.loadaware.args import LoadAwareSchedulingArgs

log = logging.getLogger(__name__)

#: Estimate for a pod that requests no cpu: 250 milli-cores.
DEFAULT_MILLI_CPU_REQUEST = 250
#: Estimate for a pod that requests no memory: 200 MiB.
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def _go_round(x: float) -> int:
    """Go's ``math.Round`` for non-negative inputs: half away from zero."""
    whole = int(x)
    return whole + 1 if x - whole >= 0.5 else whole


def custom_scaling_factors(pod: PodInfo) -> dict[str, int] | None:
    """Factors from the pod annotation ``scheduling.koordinator.sh/load-estimated-scaling-factors``.

    Returns None when the annotation is absent or invalid.
    """
    raw = pod.annotations.get(ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS)
    if not raw:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in data.values()):
        return None
    return {str(k): int(v) for k, v in data.items()}


_INT64 = re.compile(r"[+-]?[0-9]+")


def custom_seconds(pod: PodInfo, annotation: str) -> int:
    """An integer seconds annotation as written (0 and negatives included), -1 when absent or not a
    base-10 int64 (``GetCustomEstimatedSeconds*`` with ``strconv.ParseInt(s, 10, 64)``)."""
    raw = pod.annotations.get(annotation)
    if not raw or _INT64.fullmatch(raw) is None:
        return -1
    value = int(raw)
    return value if -(2**63) <= value < 2**63 else -1


def estimate_resource(pod: PodInfo, real_name: str, factor: int) -> int:
    """Estimated usage of one resource (cpu milli-cores, base units otherwise).

    ``max(limit, request)`` scaled by ``factor`` percent and rounded half away from zero, capped at
    the limit when one is set; 250m cpu / 200Mi memory (also for batch-cpu/batch-memory) when
    neither is set (``estimatedUsedByResource``).
    """
    limit = pod.limits.get(real_name, 0)
    request = pod.requests.get(real_name, 0)
    quantity = limit if limit > request else request
    if quantity == 0:
        if real_name in ("cpu", BATCH_CPU):
            return DEFAULT_MILLI_CPU_REQUEST
        if real_name in ("memory", BATCH_MEMORY):
            return DEFAULT_MEMORY_REQUEST
        return 0
    estimated = _go_round(quantity * factor / 100)
    if limit > 0 and estimated > limit:
        estimated = limit
    return estimated


def estimate_pod(pod: PodInfo, args: LoadAwareSchedulingArgs) -> dict[str, int]:
    """Estimated usage per scaling-factor resource (``DefaultEstimator.EstimatePod``).

    With ``allowCustomizeEstimation`` the pod annotation's factors win and missing keys come from
    the args. batch/mid pods are estimated from their ``kubernetes.io/batch-*`` / ``mid-*`` requests.
    """
    factors = args.estimated_scaling_factors
    if args.allow_customize_estimation:
        custom = custom_scaling_factors(pod)
        if custom:
            factors = {**factors, **custom}
    return {
        name: estimate_resource(pod, translate_resource_name(pod.priority_class, name), factor)
        for name, factor in factors.items()
    }


def estimation_deadline(pod: PodInfo, timestamp: float, args: LoadAwareSchedulingArgs) -> float | None:
    """Until when an assigned pod is estimated regardless of reported usage (epoch s), or None.

    Mirrors ``shouldEstimatePodDeadline`` (``pod_assign_cache.go``): the Initialized-based window
    wins when the pod is initialized, else the PodScheduled-based window.
    """
    after_scheduled = after_initialized = -1
    if args.allow_customize_estimation:
        after_scheduled = custom_seconds(pod, ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED)
        after_initialized = custom_seconds(pod, ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED)
    if args.estimated_seconds_after_pod_scheduled is not None and after_scheduled < 0:
        after_scheduled = args.estimated_seconds_after_pod_scheduled
    if args.estimated_seconds_after_initialized is not None and after_initialized < 0:
        after_initialized = args.estimated_seconds_after_initialized
    if after_initialized > 0 and pod.initialized_time is not None:
        return pod.initialized_time + after_initialized
    if after_scheduled > 0:
        return timestamp + after_scheduled
    return None


def node_allocatable(node: NodeState) -> dict[str, int]:
    """``status.allocatable`` with values from ``node.koordinator.sh/raw-allocatable`` overriding (``EstimateNode``).

    An unparsable annotation is ignored (allocatable as is).
    """
    raw = node.annotations.get(ANNOTATION_NODE_RAW_ALLOCATABLE)
    if not raw:
        return node.allocatable
    try:
        overrides = parse_resource_list(orjson.loads(raw), field=ANNOTATION_NODE_RAW_ALLOCATABLE)
    except (orjson.JSONDecodeError, QuantityError) as exc:
        log.debug("node %s: ignoring raw-allocatable annotation: %s", node.name, exc)
        return node.allocatable
    if not overrides:
        return node.allocatable
    return {**node.allocatable, **overrides}
