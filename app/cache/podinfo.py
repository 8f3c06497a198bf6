"""A pod reduced to what scheduling needs, parsed once per object version.

Requests and limits follow Kubernetes' ``PodRequests`` / ``PodLimits``
(k8s.io/component-helpers/resource): the sum over app containers, at least the largest init
container (restartable "sidecar" init containers add to both), plus ``spec.overhead``.
QoS and priority class follow Koordinator's ``GetPodQoSClassWithDefault`` and
``GetPodPriorityClassWithDefault`` (:func:`app.api.koordext.koordinator_classes`); the Kubernetes
QoS class, when ``status.qosClass`` is absent, is :func:`app.api.kubeqos.kube_qos_class`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from functools import lru_cache
from operator import attrgetter
from typing import Any

import orjson

from app.api.jsonbytes import encode_json
from app.api.koordext import (
    LABEL_POD_PRIORITY_CLASS,
    LABEL_POD_QOS,
    PriorityClass,
    QoSClass,
    koordinator_classes,
)
from app.api.kubeqos import PodSpecError, kube_qos_class
from app.api.quantity import QuantityError, parse_resource_list
from app.api.timeparse import parse_time

#: v1 PodPhase values; a parsed phase is one of these shared strings, not a copy per pod.
_PHASES = {p: p for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown")}


class PodError(ValueError):
    """A pod object does not have the shape of a v1 Pod; the message names the field."""


@dataclass(slots=True)
class PodInfo:
    """Scheduling view of one pod.

    Attributes:
        uid, namespace, name: identity (``uid`` may be empty for a pod on CREATE admission).
        node_name: ``spec.nodeName`` ("" when pending).
        requests, limits: pod-level ResourceLists as internal integers (cpu milli, others base units).
        priority: ``spec.priority`` or None.
        qos: Koordinator QoS class with default; priority_class: Koordinator priority class with default.
        kube_qos: Kubernetes QoS class (``status.qosClass`` or computed).
        terminated: phase Succeeded or Failed.
        phase: ``status.phase`` ("" when absent).
        spec_hash: a hash of ``spec`` and ``status.conditions`` as received: equal for two versions
            of a pod whose spec and conditions are equal (what LoadAware's ``podAssignCache.OnUpdate``
            compares), so no one needs the raw object for it.
        daemonset: owned by a DaemonSet.
        scheduled_time: ``PodScheduled=True`` lastTransitionTime as epoch seconds, or None.
        initialized_time: ``Initialized=True`` lastTransitionTime as epoch seconds, or None.
        labels, annotations: metadata maps.
        resource_version: ``metadata.resourceVersion``.
        owner_references: ``metadata.ownerReferences`` (the entries that are objects), as received.
    """

    uid: str
    namespace: str
    name: str
    node_name: str
    requests: dict[str, int]
    limits: dict[str, int]
    priority: int | None
    qos: QoSClass
    priority_class: PriorityClass
    kube_qos: str
    terminated: bool
    daemonset: bool
    scheduled_time: float | None
    initialized_time: float | None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    resource_version: str = ""
    phase: str = ""
    spec_hash: int = 0
    owner_references: tuple[dict[str, Any], ...] = ()

    @property
    def key(self) -> str:
        """``namespace/name``, as klog.KObj prints it."""
        return f"{self.namespace}/{self.name}"

    def with_node_name(self, node_name: str) -> PodInfo:
        """A copy of this view with ``node_name`` set (the maps are shared, as ``dataclasses.replace``
        shares them: a PodInfo is never changed in place). What the cache's assume / forget make on
        every binding: ~1.2 us, where ``replace`` (keyword arguments, field checks) takes ~6.5 us."""
        copied = PodInfo(*_FIELD_VALUES(self))
        copied.node_name = node_name
        return copied


#: Every field of a PodInfo, in declaration order (what :meth:`PodInfo.with_node_name` copies).
_FIELD_VALUES = attrgetter(*(f.name for f in fields(PodInfo)))


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PodError(f"{path}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PodError(f"{path}: expected a list, got {type(value).__name__}")
    return value


def _add(into: dict[str, int], other: dict[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max_into(into: dict[str, int], other: dict[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def _container_resources(container: dict[str, Any], path: str) -> tuple[dict[str, int], dict[str, int]]:
    resources = _mapping(container.get("resources"), f"{path}.resources")
    try:
        requests = parse_resource_list(resources.get("requests"), field=f"{path}.resources.requests")
        limits = parse_resource_list(resources.get("limits"), field=f"{path}.resources.limits")
    except QuantityError as exc:
        raise PodError(str(exc)) from None
    return requests, limits


class _Totals:
    """PodRequests/PodLimits accumulated side by side (k8s.io/component-helpers/resource)."""

    __slots__ = ("init_max", "restartable", "total")

    def __init__(self) -> None:
        self.total: dict[str, int] = {}
        self.restartable: dict[str, int] = {}
        self.init_max: dict[str, int] = {}

    def init_container(self, resources: dict[str, int], restartable: bool) -> None:
        """A sidecar (``restartPolicy: Always``) adds to the total and to every later init container;
        any other init container counts with the sidecars started before it, at its maximum."""
        this = dict(resources)
        if restartable:
            _add(self.total, this)
            _add(self.restartable, this)
            this = dict(self.restartable)
        else:
            _add(this, self.restartable)
        _max_into(self.init_max, this)


def _aggregate(spec: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """Pod-level (requests, limits) per k8s.io/component-helpers/resource PodRequests/PodLimits, each
    container's resources parsed once for both."""
    req, lim = _Totals(), _Totals()
    for i, c in enumerate(_list(spec.get("containers"), "spec.containers")):
        creq, clim = _container_resources(_mapping(c, f"spec.containers[{i}]"), f"spec.containers[{i}]")
        _add(req.total, creq)
        _add(lim.total, clim)
    for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        c = _mapping(c, f"spec.initContainers[{i}]")
        creq, clim = _container_resources(c, f"spec.initContainers[{i}]")
        restartable = c.get("restartPolicy") == "Always"
        req.init_container(creq, restartable)
        lim.init_container(clim, restartable)
    _max_into(req.total, req.init_max)
    _max_into(lim.total, lim.init_max)
    try:
        overhead = parse_resource_list(spec.get("overhead"), field="spec.overhead")
    except QuantityError as exc:
        raise PodError(str(exc)) from None
    if overhead:
        _add(req.total, overhead)
        # PodLimits adds overhead only to resources that have a limit.
        _add(lim.total, {k: v for k, v in overhead.items() if k in lim.total})
    return req.total, lim.total


#: Pod-level (requests, limits) by the JSON of a spec's ``[containers, initContainers, overhead]``: the
#: replicas of a workload, and the watch events of one pod (created, bound, running), carry the same
#: containers, so most parses find their resources here (~1 us to encode the key) instead of
#: aggregating every container's quantities again (~7 us for one container). Cleared when full.
_RESOURCES_SEEN: dict[bytes, tuple[dict[str, int], dict[str, int]]] = {}

#: Entries :data:`_RESOURCES_SEEN` holds at most.
RESOURCES_SEEN_MAX = 4096


def _resources(spec: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """:func:`_aggregate` of ``spec``, remembered by its inputs' JSON (:data:`_RESOURCES_SEEN`); each
    call returns its own dicts. A spec that does not encode (not JSON-shaped) or does not parse is
    aggregated the long way, so its PodError is exactly :func:`_aggregate`'s."""
    try:
        key = orjson.dumps((spec.get("containers"), spec.get("initContainers"), spec.get("overhead")))
    except orjson.JSONEncodeError:
        return _aggregate(spec)
    seen = _RESOURCES_SEEN.get(key)
    if seen is None:
        seen = _aggregate(spec)
        if len(_RESOURCES_SEEN) >= RESOURCES_SEEN_MAX:
            _RESOURCES_SEEN.clear()
        _RESOURCES_SEEN[key] = seen
    return dict(seen[0]), dict(seen[1])


@lru_cache(maxsize=4096)
def _classes(
    qos_label: str | None, priority_class_label: str | None, priority: int | None, kube_qos: str
) -> tuple[QoSClass, PriorityClass]:
    """:func:`koordinator_classes` of a pod, remembered by all it reads: the ``koordinator.sh/qosClass`` and
    ``koordinator.sh/priority-class`` labels (None: absent), ``spec.priority`` and the Kubernetes QoS
    class. A handful of combinations cover a cluster; working one out costs ~4 us, a lookup ~0.3 us."""
    labels = {}
    if qos_label is not None:
        labels[LABEL_POD_QOS] = qos_label
    if priority_class_label is not None:
        labels[LABEL_POD_PRIORITY_CLASS] = priority_class_label
    return koordinator_classes(labels, priority, kube_qos)


#: The conditions whose time PodInfo keeps: PodScheduled (scheduled_time) and Initialized (initialized_time).
_TIMED_CONDITIONS = ("PodScheduled", "Initialized")


def _condition_times(status: dict[str, Any]) -> tuple[float | None, float | None]:
    """lastTransitionTime (epoch seconds) of the first ``PodScheduled=True`` and the first
    ``Initialized=True`` condition, or None each; one pass over ``status.conditions``."""
    times: dict[str, float | None] = {}
    for i, cond in enumerate(_list(status.get("conditions"), "status.conditions")):
        cond = _mapping(cond, f"status.conditions[{i}]")
        ctype = cond.get("type")
        if ctype in _TIMED_CONDITIONS and ctype not in times and cond.get("status") == "True":
            ts = cond.get("lastTransitionTime")
            if not ts:
                continue
            try:
                times[ctype] = parse_time(ts)
            except ValueError as exc:
                raise PodError(f"status.conditions[{i}].lastTransitionTime: {exc}") from None
            if len(times) == len(_TIMED_CONDITIONS):
                break  # both found: later entries are not read (nor checked), as two separate searches did
    return times.get("PodScheduled"), times.get("Initialized")


def _str(value: Any, path: str) -> str:
    """A string field: absent or null is "", anything but a string is a PodError."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PodError(f"{path}: expected a string, got {type(value).__name__}")
    return value


def _str_map(value: Any, path: str) -> dict[str, str]:
    m = _mapping(value, path)
    for k, v in m.items():
        if not isinstance(v, str):
            raise PodError(f"{path}.{k}: expected a string, got {type(v).__name__}")
    return m


def spec_fingerprint(spec: dict[str, Any], conditions: Any) -> int:
    """:attr:`PodInfo.spec_hash`: a hash of the JSON of ``[spec, conditions]`` (:func:`~app.api.jsonbytes.encode_json`,
    whose first try skips orjson's slow OPT_NON_STR_KEYS path: 7.9 -> 5.5 us for the bench's 2.4 KB pod).
    Equal for equal inputs with keys in the same order; a value JSON cannot carry is written as its ``str``."""
    try:
        data = encode_json([spec, conditions])
    except orjson.JSONEncodeError:
        data = orjson.dumps([spec, conditions], option=orjson.OPT_NON_STR_KEYS, default=str)
    return hash(data)


def parse_pod(obj: Any) -> PodInfo:
    """Parse a v1 Pod (JSON-shaped dict) into a :class:`PodInfo`.

    Every watch event of a pod comes here (three per scheduled pod), so the common shapes (maps that
    are dicts, strings that are strings, no owner references) are checked inline and the PodInfo is
    built positionally; anything else takes the helpers that name the field (issue 29: ~16 -> ~13 us
    for the bench's pod, the same PodInfo and the same PodError as the field-by-field parse).

    Raises:
        PodError: the object is not shaped like a Pod (the message names the field), or a
            resource quantity is invalid.
    """
    if not isinstance(obj, dict):
        raise PodError(f"Pod: expected an object, got {type(obj).__name__}")
    get = obj.get
    meta = get("metadata")
    if type(meta) is not dict:
        meta = _mapping(meta, "metadata")
    spec = get("spec")
    if type(spec) is not dict:
        spec = _mapping(spec, "spec")
    status = get("status")
    if type(status) is not dict:
        status = _mapping(status, "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise PodError("metadata.name: required")
    labels = _str_map(meta.get("labels"), "metadata.labels")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    priority = spec.get("priority")
    if (
        priority is not None
        and type(priority) is not int
        and (isinstance(priority, bool) or not isinstance(priority, int))
    ):
        raise PodError("spec.priority: expected an integer")
    uid = meta.get("uid")
    if type(uid) is not str:
        uid = _str(uid, "metadata.uid")
    namespace = meta.get("namespace")
    if type(namespace) is not str:
        namespace = _str(namespace, "metadata.namespace")
    resource_version = meta.get("resourceVersion")
    if type(resource_version) is not str:
        resource_version = _str(resource_version, "metadata.resourceVersion")
    requests, limits = _resources(spec)  # first, so errors name spec.containers[i]
    kube_qos = status.get("qosClass")
    if not kube_qos or type(kube_qos) is not str:
        try:
            kube_qos = _str(kube_qos, "status.qosClass") or kube_qos_class(spec)
        except PodSpecError as exc:  # not reached: _aggregate checked the same containers first
            raise PodError(str(exc)) from None
    kube_qos = sys.intern(str(kube_qos))
    qos, pclass = _classes(labels.get(LABEL_POD_QOS), labels.get(LABEL_POD_PRIORITY_CLASS), priority, kube_qos)
    owners = meta.get("ownerReferences")
    if owners:
        owners = _list(owners, "metadata.ownerReferences")
        owner_references = tuple(o for o in owners if isinstance(o, dict))
        daemonset = any(o.get("kind") == "DaemonSet" for o in owner_references)
    else:
        _list(owners, "metadata.ownerReferences")  # a falsy non-list ("", 0, false) is still refused
        owner_references = ()
        daemonset = False
    phase = status.get("phase") or ""
    node_name = spec.get("nodeName") or ""
    if not isinstance(node_name, str):
        raise PodError("spec.nodeName: expected a string")
    scheduled_time, initialized_time = _condition_times(status)
    # field order of PodInfo; namespaces, node names and QoS classes repeat across pods: one shared string each
    return PodInfo(
        uid,
        sys.intern(namespace or "default"),
        name,
        sys.intern(node_name),
        requests,
        limits,
        priority,
        qos,
        pclass,
        kube_qos,
        phase in ("Succeeded", "Failed"),
        daemonset,
        scheduled_time,
        initialized_time,
        labels,
        annotations,
        resource_version,
        _PHASES.get(phase, phase) if isinstance(phase, str) else "",
        spec_fingerprint(spec, status.get("conditions")),
        owner_references,
    )
