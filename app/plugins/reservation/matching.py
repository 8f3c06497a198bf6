"""Which active reservations a pod may use, per node (upstream ``PreFilter``'s ``nodeReservationStates``).

A pod is an owner of reservation R when R is active, the pod matches ``R.spec.owners`` and, as
upstream's ``transformer.go`` checks them: with an affinity naming R, only the name (and exact match)
count; otherwise an unschedulable R needs the affinity to tolerate ``node.kubernetes.io/unschedulable``,
R's NoSchedule/NoExecute taints must be tolerated by the affinity's tolerations (a pod without affinity is
not held back by taints), the affinity's selectors must match R's labels, and with
``exact-match-reservation`` the pod must request exactly R's allocatable for the listed resources.
An ``allocateOnce`` Reservation that already has an owner, bound or only assumed by a binding in flight, is
no candidate for any other pod, though it stays ``Available`` until the controller marks it ``Succeeded``
(upstream's ``prepareMatchReservationState`` skips it the same way). Pods labelled
``reservation-ignored=true`` and reserve pods use no reservation. Candidates come from the owner index, so
a pod that owns nothing costs a few dict lookups however many reservations exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.api.tolerations import UNSCHEDULABLE_TAINT, tolerates, untolerated_taint
from app.cache.podinfo import PodInfo
from app.plugins.reservation import names as n
from app.plugins.reservation.affinity import ReservationAffinity, exact_match, parse_affinity, parse_exact_match
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.owners import matches_owners
from app.plugins.reservation.store import ReservationStore


@dataclass(slots=True)
class PodReservations:
    """What PreFilter learnt about one pod.

    Attributes:
        ignored: the pod bypasses reservations (reservation-ignored label, or a reserve pod).
        affinity: the parsed reservation-affinity (None without one): the pod must use a reservation.
        by_node: node name -> the reservations on it the pod may use.
        fitting: node name -> the candidates on it that Filter found fitting (filled by Filter).
    """

    ignored: bool = False
    affinity: ReservationAffinity | None = None
    by_node: dict[str, list[ReservationInfo]] = field(default_factory=dict)
    fitting: dict[str, list[ReservationInfo]] = field(default_factory=dict)


def is_reserve_pod(pod: PodInfo) -> bool:
    """``IsReservePod``: the pod carries ``reserve-pod: "true"``."""
    return pod.annotations.get(n.ANNOTATION_RESERVE_POD) == "true"


def is_ignored(pod: PodInfo) -> bool:
    """``IsReservationIgnored``: label ``reservation-ignored=true``."""
    return pod.labels.get(n.LABEL_RESERVATION_IGNORED) == "true"


def match_pod(store: ReservationStore, pod: PodInfo) -> PodReservations:
    """The reservations ``pod`` may use, grouped by node.

    Raises:
        AffinityError: the pod's reservation-affinity or exact-match-reservation annotation is malformed.
    """
    if is_reserve_pod(pod) or is_ignored(pod):
        return PodReservations(ignored=True)
    affinity = parse_affinity(pod.annotations)
    exact = parse_exact_match(pod.annotations)
    out = PodReservations(affinity=affinity)
    if not store.any_active():
        return out
    for key in store.owner_index.candidates(pod):
        info = store.get(key)
        if info is None or not info.active or not matches_owners(pod, info.owners):
            continue
        if store.allocated_once(info, pod.uid):
            continue  # consumed: its owner is bound or assumed, the controller has not marked it Succeeded yet
        if not _admits(affinity, info):
            continue
        if exact and not exact_match(pod.requests, info.allocatable, exact):
            continue
        out.by_node.setdefault(info.node_name, []).append(info)
    return out


def _admits(affinity: ReservationAffinity | None, info: ReservationInfo) -> bool:
    """Upstream's order of checks for an owner (see the module docstring), before exact match."""
    if affinity is not None and affinity.name:
        return affinity.name == info.name
    tolerations = list(affinity.tolerations) if affinity is not None else []
    if info.unschedulable and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
        return False
    if affinity is None:
        return True
    if untolerated_taint(list(info.taints), tolerations) is not None:
        return False
    return affinity.matches(info.name, info.labels)
