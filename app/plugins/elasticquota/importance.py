"""Pod importance as kube-scheduler orders preemption victims (``pkg/scheduler/util.MoreImportantPod``)."""

from __future__ import annotations

from typing import Any

from app.api.timeparse import parse_time
from app.cache.podinfo import PodInfo


def start_time(pod: PodInfo, obj: dict[str, Any] | None, now: float) -> float:
    """``GetPodStartTime``: ``status.startTime`` (epoch seconds), else the PodScheduled time, else ``now``."""
    raw = ((obj or {}).get("status") or {}).get("startTime")
    if isinstance(raw, str) and raw:
        try:
            return parse_time(raw)
        except ValueError:
            pass
    return pod.scheduled_time if pod.scheduled_time is not None else now


def importance_key(pod: PodInfo, obj: dict[str, Any] | None, now: float) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then earlier start time."""
    return (-(pod.priority or 0), start_time(pod, obj, now))
