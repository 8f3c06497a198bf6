"""Gang jobs in the simulator (issue 14): which arrivals form one gang, the annotations its members carry,
and what a run counts about them.

Two ways a replay gets gangs:

- a pod list with a ``job_id`` column: the arrivals of the pods sharing a non-empty job id form one
  gang named ``job-<id>``; in a static run, the resampled copies form further gangs, the k-th copy of
  each of the job's pods in ``job-<id>-clone-<k>``;
- ``--gang-size N``: the multi-GPU pods (``num_gpu > 1``, the whole-GPU shape of distributed training)
  that carry no job id are taken in arrival order, and every N consecutive ones form a gang (pods of
  another shape arriving in between do not break a group); the last group may be smaller, its
  min-available is then its size. Gangs are named ``gang-<k>`` (k = 0, 1, ...).

Every member carries Koordinator's lightweight gang annotations (``gang.scheduling.koordinator.sh/name``,
``min-available`` = ``total-number`` = the gang's size, ``mode`` Strict, ``waiting-time`` = ``--gang-wait``),
which the Coscheduling plugin parses (:mod:`app.plugins.coscheduling.gang`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.api import coscheduling as n
from app.framework.waiting import MAX_TIMEOUT
from app.sim.errors import SimInputError
from app.sim.workload import Arrival, EventKind, SimEvent

#: Seconds a gang waits at Permit by default in a replay (``--gang-wait``): long enough for the sim to
#: send every member, short enough that a gang whose member kube-scheduler's own fit refuses (the
#: extender is then not asked, so nothing rejects the waiting members) does not stall the run long.
DEFAULT_GANG_WAIT = 10.0


def check_gang_size(size: int | None) -> int | None:
    """``size`` when it is None (no ``--gang-size``) or at least 1.

    Raises:
        SimInputError: ``size`` below 1 (``--gang-size: must be at least 1, got 0``).
    """
    if size is not None and size < 1:
        raise SimInputError(f"--gang-size: must be at least 1, got {size}")
    return size


def check_gang_wait(seconds: float) -> float:
    """``seconds`` when it is in (0, 900] (900 s: the framework's longest Permit wait).

    Raises:
        SimInputError: not positive or above 900 (the message names ``--gang-wait``).
    """
    if not 0 < seconds <= MAX_TIMEOUT:
        raise SimInputError(f"--gang-wait: must be in (0, {MAX_TIMEOUT:g}] seconds, got {seconds:g}")
    return seconds


@dataclass(slots=True)
class SimGang:
    """One gang of a replay: its name (namespace ``default``) and its members' arrivals in arrival order."""

    name: str
    members: list[Arrival] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Members (the gang's min-available and total-number)."""
        return len(self.members)


def is_multi_gpu(arrival: Arrival) -> bool:
    """True for the pods ``--gang-size`` groups: more than one whole GPU."""
    return arrival.pod.num_gpu > 1


def plan_gangs(events: list[SimEvent], gang_size: int | None) -> dict[str, SimGang]:
    """The gang of every arrival that belongs to one, by arrival uid (see the module docstring).

    Args:
        events: the run's events (only arrivals are looked at, in order).
        gang_size: ``--gang-size`` (None: only job ids group pods).

    Raises:
        SimInputError: ``gang_size`` below 1.
    """
    check_gang_size(gang_size)
    out: dict[str, SimGang] = {}
    jobs: dict[str, SimGang] = {}
    instances: dict[str, int] = {}  # pod name -> arrivals of it so far (its copy index)
    current: SimGang | None = None
    count = 0
    for event in events:
        if event.kind is not EventKind.ARRIVE:
            continue
        arrival = event.arrival
        copy = instances.get(arrival.pod.name, 0)
        instances[arrival.pod.name] = copy + 1
        job = arrival.pod.job_id
        if job:
            name = f"job-{job}" if copy == 0 else f"job-{job}-clone-{copy}"
            gang = jobs.get(name)
            if gang is None:
                gang = jobs[name] = SimGang(name)
        elif gang_size is not None and is_multi_gpu(arrival):
            if current is None or current.size == gang_size:
                current = SimGang(f"gang-{count}")
                count += 1
            gang = current
        else:
            continue
        gang.members.append(arrival)
        out[arrival.uid] = gang
    return out


def gang_annotations(gang: SimGang, wait_seconds: float) -> dict[str, str]:
    """The lightweight gang annotations of a member of ``gang`` waiting at most ``wait_seconds`` at Permit."""
    return {
        n.ANNOTATION_GANG_NAME: gang.name,
        n.ANNOTATION_GANG_MIN_NUM: str(gang.size),
        n.ANNOTATION_GANG_TOTAL_NUM: str(gang.size),
        n.ANNOTATION_GANG_MODE: n.MODE_STRICT,
        n.ANNOTATION_GANG_WAIT_TIME: f"{wait_seconds:g}s",
    }


@dataclass(slots=True)
class GangStats:
    """What a run with gangs counted.

    Attributes:
        planned: gangs the replay formed.
        completed: gangs whose every member was bound.
        failed: gangs with at least one member not bound (refused, rejected, timed out, or left early).
        fail_fast: gangs refused at ``/filter`` by Coscheduling's capacity check (also counted failed).
        waiting_gpu_seconds: GPUs held by members inside ``/bind`` (assumed, waiting at Permit)
            times the wall-clock seconds each waited for its answer, summed over every member.
    """

    planned: int = 0
    completed: int = 0
    failed: int = 0
    fail_fast: int = 0
    waiting_gpu_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """``{"planned", "completed", "failed", "fail_fast", "waiting_gpu_seconds"}`` (seconds rounded to 0.01)."""
        return {
            "planned": self.planned,
            "completed": self.completed,
            "failed": self.failed,
            "fail_fast": self.fail_fast,
            "waiting_gpu_seconds": round(self.waiting_gpu_seconds, 2),
        }
