"""Which pods own a Reservation: ``spec.owners`` matching and an index that finds candidates fast.

Mirrors ``ParseReservationOwnerMatchers`` / ``MatchReservationOwners`` of
``pkg/util/reservation/reservation.go``: owners are ORed; inside one owner, ``object``, ``controller``
and ``labelSelector`` are ANDed and an absent one matches everything. ``object`` matches on its
non-empty uid, name, namespace and apiVersion (kind ignored); ``controller`` matches when ANY of the
pod's ownerReferences matches every non-empty field (controller flag, uid, name, kind, apiVersion) and
the optional namespace. An empty owner list matches nothing; ``[{}]`` matches everything.

:class:`OwnerIndex` keeps, per reservation, each owner term under its most selective key (object uid
or name, controller uid or name, one matchLabels pair) so a pod's candidate reservations are found in
O(its labels + owner references + hits), not by walking every reservation; terms with no such key
(``{}``, expressions only) are kept apart and checked for every pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.api.labelselector import SelectorError, selector_is_empty, selector_matches
from app.cache.podinfo import PodInfo


class OwnerError(ValueError):
    """An owner term is malformed; the message names the field (``spec.owners[0].labelSelector``)."""


def _str_field(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OwnerError(f"{path}.{key}: expected a string")
    return value


@dataclass(frozen=True, slots=True)
class OwnerMatcher:
    """One ``spec.owners[i]`` term (upstream ``ReservationOwnerMatcher``).

    Attributes:
        object_ref: (uid, name, namespace, apiVersion) of ``object``, None when absent.
        controller: ``controller`` as a dict of its non-empty string fields plus ``controller`` (bool or
            None) and ``namespace``; None when absent.
        selector: ``labelSelector`` as given (JSON-shaped), None when absent.
    """

    object_ref: tuple[str, str, str, str] | None
    controller: dict[str, Any] | None
    selector: Mapping[str, Any] | None

    def match(self, pod: PodInfo) -> bool:
        """Whether ``pod`` satisfies this term (object AND controller AND labels)."""
        if self.object_ref is not None:
            uid, name, ns, api = self.object_ref
            if (uid and uid != pod.uid) or (name and name != pod.name) or (ns and ns != pod.namespace):
                return False
            if api and api != "v1":
                return False
        if self.controller is not None and not _controller_matches(self.controller, pod):
            return False
        return self.selector is None or selector_matches(self.selector, pod.labels)

    def index_key(self) -> tuple[str, ...] | None:
        """The most selective key this term can be found under, or None (checked for every pod)."""
        if self.object_ref is not None:
            uid, name, _, _ = self.object_ref
            if uid:
                return ("uid", uid)
            if name:
                return ("name", name)
        if self.controller is not None:
            if self.controller.get("uid"):
                return ("cuid", self.controller["uid"])
            if self.controller.get("name"):
                return ("cname", self.controller["name"])
        if self.selector is not None:
            labels = self.selector.get("matchLabels") or {}
            if labels:
                key = sorted(labels)[0]
                return ("label", key, str(labels[key]))
        return None


def _controller_matches(ref: dict[str, Any], pod: PodInfo) -> bool:
    namespace = ref.get("namespace") or ""
    if namespace and namespace != pod.namespace:
        return False
    want_controller = ref.get("controller")
    for owner in pod.owner_references:
        if want_controller is not None and owner.get("controller") != want_controller:
            continue
        if all(not ref.get(k) or ref[k] == owner.get(k) for k in ("uid", "name", "kind", "apiVersion")):
            return True
    return False


def parse_owners(raw: Any, path: str = "spec.owners") -> tuple[OwnerMatcher, ...]:
    """Parse ``spec.owners`` into matchers.

    Raises:
        OwnerError: not a list of objects, a field of the wrong type, or an invalid label selector.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise OwnerError(f"{path}: expected a list")
    out: list[OwnerMatcher] = []
    for i, owner in enumerate(raw):
        at = f"{path}[{i}]"
        if not isinstance(owner, dict):
            raise OwnerError(f"{at}: expected an object")
        obj_ref = None
        obj = owner.get("object")
        if obj is not None:
            if not isinstance(obj, dict):
                raise OwnerError(f"{at}.object: expected an object")
            obj_ref = tuple(_str_field(obj, k, f"{at}.object") for k in ("uid", "name", "namespace", "apiVersion"))
        controller: dict[str, Any] | None = None
        ctl = owner.get("controller")
        if ctl is not None:
            if not isinstance(ctl, dict):
                raise OwnerError(f"{at}.controller: expected an object")
            controller = {
                k: _str_field(ctl, k, f"{at}.controller") for k in ("uid", "name", "kind", "apiVersion", "namespace")
            }
            flag = ctl.get("controller")
            if flag is not None and not isinstance(flag, bool):
                raise OwnerError(f"{at}.controller.controller: expected a boolean")
            controller["controller"] = flag
        selector = owner.get("labelSelector")
        if selector is not None:
            if not isinstance(selector, dict):
                raise OwnerError(f"{at}.labelSelector: expected an object")
            try:
                selector_matches(selector, {})
            except SelectorError as exc:
                raise OwnerError(f"{at}.labelSelector: {exc}") from None
            if selector_is_empty(selector):
                selector = None
        out.append(OwnerMatcher(obj_ref, controller, selector))  # type: ignore[arg-type]
    return tuple(out)


def matches_owners(pod: PodInfo, owners: Iterable[OwnerMatcher]) -> bool:
    """``MatchReservationOwners``: any term matches (no terms: nothing matches)."""
    return any(m.match(pod) for m in owners)


class OwnerIndex:
    """Reservation keys by owner-term key, to find a pod's candidate reservations (see the module docstring)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, ...], set[str]] = {}
        self._general: set[str] = set()
        self._keys: dict[str, list[tuple[str, ...] | None]] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, rkey: str, owners: Iterable[OwnerMatcher]) -> None:
        """Index reservation ``rkey`` under its terms' keys (replacing an earlier entry)."""
        self.remove(rkey)
        keys = [m.index_key() for m in owners]
        self._keys[rkey] = keys
        for k in keys:
            if k is None:
                self._general.add(rkey)
            else:
                self._by_key.setdefault(k, set()).add(rkey)

    def remove(self, rkey: str) -> None:
        """Forget reservation ``rkey`` (absent: no-op)."""
        for k in self._keys.pop(rkey, ()):
            if k is None:
                self._general.discard(rkey)
            else:
                bucket = self._by_key.get(k)
                if bucket is not None:
                    bucket.discard(rkey)
                    if not bucket:
                        del self._by_key[k]

    def candidates(self, pod: PodInfo) -> set[str]:
        """Reservation keys that may own ``pod`` (a superset: callers still run the full match)."""
        out = set(self._general)
        by_key = self._by_key
        if not by_key:
            return out
        for k in (("uid", pod.uid), ("name", pod.name)):
            hit = by_key.get(k)
            if hit:
                out |= hit
        for ref in pod.owner_references:
            for k in (("cuid", str(ref.get("uid") or "")), ("cname", str(ref.get("name") or ""))):
                hit = by_key.get(k)
                if hit:
                    out |= hit
        for label, value in pod.labels.items():
            hit = by_key.get(("label", label, value))
            if hit:
                out |= hit
        return out
