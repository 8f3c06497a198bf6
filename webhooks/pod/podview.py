"""What the pod webhooks read off a pod object: raw Koordinator QoS and priority class.

"Raw" means without defaults, as upstream's ``GetPodQoSClassRaw`` / ``GetPodPriorityClassRaw``
(``apis/extension/qos_utils.go``, ``priority.go``): the QoS comes only from label
``koordinator.sh/qosClass``; the priority class from label ``koordinator.sh/priority-class`` or
else ``spec.priority``'s band. Both rules live in :mod:`app.api.koordext`; the "with default" forms
are :class:`app.cache.podinfo.PodInfo`'s.
"""

from __future__ import annotations

from typing import Any

from app.api.koordext import PriorityClass, QoSClass, priority_class_raw, qos_class_raw
from app.cache.podinfo import PodError, PodInfo, parse_pod
from webhooks.webhook import AdmissionError


def labels_of(pod: dict[str, Any]) -> dict[str, str]:
    """``metadata.labels`` (empty when absent)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def raw_qos(pod: dict[str, Any]) -> QoSClass:
    """``GetPodQoSClassRaw`` of a pod object (:func:`app.api.koordext.qos_class_raw` of its labels)."""
    return qos_class_raw(labels_of(pod))


def raw_priority_class(pod: dict[str, Any]) -> PriorityClass:
    """``GetPodPriorityClassRaw`` of a pod object (:func:`app.api.koordext.priority_class_raw`)."""
    priority = (pod.get("spec") or {}).get("priority")
    return priority_class_raw(labels_of(pod), priority if isinstance(priority, int) else None)


def decode_pod(obj: Any, what: str = "object") -> tuple[dict[str, Any], PodInfo]:
    """Check that ``obj`` is a Pod and parse it.

    Returns:
        (the object, its :class:`PodInfo`: requests in milli-cores / bytes, QoS and priority class
        with defaults).

    Raises:
        AdmissionError: not a JSON object shaped like a Pod (code 400, as upstream's decoder error).
    """
    if not isinstance(obj, dict):
        raise AdmissionError(f"request.{what}: expected a Pod object")
    if not isinstance(obj.get("metadata") or {}, dict) or not isinstance(obj.get("spec") or {}, dict):
        raise AdmissionError(f"request.{what}: metadata and spec must be objects")
    meta = obj.get("metadata") or {}
    probe = obj if meta.get("name") else {**obj, "metadata": {**meta, "name": meta.get("generateName") or "pod"}}
    try:
        return obj, parse_pod(probe)
    except PodError as exc:
        raise AdmissionError(f"request.{what}: {exc}") from None
