"""Typed shapes of the objects the admission webhooks review, checked at the edge before any rule runs.

The API server decodes every object into Go structs before it stores it, so a field of the wrong
JSON type never reaches upstream's webhooks. Here the rules read JSON-shaped dicts; this module is
the one place that holds them to the same types first: :func:`review_errors` checks ``object`` and
``oldObject`` of an AdmissionRequest against the shape of the webhook's kind (Pod, ElasticQuota,
Reservation) and returns the wrong types as ``field.Error`` s (:mod:`webhooks.fielderrors`), e.g.
``metadata: Invalid value: []: must be an object``. The route answers them ``allowed: false`` with
code 400 (:mod:`app.server.webhook_routes`) and the handler never runs.

The shapes are exact where the rules read (names, labels, annotations, owner references, priority,
containers and their resources, quota min/max, a Reservation's template, owners, ttl, expires and
allocate policy) and permissive elsewhere: unknown fields (``managedFields``, ``volumes``, anything a
newer API adds) pass unchecked, and ``null`` is accepted wherever Go accepts it (every field here,
as ``encoding/json`` leaves the zero value). Types follow Go's decoder: a string field takes only a
JSON string, an integer field only a JSON integer in its Go type's range (``spec.priority`` is an
int32), a boolean only ``true``/``false``, and a ``resource.Quantity`` a string or a number (its
syntax is the rules' to check, with their own messages).

Upstream types: ``k8s.io/api/core/v1`` (Pod), ``sigs.k8s.io/scheduler-plugins`` ``v1alpha1.ElasticQuota``,
koordinator ``apis/scheduling/v1alpha1`` ``Reservation``.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from webhooks.admission import AdmissionRequest
from webhooks.fielderrors import FieldError, aggregate, invalid

#: At most this many field errors are listed in one answer; the rest are counted.
MAX_ERRORS = 20

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _quantity(value: Any) -> Any:
    """``resource.Quantity``'s JSON: a string or a number (``null`` is the zero quantity)."""
    if value is None or (isinstance(value, str | int | float) and not isinstance(value, bool)):
        return value
    raise PydanticCustomError("quantity_type", "must be a quantity (a string or a number)")


def _int32(value: int) -> int:
    if not INT32_MIN <= value <= INT32_MAX:
        raise PydanticCustomError("int32_range", "must be a 32-bit integer")
    return value


def _int64(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise PydanticCustomError("int64_range", "must be a 64-bit integer")
    return value


#: A ``resource.Quantity``.
Quantity = Annotated[Any, AfterValidator(_quantity)]
#: A Go ``int32``.
Int32 = Annotated[int, AfterValidator(_int32)]
#: A Go ``int64``.
Int64 = Annotated[int, AfterValidator(_int64)]
#: A ``map[string]string`` (labels, annotations, node selectors).
StrMap = dict[str, str]
#: A ``v1.ResourceList``: resource name -> quantity.
ResourceList = dict[str, Quantity]


class Shape(BaseModel):
    """Base of every shape: strict JSON types, unknown fields ignored (they pass unchecked)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class OwnerReference(Shape):
    """``metav1.OwnerReference``."""

    apiVersion: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    blockOwnerDeletion: bool | None = None


class ObjectMeta(Shape):
    """``metav1.ObjectMeta``: the fields any rule reads (``managedFields`` and the rest pass unchecked)."""

    name: str | None = None
    generateName: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resourceVersion: str | None = None
    generation: Int64 | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: StrMap | None = None
    annotations: StrMap | None = None
    ownerReferences: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class ResourceRequirements(Shape):
    """``v1.ResourceRequirements``."""

    requests: ResourceList | None = None
    limits: ResourceList | None = None


class Container(Shape):
    """``v1.Container``: name, resources and (init containers) restart policy."""

    name: str | None = None
    image: str | None = None
    resources: ResourceRequirements | None = None
    restartPolicy: str | None = None


class Toleration(Shape):
    """``v1.Toleration``."""

    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    tolerationSeconds: Int64 | None = None


class PodSpec(Shape):
    """``v1.PodSpec``: containers, priority and placement fields the rules and the scheduler read."""

    containers: list[Container] | None = None
    initContainers: list[Container] | None = None
    overhead: ResourceList | None = None
    nodeName: str | None = None
    nodeSelector: StrMap | None = None
    schedulerName: str | None = None
    priority: Int32 | None = None
    priorityClassName: str | None = None
    preemptionPolicy: str | None = None
    tolerations: list[Toleration] | None = None
    affinity: dict[str, Any] | None = None


class PodCondition(Shape):
    """``v1.PodCondition``."""

    type: str | None = None
    status: str | None = None
    lastTransitionTime: str | None = None
    reason: str | None = None
    message: str | None = None


class PodStatus(Shape):
    """``v1.PodStatus``."""

    phase: str | None = None
    qosClass: str | None = None
    nominatedNodeName: str | None = None
    conditions: list[PodCondition] | None = None


class Pod(Shape):
    """``v1.Pod``."""

    apiVersion: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class ElasticQuotaSpec(Shape):
    """``v1alpha1.ElasticQuotaSpec``."""

    min: ResourceList | None = None
    max: ResourceList | None = None


class ElasticQuota(Shape):
    """``scheduling.sigs.k8s.io/v1alpha1`` ElasticQuota."""

    apiVersion: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: ElasticQuotaSpec | None = None


class PodTemplateSpec(Shape):
    """``v1.PodTemplateSpec``."""

    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class ObjectReference(Shape):
    """``v1.ObjectReference`` (a Reservation owner's ``object``)."""

    apiVersion: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resourceVersion: str | None = None
    fieldPath: str | None = None


class ControllerReference(OwnerReference):
    """``ReservationControllerReference``: an OwnerReference plus its namespace."""

    namespace: str | None = None


class LabelSelectorRequirement(Shape):
    """``metav1.LabelSelectorRequirement``."""

    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class LabelSelector(Shape):
    """``metav1.LabelSelector``."""

    matchLabels: StrMap | None = None
    matchExpressions: list[LabelSelectorRequirement] | None = None


class ReservationOwner(Shape):
    """``ReservationOwner``: one of an object, a controller or a label selector."""

    object: ObjectReference | None = None
    controller: ControllerReference | None = None
    labelSelector: LabelSelector | None = None


class ReservationSpec(Shape):
    """``ReservationSpec``."""

    template: PodTemplateSpec | None = None
    owners: list[ReservationOwner] | None = None
    ttl: str | None = None
    expires: str | None = None
    preAllocation: bool | None = None
    allocateOnce: bool | None = None
    allocatePolicy: str | None = None
    unschedulable: bool | None = None
    taints: list[dict[str, Any]] | None = None


class Reservation(Shape):
    """``scheduling.koordinator.sh/v1alpha1`` Reservation."""

    apiVersion: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: ReservationSpec | None = None


#: Kind -> (its resource, its shape): a webhook reviewing ``kind`` has its objects checked against ``shape``.
SHAPES: dict[str, tuple[str, type[Shape]]] = {
    "Pod": ("pods", Pod),
    "ElasticQuota": ("elasticquotas", ElasticQuota),
    "Reservation": ("reservations", Reservation),
}

#: pydantic's error type -> the field.Error detail (custom errors carry their own).
_DETAILS = {
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be an array",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "bool_type": "must be a boolean",
}


def _unwrap(tp: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` -> ``X``."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def field_path(shape: type[Shape], loc: Iterable[int | str], prefix: str = "") -> str:
    """pydantic's error location as a ``field.Path``: ``spec.containers[0].resources``, map keys as
    ``metadata.labels[app]`` (``Path.Key``), list items as ``[i]`` (``Path.Index``)."""
    out = prefix
    tp: Any = shape
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            out = f"{out}.{part}" if out else str(part)
            field = tp.model_fields.get(str(part))
            tp = field.annotation if field is not None else Any
        elif get_origin(tp) in (list, dict):
            out += f"[{part}]"
            tp = get_args(tp)[-1]
        else:
            out = f"{out}.{part}" if out and isinstance(part, str) else f"{out}[{part}]"
    return out or prefix


def object_errors(shape: type[Shape], obj: Any, prefix: str = "") -> list[FieldError]:
    """Every wrong JSON type in ``obj`` against ``shape``, as ``Invalid value`` field errors.

    Args:
        shape: a :class:`Shape` (e.g. :class:`Pod`).
        obj: the object as decoded JSON; None (no object) has no errors.
        prefix: path prefix of the errors (``oldObject`` for the old object, "" for the object).

    Returns:
        The errors in document order (empty when ``obj`` fits ``shape``).
    """
    if obj is None:
        return []
    try:
        shape.model_validate(obj)
    except ValidationError as exc:
        return [
            invalid(
                field_path(shape, err["loc"], prefix) or "object",
                err["input"],
                _DETAILS.get(err["type"], err["msg"]),
            )
            for err in exc.errors(include_url=False, include_context=False)
        ]
    return []


def shape_of(kinds: Iterable[str], req: AdmissionRequest) -> type[Shape] | None:
    """The shape a webhook of ``kinds`` holds ``req``'s objects to, or None when it reviews none.

    A request is checked when it is about one of ``kinds`` (by ``request.kind.kind`` or by
    ``request.resource.resource``, whichever a handler matches on) and not about a subresource
    (``pods/binding``, ``pods/eviction``: those objects are not the kind; status updates pass the
    handlers unread).
    """
    if req.subResource:
        return None
    for kind in kinds:
        resource, shape = SHAPES.get(kind, ("", None))
        if shape is not None and (req.kind.kind == kind or req.resource.resource == resource):
            return shape
    return None


def review_errors(kinds: Iterable[str], req: AdmissionRequest) -> list[FieldError]:
    """The wrong JSON types of ``req.object`` and ``req.oldObject`` for a webhook reviewing ``kinds``.

    Errors in the object name its fields from the object (``metadata.labels``), errors in the old
    object with the prefix ``oldObject`` (``oldObject.metadata.labels``).
    """
    shape = shape_of(kinds, req)
    if shape is None:
        return []
    return object_errors(shape, req.object) + object_errors(shape, req.oldObject, "oldObject")


def describe(errors: list[FieldError]) -> str:
    """The answer's message: :func:`~webhooks.fielderrors.aggregate` of the first :data:`MAX_ERRORS`
    errors, followed by ``(and N more errors)`` when there were more."""
    message = aggregate(errors[:MAX_ERRORS])
    if len(errors) > MAX_ERRORS:
        message += f" (and {len(errors) - MAX_ERRORS} more errors)"
    return message
