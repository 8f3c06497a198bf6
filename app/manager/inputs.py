"""Reading the formula's inputs off cached objects: Node, its pods and its NodeMetric.

Units: cpu milli-cores, memory bytes. Malformed annotations are ignored (logged at debug), as
upstream ignores them (``GetNodeReservationFromAnnotation`` returns nil on error).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from app.api.quantity import QuantityError, parse_resource_list
from app.api.timeparse import parse_time
from app.cache.snapshot import ClusterCache
from app.manager.batch import MetricInput, NodeInput, PodInput

log = logging.getLogger(__name__)

ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_THIRD_PARTY_ALLOCATIONS = "node.koordinator.sh/thirdPartyAllocations"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"


def cpuset_size(text: str) -> int:
    """Number of cpus in a Linux cpuset list (``"0-3,8"`` -> 5).

    Raises:
        ValueError: malformed list.
    """
    count = 0
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        count += (int(hi) - int(lo) + 1) if hi else 1
    return count


def _resources(raw: Any) -> dict[str, int]:
    try:
        return parse_resource_list(raw) if isinstance(raw, dict) else {}
    except QuantityError:
        return {}


def node_reservation(annotations: dict[str, str]) -> dict[str, int]:
    """Annotation ``node.koordinator.sh/reservation``: ``resources``, cpu overridden by ``reservedCPUs``."""
    raw = annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return {}
    try:
        parsed = orjson.loads(raw)
        out = _resources(parsed.get("resources"))
        if parsed.get("reservedCPUs"):
            out["cpu"] = cpuset_size(str(parsed["reservedCPUs"])) * 1000
        return out
    except (orjson.JSONDecodeError, ValueError, AttributeError) as exc:
        log.debug("ignoring malformed %s: %s", ANNOTATION_NODE_RESERVATION, exc)
        return {}


def third_party_batch(annotations: dict[str, str]) -> dict[str, int]:
    """Sum of the koord-batch allocations in annotation ``node.koordinator.sh/thirdPartyAllocations``."""
    raw = annotations.get(ANNOTATION_THIRD_PARTY_ALLOCATIONS)
    if not raw:
        return {}
    out: dict[str, int] = {}
    try:
        for alloc in orjson.loads(raw).get("allocations") or []:
            if alloc.get("priority") == "koord-batch":
                for k, v in _resources(alloc.get("resources")).items():
                    out[k] = out.get(k, 0) + v
    except (orjson.JSONDecodeError, AttributeError) as exc:
        log.debug("ignoring malformed %s: %s", ANNOTATION_THIRD_PARTY_ALLOCATIONS, exc)
        return {}
    return out


def node_input(obj: dict[str, Any], allocatable: dict[str, int], annotations: dict[str, str]) -> NodeInput:
    """The formula's view of a Node (capacity falls back to allocatable when the node reports none)."""
    capacity = _resources((obj.get("status") or {}).get("capacity"))
    for r in ("cpu", "memory"):
        capacity.setdefault(r, allocatable.get(r, 0))
    ratio: float | None = None
    if annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO):
        try:
            ratio = float(annotations[ANNOTATION_CPU_NORMALIZATION_RATIO])
        except ValueError:
            ratio = None
    return NodeInput(capacity, allocatable, node_reservation(annotations), third_party_batch(annotations), ratio)


def pod_inputs(cache: ClusterCache, node: str) -> list[PodInput]:
    """The cached pods on ``node`` (assumed ones included)."""
    state = cache.nodes.get(node)
    if state is None:
        return []
    out = []
    for uid in state.pods:
        pod = cache.pods.get(uid)
        if pod is None:
            continue
        phase = pod.phase or "Pending"
        requests = {"cpu": pod.requests.get("cpu", 0), "memory": pod.requests.get("memory", 0)}
        out.append(PodInput(pod.key, phase, pod.priority_class, pod.qos, requests))
    return out


def metric_input(metric: dict[str, Any] | None) -> MetricInput | None:
    """The formulas' view of a NodeMetric (batch and mid); None when there is none. Malformed parts count as
    absent (a malformed ``prodReclaimableMetric`` counts as 0 reclaimable, as a missing one)."""
    if metric is None:
        return None
    status = metric.get("status") or {}
    try:
        update_time = parse_time(status["updateTime"]) if status.get("updateTime") else None
    except ValueError:
        update_time = None
    system = _resources((((status.get("nodeMetric") or {}).get("systemUsage")) or {}).get("resources"))
    pods: dict[str, tuple[str, dict[str, int]]] = {}
    for pm in status.get("podsMetric") or []:
        if isinstance(pm, dict):
            key = f"{pm.get('namespace') or ''}/{pm.get('name') or ''}"
            pods[key] = (str(pm.get("priority") or ""), _resources((pm.get("podUsage") or {}).get("resources")))
    node_usage: dict[str, int] | None = _resources(
        (((status.get("nodeMetric") or {}).get("nodeUsage")) or {}).get("resources")
    )
    if not node_usage or "cpu" not in node_usage or "memory" not in node_usage:
        node_usage = None  # ``IsValidNodeUsage``: no complete node usage
    prod_reclaimable = None
    prm = status.get("prodReclaimableMetric")
    if isinstance(prm, dict) and isinstance(prm.get("resource"), dict) and prm["resource"].get("resources"):
        prod_reclaimable = _resources(prm["resource"]["resources"])
    apps = tuple(
        (str(a.get("priority") or ""), _resources((a.get("usage") or {}).get("resources")))
        for a in status.get("hostApplicationMetric") or []
        if isinstance(a, dict)
    )
    return MetricInput(update_time, system, pods, apps, node_usage, prod_reclaimable)
