"""A Reservation object reduced to what scheduling needs, and its reserve pod.

Mirrors ``pkg/util/reservation/reservation.go`` (``NewReservePod``, ``ReservationRequests``,
``IsReservationActive``, ``IsReservationAvailable``) and the fields of
``apis/scheduling/v1alpha1/reservation_types.go``. Quantities are internal integers: milli-cores for
cpu, base units (bytes, counts) otherwise.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from app.api.quantity import QuantityError, parse_resource_list
from app.api.reservation import reserve_pod_uid
from app.api.timeparse import parse_time
from app.cache.podinfo import PodError, PodInfo, parse_pod
from app.framework.duration import parse_duration
from app.plugins.reservation import names as n
from app.plugins.reservation.owners import OwnerError, OwnerMatcher, parse_owners


class ReservationError(ValueError):
    """A Reservation object cannot be used; the message names the field. The object is skipped alone."""


@dataclass(slots=True, eq=False)
class ReservationInfo:
    """Scheduling view of one Reservation (cluster-scoped, keyed by name).

    Attributes:
        name, uid: identity (the reserve pod's name is the uid, or the name when the uid is empty).
        phase: ``status.phase`` ("" reads as Pending).
        node_name: ``status.nodeName`` ("" until placed).
        allocatable: what the reservation holds: ``status.allocatable`` once Available, else the
            template's pod requests (internal units).
        requests: the template's pod requests (what placement must fit).
        owners: the parsed ``spec.owners`` terms.
        allocate_policy: ``""``, ``Aligned`` or ``Restricted``.
        allocate_once: ``spec.allocateOnce`` (default true).
        ttl: seconds (None: unset), expires: epoch seconds (None: unset), created: epoch seconds or None.
        order: the positive ``reservation-order`` label value, 0 when absent or invalid.
        unschedulable, taints: ``spec.unschedulable`` and ``spec.taints``: new owners need the reservation
            affinity's tolerations for them (upstream ``IsUnschedulable``, ``GetTaints``).
        pre_allocation: ``spec.preAllocation``: a running owner pod may satisfy it (:mod:`.preallocation`).
        labels, annotations: metadata maps.
        reserve_pod: the reserve pod object (``NewReservePod``) and reserve_info its parsed view.
        obj: the object as received.
    """

    name: str
    uid: str
    phase: str
    node_name: str
    allocatable: dict[str, int]
    requests: dict[str, int]
    owners: tuple[OwnerMatcher, ...]
    allocate_policy: str
    allocate_once: bool
    ttl: float | None
    expires: float | None
    created: float | None
    order: int
    labels: dict[str, str]
    annotations: dict[str, str]
    reserve_pod: dict[str, Any]
    reserve_info: PodInfo
    obj: dict[str, Any]
    resource_names: frozenset[str] = field(default_factory=frozenset)
    unschedulable: bool = False
    taints: tuple[dict[str, Any], ...] = ()
    pre_allocation: bool = False

    @property
    def active(self) -> bool:
        """``IsReservationActive``: placed on a node and Available (or Waiting)."""
        return bool(self.node_name) and self.phase in (n.PHASE_AVAILABLE, n.PHASE_WAITING)

    @property
    def pending(self) -> bool:
        """Not yet placed and not finished: the placement loop schedules it."""
        return not self.node_name and self.phase in ("", n.PHASE_PENDING)

    @property
    def finished(self) -> bool:
        """Succeeded or Failed (kept until garbage collection)."""
        return self.phase in (n.PHASE_SUCCEEDED, n.PHASE_FAILED)

    @property
    def key(self) -> str:
        """The uid, or the name when the object has no uid (the embedded source may not set one)."""
        return self.uid or self.name

    def expiry(self) -> float | None:
        """Epoch seconds at which it expires: ``expires`` first, else ``creationTimestamp + ttl``
        (ttl 0 or unset creation time: never); None when it never expires."""
        if self.expires is not None:
            return self.expires
        ttl = n.DEFAULT_TTL_SECONDS if self.ttl is None else self.ttl
        if ttl <= 0 or self.created is None:
            return None
        return self.created + ttl


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReservationError(f"{path}: expected an object")
    return value


def _str_map(value: Any, path: str) -> dict[str, str]:
    m = _mapping(value, path)
    for k, v in m.items():
        if not isinstance(v, str):
            raise ReservationError(f"{path}.{k}: expected a string")
    return m


def new_reserve_pod(obj: dict[str, Any]) -> dict[str, Any]:
    """``NewReservePod``: the fake pod scheduled for the reservation (name = uid, namespace from the
    template or ``default``, reservation labels/annotations over the template's, reserve-pod markers,
    priority from the template, else the ``koordinator.sh/priority`` label, else MaxInt32;
    schedulerName from the template, else ``default-scheduler``; a template nodeName moves into the
    ``reservation-node`` annotation and ``status.nodeName`` becomes ``spec.nodeName``).

    Raises:
        ReservationError: metadata or template is not an object.
    """
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    template = _mapping(spec.get("template"), "spec.template")
    tmeta = copy.deepcopy(_mapping(template.get("metadata"), "spec.template.metadata"))
    pspec = copy.deepcopy(_mapping(template.get("spec"), "spec.template.spec"))
    name = str(meta.get("name") or "")
    uid = str(meta.get("uid") or "")
    labels = dict(_str_map(tmeta.get("labels"), "spec.template.metadata.labels"))
    labels.update(_str_map(meta.get("labels"), "metadata.labels"))
    annotations = dict(_str_map(tmeta.get("annotations"), "spec.template.metadata.annotations"))
    annotations.update(_str_map(meta.get("annotations"), "metadata.annotations"))
    annotations[n.ANNOTATION_RESERVE_POD] = "true"
    annotations[n.ANNOTATION_RESERVATION_NAME] = name
    if spec.get("preAllocation"):
        annotations[n.ANNOTATION_IS_PRE_ALLOCATION] = "true"
    if pspec.get("nodeName"):
        annotations[n.ANNOTATION_RESERVATION_NODE] = str(pspec["nodeName"])
        pspec["nodeName"] = ""
    if status.get("nodeName"):
        pspec["nodeName"] = status["nodeName"]
    if pspec.get("priority") is None:
        raw = labels.get(n.LABEL_POD_PRIORITY, "")
        try:
            pspec["priority"] = int(raw) if raw else None
        except ValueError:
            pspec["priority"] = None
    if pspec.get("priority") is None:
        pspec["priority"] = n.MAX_INT32
    pspec["schedulerName"] = pspec.get("schedulerName") or n.DEFAULT_SCHEDULER_NAME
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": uid or name,
            "namespace": tmeta.get("namespace") or "default",
            "uid": reserve_pod_uid(obj),
            "labels": labels,
            "annotations": annotations,
        },
        "spec": pspec,
        "status": {"phase": "Pending"},
    }


def _order(labels: dict[str, str]) -> int:
    raw = labels.get(n.LABEL_RESERVATION_ORDER, "")
    try:
        value = int(raw)
    except ValueError:
        return 0
    return value if value > 0 else 0


def parse_reservation(obj: Any) -> ReservationInfo:
    """Parse a Reservation object (JSON-shaped) into a :class:`ReservationInfo`.

    Raises:
        ReservationError: not shaped like a Reservation (no name, no template, malformed owners,
            quantities, ttl, expires or timestamps); the message names the field.
    """
    if not isinstance(obj, dict):
        raise ReservationError(f"Reservation: expected an object, got {type(obj).__name__}")
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ReservationError("metadata.name: Required value")
    if not isinstance(spec.get("template"), dict):
        raise ReservationError("spec.template: Required value")
    reserve_pod = new_reserve_pod(obj)
    try:
        reserve_info = parse_pod(reserve_pod)
    except PodError as exc:
        raise ReservationError(f"spec.template.{exc}") from None
    try:
        owners = parse_owners(spec.get("owners"))
    except OwnerError as exc:
        raise ReservationError(str(exc)) from None
    policy = spec.get("allocatePolicy") or ""
    if policy not in n.ALLOCATE_POLICIES:
        raise ReservationError(f'spec.allocatePolicy: Unsupported value: "{policy}"')
    allocate_once = spec.get("allocateOnce", True)
    if not isinstance(allocate_once, bool):
        raise ReservationError("spec.allocateOnce: expected a boolean")
    ttl = expires = created = None
    try:
        if spec.get("ttl") is not None:
            ttl = parse_duration(spec["ttl"])
        if spec.get("expires"):
            expires = parse_time(spec["expires"])
        if meta.get("creationTimestamp"):
            created = parse_time(meta["creationTimestamp"])
    except ValueError as exc:
        raise ReservationError(str(exc)) from None
    phase = str(status.get("phase") or "")
    node_name = str(status.get("nodeName") or "")
    requests = dict(reserve_info.requests)
    allocatable = requests
    if phase == n.PHASE_AVAILABLE and node_name and status.get("allocatable"):
        try:
            allocatable = parse_resource_list(status["allocatable"], field="status.allocatable")
        except QuantityError as exc:
            raise ReservationError(str(exc)) from None
    labels = _str_map(meta.get("labels"), "metadata.labels")
    taints = spec.get("taints") or []
    if not isinstance(taints, list) or not all(isinstance(t, dict) for t in taints):
        raise ReservationError("spec.taints: expected a list of taints")
    return ReservationInfo(
        name=name,
        uid=str(meta.get("uid") or ""),
        phase=phase,
        node_name=node_name,
        allocatable=allocatable,
        requests=requests,
        owners=owners,
        allocate_policy=policy,
        allocate_once=allocate_once,
        ttl=ttl,
        expires=expires,
        created=created,
        order=_order(labels),
        labels=labels,
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        reserve_pod=reserve_pod,
        reserve_info=reserve_info,
        obj=obj,
        resource_names=frozenset(k for k, v in allocatable.items() if v > 0),
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(taints),
        pre_allocation=spec.get("preAllocation") is True,
    )
