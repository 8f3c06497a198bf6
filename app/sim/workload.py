"""Arrival sequences: the paper's static protocol and the timed replay.

Static (Weng et al., ATC'23, section 6.1; the authors' kubernetes-scheduler-simulator): the pod
list is shuffled with the seed, then pods are drawn from it uniformly with replacement (seeded)
and appended until the requested GPUs reach ``inflate`` times the cluster's GPU capacity; pods
never leave. Timed: pods arrive at ``creation_time`` and leave at ``deletion_time`` (a departure
at the same second as an arrival goes first, freeing room as the cluster would).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from app.sim.errors import SimInputError
from app.sim.trace import MILLI_PER_GPU, TracePod


class EventKind(Enum):
    """What happens to a pod at an event."""

    ARRIVE = "arrive"
    DEPART = "depart"


@dataclass(frozen=True, slots=True)
class Arrival:
    """One pod instance: the trace pod, its instance name (``<name>`` or ``<name>-clone-<k>``) and uid."""

    pod: TracePod
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class SimEvent:
    """An arrival or a departure of ``arrival`` at ``time`` seconds (0 in static mode)."""

    time: int
    kind: EventKind
    arrival: Arrival


def static_arrivals(pods: list[TracePod], capacity_gpu_milli: int, inflate: float, seed: int) -> list[SimEvent]:
    """The static protocol's arrivals: shuffled with ``seed``, then resampled until the GPU requests
    reach ``inflate * capacity_gpu_milli`` (no resampling when the list already does).

    Raises:
        SimInputError: ``inflate`` is not positive, or resampling is needed and no pod requests a GPU.
    """
    if not inflate > 0:
        raise SimInputError(f"--inflate: must be positive, got {inflate}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pods)).tolist()
    chosen = [pods[i] for i in order]
    target = inflate * capacity_gpu_milli
    total = sum(p.gpu_total_milli for p in chosen)
    if total < target and not any(p.num_gpu for p in pods):
        raise SimInputError(f"cannot inflate to {inflate:g}x GPU capacity: no pod in the trace requests a GPU")
    clones: dict[str, int] = {}
    draws = rng.integers(0, len(pods), size=max(16, len(pods)))
    k = 0
    while total < target:
        if k == len(draws):
            draws, k = rng.integers(0, len(pods), size=len(draws)), 0
        pod = pods[int(draws[k])]
        k += 1
        chosen.append(pod)
        total += pod.gpu_total_milli
    events: list[SimEvent] = []
    for pod in chosen:
        n = clones.get(pod.name, 0)
        clones[pod.name] = n + 1
        name = pod.name if n == 0 else f"{pod.name}-clone-{n}"
        events.append(SimEvent(0, EventKind.ARRIVE, Arrival(pod, name, f"sim-{seed}-{name}")))
    return events


def timed_events(pods: list[TracePod], seed: int) -> list[SimEvent]:
    """Arrivals at ``creation_time`` and departures at ``deletion_time``, in time order (departures first
    within a second, then trace order).

    Raises:
        SimInputError: a pod has no creation_time.
    """
    events: list[tuple[int, int, int, SimEvent]] = []
    for i, pod in enumerate(pods):
        if pod.creation_time is None:
            raise SimInputError(f"line {pod.line}: field creation_time: required in timed mode")
        arrival = Arrival(pod, pod.name, f"sim-{seed}-{pod.name}")
        events.append((pod.creation_time, 1, i, SimEvent(pod.creation_time, EventKind.ARRIVE, arrival)))
        if pod.deletion_time is not None:
            events.append((pod.deletion_time, 0, i, SimEvent(pod.deletion_time, EventKind.DEPART, arrival)))
    events.sort(key=lambda e: e[:3])
    return [e[3] for e in events]


def capacity_milli(gpus: int) -> int:
    """GPU capacity in milli-GPUs of ``gpus`` GPUs."""
    return gpus * MILLI_PER_GPU
