"""GPUs held by Reservations (upstream ``pkg/scheduler/plugins/deviceshare/reservation.go``, simplified).

An active Reservation whose reserve pod was given GPUs carries them in its own
``scheduling.koordinator.sh/device-allocated`` annotation (written by DeviceShare when the Reservation
plugin places it). Those GPUs are accounted on the node like a pod's, under the reserve pod's uid, so
other pods cannot take them. An owner pod placed into the reservation receives GPUs from it: while it
holds them (linked at Reserve, then by its ``reservation-allocated`` annotation) the reservation's
accounted share shrinks by the owner's allocation, so each GPU share is counted once. A finished or
deleted reservation gives its GPUs back.

Under ``allocatePolicy: Restricted`` an owner's GPUs come from the reservation alone (upstream
``tryAllocateFromReservation`` with the Restricted policy): :func:`restricted_minors` says which GPUs
may serve it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.plugins.deviceshare.allocation import GPUAllocation


@dataclass(slots=True)
class ReservedGPUs:
    """One reservation's GPUs.

    Attributes:
        uid: the reserve pod's uid (the accounting key).
        node: the reservation's node.
        reserved: what the reservation holds (its annotation, or what Reserve chose).
        owners: owner pod uid -> the allocations it took from the reservation.
        restricted: its ``allocatePolicy`` is ``Restricted``.
    """

    uid: str
    node: str
    reserved: list[GPUAllocation]
    owners: dict[str, list[GPUAllocation]] = field(default_factory=dict)
    restricted: bool = False

    def remainder(self) -> list[GPUAllocation]:
        """``reserved`` less the owners' allocations on the same minors (per resource, floored at 0);
        GPUs with nothing left are dropped."""
        taken: dict[int, dict[str, int]] = {}
        for allocs in self.owners.values():
            for a in allocs:
                into = taken.setdefault(a.minor, {})
                for k, v in a.resources.items():
                    into[k] = into.get(k, 0) + v
        out = []
        for a in self.reserved:
            used = taken.get(a.minor, {})
            left = {k: max(0, v - used.get(k, 0)) for k, v in a.resources.items()}
            if any(left.values()):
                out.append(GPUAllocation(a.minor, left, a.id))
        return out

    def minors(self) -> set[int]:
        """Minors of the GPUs the reservation still holds something on."""
        return {a.minor for a in self.remainder()}


def restricted_minors(reservations: list[ReservedGPUs], per_gpu: dict[str, int]) -> set[int] | None:
    """The GPUs an owner pod may take on a node where it owns ``reservations`` (those holding GPUs): None
    when none of them is Restricted (any GPU), else the minors on which a Restricted one still holds at
    least ``per_gpu`` (the request on each GPU: ``gpu-core``, ``gpu-memory-ratio``, ``gpu-memory``; a
    resource the request leaves at 0 is not compared)."""
    restricted = [r for r in reservations if r.restricted]
    if not restricted:
        return None
    wanted = {k: v for k, v in per_gpu.items() if v > 0}
    out: set[int] = set()
    for r in restricted:
        for a in r.remainder():
            if all(a.resources.get(k, 0) >= v for k, v in wanted.items()):
                out.add(a.minor)
    return out
