"""Fit checks: the node as a non-owner sees it, and an owner pod inside one reservation.

Upstream: ``fitsNode``, ``fitsReservation`` and ``fitsNodeAndReservation`` of
``pkg/scheduler/plugins/reservation/plugin.go``. Quantities are internal integers (milli-cores, bytes).

- Non-owner (and an owner on a node where no reservation takes it): the node's free capacity is
  ``allocatable - requested - reserved``, where ``reserved`` is what active reservations hold and
  their owners have not used. Only the shortfalls the reservations cause are reported here
  (``Insufficient cpu (reserved)``); shortfalls without them are kube-scheduler's or NodeResourcesFit's.
- Owner placed into reservation R: the node's free capacity is ``allocatable - requested - (reserved -
  remaining(R))``. ``Aligned`` / default: that must hold the pod (it may spill past R onto free node
  capacity). ``Restricted``: in addition each resource R reserves must come from R alone
  (``request <= remaining(R)``). A ``pods`` entry in R's allocatable limits its owner count.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.plugins.reservation import names as n
from app.plugins.reservation.model import ReservationInfo


def reserved_reason(resource: str) -> str:
    """Failure reason of a non-owner pod that reserved capacity keeps off the node (``Too many pods
    (reserved)`` when the reservations hold the node's last pod slots)."""
    if resource == "pods":
        return "Too many pods (reserved)"
    return f"Insufficient {resource} (reserved)"


def node_reason(resource: str) -> str:
    """``Insufficient <resource> by node`` (upstream's reason when node and reservation together fall short)."""
    return f"Insufficient {resource} by node"


def reserved_shortfalls(
    requests: dict[str, int],
    free: dict[str, npt.NDArray[np.int64]],
    reserved: dict[str, npt.NDArray[np.int64]],
) -> list[tuple[str, npt.NDArray[np.bool_]]]:
    """Per resource the pod requests, the rows where it fits ``free`` but not ``free - reserved``.

    Args:
        requests: the pod's non-zero requests.
        free: resource -> allocatable - requested, parallel to the batch.
        reserved: resource -> reserved-but-unallocated, parallel to the batch (only reserved resources).

    Returns:
        (resource, bool mask) for each resource with at least one such row, sorted by resource.
    """
    out: list[tuple[str, npt.NDArray[np.bool_]]] = []
    for res in sorted(reserved):
        want = requests.get(res, 0)
        if want <= 0:
            continue
        room = free[res]
        short = (want > room - reserved[res]) & (want <= room)
        if short.any():
            out.append((res, short))
    return out


def fits_reservation(
    requests: dict[str, int],
    info: ReservationInfo,
    remaining: dict[str, int],
    owner_count: int,
    node_free_besides: dict[str, int],
) -> tuple[list[str], list[str]]:
    """Whether an owner pod fits node and reservation ``info`` (``fitsNodeAndReservation``).

    Args:
        requests: the pod's non-zero requests.
        info: the candidate reservation; remaining: its allocatable - allocated.
        owner_count: pods allocated to it now.
        node_free_besides: per requested resource, node allocatable - requested - (reserved - remaining).

    Returns:
        (resources short on the node, reservation-level reasons); both empty when it fits.
    """
    by_node = [res for res, want in sorted(requests.items()) if want > node_free_besides.get(res, 0)]
    by_resv: list[str] = []
    max_pods = info.allocatable.get("pods")
    if max_pods is not None and owner_count + 1 > max_pods:
        by_resv.append(n.reservation_reason("Too many pods"))
    if info.allocate_policy == n.POLICY_RESTRICTED:
        for res in sorted(info.resource_names):
            want = requests.get(res, 0)
            if res != "pods" and want > 0 and want > remaining.get(res, 0):
                by_resv.append(n.reservation_reason(f"Insufficient {res}"))
    return by_node, by_resv


def score_reservation(requests: dict[str, int], info: ReservationInfo, allocated: dict[str, int]) -> int:
    """``ScoreReservation``: MostAllocated over the reservation's non-zero allocatable, 0..100.

    Σ over resources r where ``request + allocated <= allocatable``: ``100 * (request + allocated) /
    allocatable``, divided by the number of resources (integer arithmetic as upstream).
    """
    resources = {r: v for r, v in info.allocatable.items() if v != 0}
    if not resources:
        return 0
    total = 0
    for res, capacity in resources.items():
        used = requests.get(res, 0) + allocated.get(res, 0)
        if used <= capacity:
            total += 100 * used // capacity
    return total // len(resources)
