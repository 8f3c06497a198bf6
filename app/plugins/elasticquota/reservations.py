"""Reservations as quota consumers, counted once.

An active Reservation (Available on a node) holds capacity that its owners will use, so its quota is
charged for it: the quota of its reserve pod (template namespace and labels, resolved like any pod's)
counts one synthetic assigned pod, ``reservation/<name>``, whose requests are the reservation's
**unallocated remainder** = ``allocatable - Σ requests of the owner pods allocated to it`` (floored at 0,
per resource). An owner pod is an ordinary pod of its own quota; once the reservation takes it (its
``scheduling.koordinator.sh/reservation-allocated`` annotation names the reservation) the remainder
shrinks by its request, so the reserved capacity is counted once, not twice. A finished or deleted
reservation stops counting. At PreFilter an owner pod's request is checked less what a reservation of
its own quota holds for it (``ElasticQuota._request_beyond_reservation``), since ``used`` already
carries that part.

Between the Reservation plugin's Reserve and the annotation arriving (one PreBind write) an owner pod
is briefly counted next to the full remainder.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.api.quantity import QuantityError, parse_resource_list
from app.api.reservation import allocated_ref, is_active
from app.cache.podinfo import PodError, PodInfo, parse_pod

#: Prefix of the synthetic pod keys in the quota manager.
KEY_PREFIX = "reservation/"


def usage_key(name: str) -> str:
    """The quota manager's key of reservation ``name``'s synthetic pod."""
    return KEY_PREFIX + name


def _reserve_pod(name: str, obj: dict[str, Any]) -> tuple[PodInfo, dict[str, int]]:
    """(reserve pod view, allocatable) of a Reservation object.

    Raises:
        PodError: the template is not a pod template, or ``status.allocatable`` is malformed.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template = spec.get("template") if isinstance(spec, dict) else None
    if not isinstance(template, dict):
        raise PodError("spec.template: Required value")
    tmeta = template.get("metadata") or {}
    labels = {**(tmeta.get("labels") or {}), **(meta.get("labels") or {})}
    pod = parse_pod(
        {
            "metadata": {"name": name, "namespace": tmeta.get("namespace") or "default", "labels": labels},
            "spec": template.get("spec") or {},
        }
    )
    status = obj.get("status") or {}
    allocatable = pod.requests
    if status.get("allocatable"):
        try:
            allocatable = parse_resource_list(status["allocatable"], field="status.allocatable")
        except QuantityError as exc:
            raise PodError(str(exc)) from None
    return pod, allocatable


def _ref_key(ref: tuple[str, str]) -> str:
    name, uid = ref
    return f"uid:{uid}" if uid else f"name:{name}"


class ReservationUsage:
    """Active reservations, the placed pods allocated to them, and the synthetic pod each one is counted as.

    Owner pods are indexed by what their annotation names (the reservation's uid, else its name), so a
    pod that arrives before its reservation is counted once the reservation shows up.
    """

    def __init__(self) -> None:
        self._reservations: dict[str, tuple[PodInfo, dict[str, int], str]] = {}  # name -> (pod, allocatable, uid)
        self._by_uid: dict[str, str] = {}
        self._annotated: dict[str, tuple[str, dict[str, int]]] = {}  # pod uid -> (ref key, requests)
        self._index: dict[str, set[str]] = {}  # ref key -> pod uids

    def set_reservation(self, name: str, obj: dict[str, Any] | None) -> PodInfo | None:
        """Record Reservation ``name`` (None: deleted) and return its synthetic pod (None: counts nothing).

        Raises:
            PodError: the object is malformed; it then counts nothing.
        """
        old = self._reservations.pop(name, None)
        if old is not None:
            self._by_uid.pop(old[2], None)
        if obj is None or not is_active(obj):
            return None
        pod, allocatable = _reserve_pod(name, obj)
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        self._reservations[name] = (replace(pod, node_name=str(obj["status"]["nodeName"])), allocatable, uid)
        if uid:
            self._by_uid[uid] = name
        return self.synthetic(name)

    def any_active(self) -> bool:
        """Whether any active reservation is counted."""
        return bool(self._reservations)

    def base_pod(self, name: str) -> PodInfo | None:
        """The reserve pod view of reservation ``name`` (namespace and labels decide its quota), or None."""
        entry = self._reservations.get(name)
        return entry[0] if entry is not None else None

    def _resolve(self, key: str) -> str | None:
        kind, _, value = key.partition(":")
        name = self._by_uid.get(value) if kind == "uid" else value
        return name if name in self._reservations else None

    def set_pod(self, uid: str, pod: PodInfo | None) -> set[str]:
        """Track pod ``uid`` (None: deleted); return the reservations whose remainder may have changed."""
        changed: set[str] = set()
        old = self._annotated.pop(uid, None)
        if old is not None:
            bucket = self._index.get(old[0])
            if bucket is not None:
                bucket.discard(uid)
                if not bucket:
                    del self._index[old[0]]
            name = self._resolve(old[0])
            if name is not None:
                changed.add(name)
        if pod is not None and pod.node_name and not pod.terminated:
            ref = allocated_ref(pod.annotations)
            if ref is not None:
                key = _ref_key(ref)
                self._annotated[uid] = (key, pod.requests)
                self._index.setdefault(key, set()).add(uid)
                name = self._resolve(key)
                if name is not None:
                    if old is not None and old == (key, pod.requests):
                        changed.discard(name)
                    else:
                        changed.add(name)
        return changed

    def synthetic(self, name: str) -> PodInfo | None:
        """The synthetic assigned pod of reservation ``name``: its unallocated remainder as requests."""
        entry = self._reservations.get(name)
        if entry is None:
            return None
        pod, allocatable, uid = entry
        used: dict[str, int] = {}
        keys = [f"uid:{uid}"] if uid else []
        keys.append(f"name:{name}")
        for key in keys:
            for pod_uid in self._index.get(key, ()):
                for res, value in self._annotated[pod_uid][1].items():
                    used[res] = used.get(res, 0) + value
        remaining = {res: max(value - used.get(res, 0), 0) for res, value in allocatable.items()}
        return replace(pod, uid=usage_key(name), requests=remaining, limits={})
