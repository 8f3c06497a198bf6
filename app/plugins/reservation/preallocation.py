"""Pre-allocation: a pending Reservation with ``spec.preAllocation: true`` satisfied by a running owner pod.

Upstream's design (``docs/proposals/scheduling/20220609-resource-reservation.md``, "Usage in
Pre-allocation"): a pre-allocating Reservation takes over the node resources of pods already running; its
``status.phase`` is ``Waiting`` until those pods release them, then ``Available`` for its owners. Here:

- candidates are the bound, not terminated (nor terminating) pods that match the Reservation's owners and
  are allocated to no Reservation yet, by namespace/name;
- the first whose node admits the reserve pod (:func:`~.placement.node_refusal`) and holds it once the
  candidate's own requests count as the Reservation's (:func:`~.placement.fit_reasons` with the candidate
  removed) is adopted: the Reservation is bound to that node in phase ``Waiting`` with the pod as its
  current owner, and the pod is annotated ``reservation-allocated`` (so the capacity counts once);
- the controller turns a ``Waiting`` Reservation ``Available`` once its adopted pods are gone
  (:mod:`.controller`); ``allocateOnce`` is not consumed by them.

Without such a pod, the Reservation is placed as any other.
"""

from __future__ import annotations

from app.cache.podinfo import PodInfo
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.runtime import Framework
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.owners import matches_owners
from app.plugins.reservation.placement import fit_reasons, node_refusal
from app.plugins.reservation.store import ReservationStore, allocated_ref


def _terminating(handle: Handle, pod: PodInfo) -> bool:
    meta = (handle.snapshot.pod_object(pod.uid) or {}).get("metadata") or {}
    return bool(meta.get("deletionTimestamp"))


def candidates(handle: Handle, store: ReservationStore, info: ReservationInfo) -> list[PodInfo]:
    """The running pods that may satisfy ``info`` (see the module docstring), by namespace/name."""
    out = [
        pod
        for pod in handle.snapshot.pods.values()
        if pod.node_name
        and not pod.terminated
        and pod.uid not in store.pod_reservation
        and allocated_ref(pod) is None
        and matches_owners(pod, info.owners)
        and not _terminating(handle, pod)
    ]
    return sorted(out, key=lambda p: (p.namespace, p.name))


def find_pre_allocatable(
    handle: Handle, framework: Framework, store: ReservationStore, info: ReservationInfo
) -> tuple[PodInfo, CycleState] | None:
    """The pod ``info`` adopts and the cycle state its node was checked in, or None (no candidate fits, or
    the reserve pod's PreFilter fails)."""
    found = candidates(handle, store, info)
    if not found:
        return None
    state = framework.new_cycle()
    if not framework.run_pre_filter(state, info.reserve_info).is_success():
        return None
    for pod in found:
        if node_refusal(handle, store, info, pod.node_name):
            continue
        if not fit_reasons(handle, framework, store, info, state, pod.node_name, [pod]):
            return pod, state
    return None
