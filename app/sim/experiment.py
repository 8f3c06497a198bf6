"""Runs of several policies and seeds over one trace, each on a fresh in-process service."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.sim.errors import SimInputError
from app.sim.fragmentation import FragmentationFn, deviceshare_fragmentation
from app.sim.gangs import DEFAULT_GANG_WAIT, SimGang, check_gang_wait, plan_gangs
from app.sim.policies import TYPICAL_POPULARITY_PERCENT, Policy, with_coscheduling, with_trace_workload
from app.sim.run import SimResult, Simulation, check_tie_break
from app.sim.service import InProcessService
from app.sim.trace import TraceNode, TracePod, load_nodes, load_pods
from app.sim.workload import SimEvent, capacity_milli, static_arrivals, timed_events

MODES: tuple[str, ...] = ("static", "timed")


def default_tie_break(mode: str) -> str:
    """The tie-break a mode uses unless told: ``order`` in static mode (the authors' simulator, so
    that figures compare with the published ones), ``random`` in timed mode (kube-scheduler)."""
    return "order" if mode == "static" else "random"


@dataclass(frozen=True, slots=True)
class Trace:
    """A loaded trace: the nodes the run uses, the pod list and where they came from."""

    nodes: list[TraceNode]
    pods: list[TracePod]
    pods_path: Path

    @property
    def gpus(self) -> int:
        """GPUs in the cluster."""
        return sum(n.gpu for n in self.nodes)

    @property
    def has_jobs(self) -> bool:
        """True when some pod carries a job id (its job is replayed as a gang)."""
        return any(p.job_id for p in self.pods)


def load_trace(nodes_csv: str | Path, pods_csv: str | Path, mode: str) -> Trace:
    """Load and validate both lists; static mode keeps the GPU nodes only (the paper's protocol).

    Raises:
        SimInputError: bad mode or bad input (file, line and field named).
    """
    if mode not in MODES:
        raise SimInputError(f"--mode: must be one of {', '.join(MODES)}, got {mode!r}")
    nodes = load_nodes(nodes_csv)
    if mode == "static":
        nodes = [n for n in nodes if n.gpu > 0]
        if not nodes:
            raise SimInputError(f"{nodes_csv}: no GPU node (static mode uses the GPU nodes only)")
    models = {n.model for n in nodes if n.model}
    pods = load_pods(pods_csv, models, need_times=mode == "timed")
    return Trace(nodes, pods, Path(pods_csv))


def events_for(trace: Trace, mode: str, seed: int, inflate: float) -> list[SimEvent]:
    """The run's event list: the static protocol's arrivals, or the timed replay.

    Raises:
        SimInputError: ``inflate`` is not positive.
    """
    if mode == "static":
        return static_arrivals(trace.pods, capacity_milli(trace.gpus), inflate, seed)
    return timed_events(trace.pods, seed)


def gangs_for(trace: Trace, events: list[SimEvent], gang_size: int | None) -> dict[str, SimGang] | None:
    """The gangs of a run (:func:`app.sim.gangs.plan_gangs`), or None when it replays none: no
    ``--gang-size`` and no job id in the trace.

    Raises:
        SimInputError: ``gang_size`` below 1.
    """
    if gang_size is None and not trace.has_jobs:
        return None
    return plan_gangs(events, gang_size)


def run_one(
    trace: Trace,
    policy: Policy,
    seed: int,
    *,
    mode: str = "static",
    inflate: float = 1.3,
    fragmentation: FragmentationFn | None = None,
    progress: Callable[[int, int], None] | None = None,
    loop: str = "auto",
    tie_break: str | None = None,
    popularity_percent: float = TYPICAL_POPULARITY_PERCENT,
    gang_size: int | None = None,
    gang_wait: float = DEFAULT_GANG_WAIT,
) -> SimResult:
    """Start a fresh service with ``policy``, load the cluster, replay the events, stop the service.

    ``fragmentation`` defaults to the DeviceShare plugin's F_n over the trace's workload (None
    while that module is missing). ``progress(done, total)`` is called now and then. ``tie_break``
    (:data:`app.sim.run.TIE_BREAKS`) defaults to :func:`default_tie_break` of ``mode``.
    ``popularity_percent``: the share of the trace's pods its typical shapes cover, FGD's target
    workload and the fragmentation metric's (the reference's ``podPopularityThreshold``).
    ``gang_size`` (``--gang-size``) and a trace's job ids replay gangs (:mod:`app.sim.gangs`): the policy
    then runs with the Coscheduling plugin added, each gang waiting up to ``gang_wait`` seconds at Permit.

    Raises:
        SimInputError: bad ``inflate``, ``tie_break``, ``popularity_percent``, ``gang_size`` or ``gang_wait``.
        ConfigError: the policy's configuration is invalid.
        ServiceError: the service did not start.
        VerbError: the service answered a verb with an HTTP error.
    """
    tie_break = check_tie_break(tie_break or default_tie_break(mode))  # before the service starts
    check_gang_wait(gang_wait)
    events = events_for(trace, mode, seed, inflate)
    gangs = gangs_for(trace, events, gang_size)
    frag = fragmentation if fragmentation is not None else deviceshare_fragmentation(trace.pods, popularity_percent)
    total = len(events)
    # FGD's target workload is the trace's (as the paper)
    policy = with_trace_workload(policy, trace.pods, popularity_percent)
    if gangs is not None:
        policy = with_coscheduling(policy)
    with InProcessService(policy.config, loop=loop) as service:
        sim = Simulation(
            service,
            trace.nodes,
            policy,
            seed,
            frag,
            progress=(lambda done: progress(done, total)) if progress is not None else None,
            tie_break=tie_break,
            gangs=gangs,
            gang_wait=gang_wait,
        )
        sim.result.workload = trace.pods_path.stem
        sim.load_cluster()
        return sim.run(events)
