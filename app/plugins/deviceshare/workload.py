"""Learning the target workload (the paper's M) from the pods the cache has seen.

Each pod counts once (by uid) with its shape: cpu and memory requests, its GPU request in milli
(:meth:`GPURequest.milli`) and the GPU models its required node affinity or nodeSelector allows on
``node.koordinator.sh/gpu-model``. The window keeps the last ``size`` pods; the :class:`Workload`
snapshot is rebuilt when at least 2 % of the window changed since the last build.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from app.cache.podinfo import PodInfo
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.fragmentation import PodShape, Workload
from app.plugins.deviceshare.request import DeviceRequestError, gpu_request


def required_gpu_models(obj: dict[str, Any] | None) -> tuple[str, ...] | None:
    """GPU models a pod object requires: ``nodeSelector`` or the ``In`` values of required node affinity
    on the gpu-model label (union over terms); None when unconstrained."""
    if not isinstance(obj, dict):
        return None
    spec = obj.get("spec") or {}
    models: set[str] = set()
    selector = spec.get("nodeSelector") or {}
    if isinstance(selector, dict) and selector.get(n.LABEL_GPU_MODEL):
        models.add(str(selector[n.LABEL_GPU_MODEL]))
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms") or [] if isinstance(affinity, dict) else []
    for term in terms if isinstance(terms, list) else []:
        for expr in (term or {}).get("matchExpressions") or []:
            if isinstance(expr, dict) and expr.get("key") == n.LABEL_GPU_MODEL and expr.get("operator") == "In":
                models.update(str(v) for v in expr.get("values") or [])
    return tuple(sorted(models)) if models else None


def pod_shape(pod: PodInfo, obj: dict[str, Any] | None) -> PodShape | None:
    """The pod's shape, or None when its device request is invalid."""
    try:
        req = gpu_request(pod.requests)
    except DeviceRequestError:
        return None
    milli = req.milli() if req is not None else 0
    return PodShape(pod.requests.get("cpu", 0), pod.requests.get("memory", 0), milli, required_gpu_models(obj))


class WorkloadLearner:
    """Sliding window of pod shapes seen, with a lazily rebuilt :class:`Workload`.

    Args:
        size: number of most recent pods kept (>= 1).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._pods: OrderedDict[str, PodShape] = OrderedDict()
        self._counts: dict[PodShape, int] = {}
        self._changes = 0
        self._snapshot: Workload | None = None

    def __len__(self) -> int:
        return len(self._pods)

    def seen(self, uid: str) -> bool:
        """Whether pod ``uid`` is in the window."""
        return uid in self._pods

    def observe(self, uid: str, shape: PodShape) -> None:
        """Count pod ``uid`` once; the oldest pod leaves when the window is full."""
        if not uid or uid in self._pods:
            return
        self._pods[uid] = shape
        self._counts[shape] = self._counts.get(shape, 0) + 1
        self._changes += 1
        if len(self._pods) > self.size:
            _, old = self._pods.popitem(last=False)
            self._counts[old] -= 1
            if self._counts[old] == 0:
                del self._counts[old]

    def workload(self) -> Workload | None:
        """The current workload (None before any pod was seen)."""
        if not self._counts:
            return None
        if self._snapshot is None or self._changes >= max(1, len(self._pods) // 50):
            self._snapshot = Workload.from_counts({s: float(c) for s, c in self._counts.items()})
            self._changes = 0
        return self._snapshot
