"""Pod importance as kube-scheduler orders preemption victims (``pkg/scheduler/util.MoreImportantPod``)."""

from __future__ import annotations

from typing import Any

from app.cache.podinfo import PodInfo
from app.framework.preemption import pod_start_time


def start_time(pod: PodInfo, obj: dict[str, Any] | None, now: float) -> float:
    """``GetPodStartTime``: ``status.startTime`` (epoch seconds), else the PodScheduled time, else ``now``."""
    return pod_start_time(pod, obj, now)


def importance_key(pod: PodInfo, obj: dict[str, Any] | None, now: float) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then earlier start time."""
    return (-(pod.priority or 0), start_time(pod, obj, now))
