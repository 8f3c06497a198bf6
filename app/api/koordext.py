"""Koordinator's well-known names and the pod priority / QoS resolution rules.

Mirrors ``apis/extension/priority.go``, ``priority_utils.go``, ``qos.go``, ``qos_utils.go`` and
``resource.go`` of koordinator-sh/koordinator.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

# Labels, annotations and resource names exactly as upstream spells them.
LABEL_POD_QOS = "koordinator.sh/qosClass"
LABEL_POD_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_POD_PRIORITY = "koordinator.sh/priority"
ANNOTATION_CUSTOM_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"
ANNOTATION_NODE_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
)
ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"
)
#: The batch requests and limits of each container, JSON (``AnnotationExtendedResourceSpec``).
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"


class QoSClass(StrEnum):
    """Koordinator QoS classes (``apis/extension/qos.go``); NONE is the empty string."""

    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    SYSTEM = "SYSTEM"
    NONE = ""


class PriorityClass(StrEnum):
    """Koordinator priority classes (``apis/extension/priority.go``); NONE is the empty string."""

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""


#: Inclusive priority value bands of each class.
PRIORITY_BANDS: tuple[tuple[PriorityClass, int, int], ...] = (
    (PriorityClass.PROD, 9000, 9999),
    (PriorityClass.MID, 7000, 7999),
    (PriorityClass.BATCH, 5000, 5999),
    (PriorityClass.FREE, 3000, 3999),
)

#: ``ResourceNameMap``: priority class -> native resource -> the extended resource it asks for instead.
RESOURCE_NAME_MAP: Mapping[PriorityClass, Mapping[str, str]] = MappingProxyType(
    {
        PriorityClass.BATCH: MappingProxyType({"cpu": BATCH_CPU, "memory": BATCH_MEMORY}),
        PriorityClass.MID: MappingProxyType({"cpu": MID_CPU, "memory": MID_MEMORY}),
    }
)


def qos_by_name(name: str | None) -> QoSClass:
    """A QoS class from its name; unknown names give ``QoSClass.NONE`` (``GetPodQoSClassByName``)."""
    try:
        return QoSClass(name) if name else QoSClass.NONE
    except ValueError:
        return QoSClass.NONE


def priority_class_by_name(name: str | None) -> PriorityClass:
    """A priority class from its name; unknown names give NONE (``GetPodPriorityClassByName``)."""
    try:
        return PriorityClass(name) if name else PriorityClass.NONE
    except ValueError:
        return PriorityClass.NONE


def priority_class_by_value(priority: int | None) -> PriorityClass:
    """The band that contains ``priority``; NONE outside every band (``getPriorityClassByPriority``)."""
    if priority is None:
        return PriorityClass.NONE
    for cls, low, high in PRIORITY_BANDS:
        if low <= priority <= high:
            return cls
    return PriorityClass.NONE


def qos_class_raw(labels: Mapping[str, str]) -> QoSClass:
    """``GetPodQoSClassRaw``: the ``koordinator.sh/qosClass`` label's class; NONE when absent or unknown."""
    return qos_by_name(labels.get(LABEL_POD_QOS))


def priority_class_raw(labels: Mapping[str, str], priority: int | None) -> PriorityClass:
    """``GetPodPriorityClassRaw``: the ``koordinator.sh/priority-class`` label when present (by name
    only, NONE when unknown), else the band of ``spec.priority`` (NONE outside every band or unset)."""
    if LABEL_POD_PRIORITY_CLASS in labels:
        return priority_class_by_name(labels[LABEL_POD_PRIORITY_CLASS])
    return priority_class_by_value(priority)


def qos_from_kube_qos(kube_qos: str) -> QoSClass:
    """Guaranteed -> LSR, Burstable -> LS, BestEffort -> BE (``GetPodQoSClassWithKubeQoS``)."""
    return {"Guaranteed": QoSClass.LSR, "Burstable": QoSClass.LS, "BestEffort": QoSClass.BE}.get(
        kube_qos, QoSClass.NONE
    )


def priority_class_from_qos(qos: QoSClass) -> PriorityClass:
    """SYSTEM/LSE/LSR/LS -> prod, BE -> batch, otherwise none (``GetPodPriorityClassWithQoS``)."""
    if qos in (QoSClass.SYSTEM, QoSClass.LSE, QoSClass.LSR, QoSClass.LS):
        return PriorityClass.PROD
    if qos == QoSClass.BE:
        return PriorityClass.BATCH
    return PriorityClass.NONE


def translate_resource_name(priority_class: PriorityClass, resource: str) -> str:
    """The resource a pod of ``priority_class`` really requests for ``resource``.

    batch: cpu -> kubernetes.io/batch-cpu, memory -> kubernetes.io/batch-memory; mid likewise with
    mid-*; everything else unchanged (``TranslateResourceNameByPriorityClass``, over :data:`RESOURCE_NAME_MAP`).
    """
    return RESOURCE_NAME_MAP.get(priority_class, {}).get(resource, resource)


def koordinator_classes(
    labels: Mapping[str, str], priority: int | None, kube_qos: str
) -> tuple[QoSClass, PriorityClass]:
    """A pod's Koordinator QoS class and priority class, with upstream's defaults.

    QoS: the ``koordinator.sh/qosClass`` label, else derived from the Kubernetes QoS class
    ``kube_qos`` (``GetPodQoSClassWithDefault``). Priority class: :func:`priority_class_raw`, else
    from the QoS class (``GetPodPriorityClassWithDefault``). ``priority`` is ``spec.priority``.
    """
    qos = qos_class_raw(labels)
    if qos == QoSClass.NONE:
        qos = qos_from_kube_qos(kube_qos)
    pclass = priority_class_raw(labels, priority)
    if pclass == PriorityClass.NONE:
        pclass = priority_class_from_qos(qos)
    return qos, pclass
