"""A pod's ``scheduling.koordinator.sh/reservation-affinity``: which reservations it may use.

Mirrors ``GetRequiredReservationAffinity`` (``pkg/util/reservation/reservation.go``) and
``ReservationAffinity`` (``apis/extension/reservation.go``): ``name`` (only that reservation),
``reservationSelector`` (labels the reservation must carry) and
``requiredDuringSchedulingIgnoredDuringExecution.reservationSelectorTerms`` (NodeSelectorTerms
evaluated against the reservation's labels: terms ORed, expressions ANDed, operators In, NotIn,
Exists, DoesNotExist, Gt, Lt) and ``tolerations`` (of the reservation's ``spec.taints`` and of its
``spec.unschedulable``). A pod with the annotation must be placed into a reservation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from app.plugins.reservation import names as n


class AffinityError(ValueError):
    """The annotation is not valid ReservationAffinity JSON; the message says why."""


@dataclass(frozen=True, slots=True)
class ReservationAffinity:
    """The parsed annotation.

    Attributes:
        name: required reservation name ("" for any).
        selector: labels the reservation must carry (may be empty).
        terms: reservationSelectorTerms, each a list of (key, operator, values).
        tolerations: the affinity's tolerations (JSON-shaped).
    """

    name: str
    selector: dict[str, str]
    terms: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]
    tolerations: tuple[dict[str, Any], ...] = ()

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        """Whether a reservation called ``name`` with ``labels`` satisfies the affinity."""
        if self.name and self.name != name:
            return False
        if any(labels.get(k) != v for k, v in self.selector.items()):
            return False
        if not self.terms:
            return True
        return any(all(_requirement(labels, *req) for req in term) for term in self.terms)


def _requirement(labels: dict[str, str], key: str, op: str, values: tuple[str, ...]) -> bool:
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def parse_affinity(annotations: dict[str, str]) -> ReservationAffinity | None:
    """The pod's reservation affinity, or None without the annotation (or with an empty one).

    Raises:
        AffinityError: the value is not JSON of the ReservationAffinity shape, or an operator is unknown.
    """
    raw = annotations.get(n.ANNOTATION_RESERVATION_AFFINITY)
    if not raw:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise AffinityError(f"invalid {n.ANNOTATION_RESERVATION_AFFINITY}: {exc}") from None
    if not isinstance(data, dict):
        raise AffinityError(f"invalid {n.ANNOTATION_RESERVATION_AFFINITY}: expected an object")
    name = data.get("name") or ""
    selector = data.get("reservationSelector") or {}
    required = data.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    if not isinstance(name, str) or not isinstance(selector, dict) or not isinstance(required, dict):
        raise AffinityError(f"invalid {n.ANNOTATION_RESERVATION_AFFINITY}: wrong field types")
    terms: list[tuple[tuple[str, str, tuple[str, ...]], ...]] = []
    for term in required.get("reservationSelectorTerms") or []:
        if not isinstance(term, dict):
            raise AffinityError(f"invalid {n.ANNOTATION_RESERVATION_AFFINITY}: a term is not an object")
        reqs = []
        for expr in term.get("matchExpressions") or []:
            op = expr.get("operator") if isinstance(expr, dict) else None
            if op not in _OPERATORS:
                raise AffinityError(f'invalid {n.ANNOTATION_RESERVATION_AFFINITY}: "{op}" is not a valid operator')
            reqs.append((str(expr.get("key") or ""), str(op), tuple(str(v) for v in expr.get("values") or [])))
        terms.append(tuple(reqs))
    tolerations = data.get("tolerations") or []
    if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
        raise AffinityError(f"invalid {n.ANNOTATION_RESERVATION_AFFINITY}: tolerations must be a list of objects")
    return ReservationAffinity(name, {str(k): str(v) for k, v in selector.items()}, tuple(terms), tuple(tolerations))


def parse_exact_match(annotations: dict[str, str]) -> tuple[str, ...]:
    """``GetExactMatchReservationSpec``: the resource names that must equal the reservation's allocatable.

    Raises:
        AffinityError: the value is not ``{"resourceNames": [...]}`` JSON.
    """
    raw = annotations.get(n.ANNOTATION_EXACT_MATCH_RESERVATION)
    if not raw:
        return ()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise AffinityError(f"invalid {n.ANNOTATION_EXACT_MATCH_RESERVATION}: {exc}") from None
    names = data.get("resourceNames") if isinstance(data, dict) else None
    if names is None:
        return ()
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise AffinityError(f"invalid {n.ANNOTATION_EXACT_MATCH_RESERVATION}: resourceNames must be a list of names")
    return tuple(names)


def exact_match(requests: dict[str, int], allocatable: dict[str, int], resource_names: tuple[str, ...]) -> bool:
    """``ExactMatchReservation``: for each listed resource, both absent (then true at once, as upstream)
    or both present and equal."""
    for name in resource_names:
        have, want = name in allocatable, name in requests and requests[name] != 0
        if not have or not want:
            return not have and not want
        if allocatable[name] != requests[name]:
            return False
    return True
