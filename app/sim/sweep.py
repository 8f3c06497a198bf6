"""Many runs at once: seeds x policies (x traces) fanned out over local processes or a Ray cluster.

Every run is independent (a fresh in-process service on its own port, its own seeded RNGs), so a
sweep's figures are the serial ones whatever the fan-out; only ``wall_seconds`` depends on how
busy the machine is. A run is described by a picklable :class:`RunSpec` and executed by
:func:`execute` in a worker: a local process (:func:`run_local`, ``koord sim --jobs N``) or a Ray
task (:func:`run_ray`, ``koord sim --ray-address ADDR``; the optional ``ray`` extra). Results come
back in the order of the specs, whatever order the runs finish in.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.framework.config import ConfigError
from app.sim.errors import SimInputError
from app.sim.experiment import Trace, default_tie_break, events_for, load_trace, run_one
from app.sim.gangs import DEFAULT_GANG_WAIT, check_gang_size, check_gang_wait
from app.sim.policies import Policy, trace_workload
from app.sim.run import SimResult, VerbError, check_tie_break
from app.sim.service import ServiceError

#: How to install what ``--ray-address`` needs (the ``ray`` extra of pyproject.toml).
RAY_EXTRA_HINT = "pip install 'koordinator-py[ray]'"


class SweepError(RuntimeError):
    """A run of the sweep failed; the message names the policy and seed as the serial CLI does."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run of a sweep (picklable: it travels to a worker process or a Ray task).

    Attributes:
        nodes, pods: the trace's CSV files (a Ray worker must see them at the same paths).
        mode: ``static`` or ``timed``.
        policy: the policy (name and service configuration).
        seed: the run's seed.
        inflate: static mode's resampling target (x GPU capacity).
        tie_break: None for the mode's default.
        popularity_percent: the typical pods' coverage (percent).
        gang_size: ``--gang-size`` (None: gangs from job ids only, if the trace has any).
        gang_wait: ``--gang-wait``, seconds a gang waits at Permit.
    """

    nodes: Path
    pods: Path
    mode: str
    policy: Policy
    seed: int
    inflate: float = 1.3
    tie_break: str | None = None
    popularity_percent: float = 95.0
    gang_size: int | None = None
    gang_wait: float = DEFAULT_GANG_WAIT


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a worker sends back: the result, or the error message (exceptions are not pickled)."""

    result: SimResult | None
    error: str | None = None


#: Traces a worker process loaded already: (nodes, pods, mode) -> Trace (a worker runs many specs).
_TRACES: dict[tuple[str, str, str], Trace] = {}


def _trace(spec: RunSpec) -> Trace:
    key = (str(spec.nodes), str(spec.pods), spec.mode)
    trace = _TRACES.get(key)
    if trace is None:
        trace = _TRACES[key] = load_trace(spec.nodes, spec.pods, spec.mode)
    return trace


def check_spec(trace: Trace, spec: RunSpec) -> None:
    """Refuse, before any worker starts, what every run of ``spec``'s options would refuse: a bad
    tie-break, ``inflate``, popularity percent, gang size or gang wait (cheap: the first seed's event
    list is drawn).

    Raises:
        SimInputError: the option's message, as the run itself would raise it.
    """
    check_tie_break(spec.tie_break or default_tie_break(spec.mode))
    check_gang_size(spec.gang_size)
    check_gang_wait(spec.gang_wait)
    events_for(trace, spec.mode, spec.seed, spec.inflate)
    trace_workload(trace.pods, spec.popularity_percent)


def execute(spec: RunSpec, progress: Callable[[int, int], None] | None = None) -> RunOutcome:
    """Run ``spec`` (load its trace once per process, start a fresh service, replay, stop).

    Errors become :attr:`RunOutcome.error`, worded as ``koord sim`` reports them: the input
    error's own message, ``policy P: invalid config: ...``, or ``policy P seed S: ...`` for a
    service that did not start or a verb that answered an HTTP error.
    """
    name = spec.policy.name
    try:
        result = run_one(
            _trace(spec),
            spec.policy,
            spec.seed,
            mode=spec.mode,
            inflate=spec.inflate,
            progress=progress,
            tie_break=spec.tie_break,
            popularity_percent=spec.popularity_percent,
            gang_size=spec.gang_size,
            gang_wait=spec.gang_wait,
        )
    except SimInputError as exc:
        return RunOutcome(None, str(exc))
    except ConfigError as exc:
        return RunOutcome(None, f"policy {name}: invalid config: {exc}")
    except (ServiceError, VerbError) as exc:
        return RunOutcome(None, f"policy {name} seed {spec.seed}: {exc}")
    return RunOutcome(result)


def default_jobs() -> int:
    """The CPU cores this process may run on (``--jobs``' default)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


#: Called once per finished run with (index of its spec, outcome).
DoneFn = Callable[[int, RunOutcome], None]


def _collect(outcomes: list[RunOutcome | None]) -> list[SimResult]:
    """The results in spec order.

    Raises:
        SweepError: the first failed run's message (in spec order).
    """
    results: list[SimResult] = []
    for outcome in outcomes:
        assert outcome is not None
        if outcome.result is None:
            raise SweepError(outcome.error or "a run failed")
        results.append(outcome.result)
    return results


def run_local(specs: Sequence[RunSpec], jobs: int, on_done: DoneFn | None = None) -> list[SimResult]:
    """Run ``specs`` over ``jobs`` worker processes (each run a fresh service over real HTTP in its
    worker); the results in the order of ``specs``.

    ``jobs`` is capped at the number of specs; with one job the runs go one after another in worker
    processes all the same (the CLI runs ``--jobs 1`` in its own process instead). Workers are
    spawned, not forked: the parent may hold threads (a progress display) that fork would copy
    half-way.

    Raises:
        SimInputError: ``jobs`` below 1.
        SweepError: a run failed (its message; the remaining runs are cancelled).
    """
    if jobs < 1:
        raise SimInputError(f"--jobs: must be at least 1, got {jobs}")
    outcomes: list[RunOutcome | None] = [None] * len(specs)
    if not specs:
        return []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(specs)), mp_context=context) as pool:
        pending: dict[Future[RunOutcome], int] = {pool.submit(execute, spec): i for i, spec in enumerate(specs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                i = pending.pop(future)
                outcome = future.result()
                outcomes[i] = outcome
                if on_done is not None:
                    on_done(i, outcome)
                if outcome.result is None:
                    for rest in pending:
                        rest.cancel()
                    raise SweepError(outcome.error or "a run failed")
    return _collect(outcomes)


def run_ray(specs: Sequence[RunSpec], address: str, on_done: DoneFn | None = None) -> list[SimResult]:
    """Run ``specs`` as Ray tasks of one CPU each on the cluster at ``address`` (``ray.init``'s
    address: ``auto``, ``ray://host:10001``, ``local`` for a fresh local cluster); the results in
    the order of ``specs``. Each task starts its own service over real HTTP on the worker it lands
    on; the workers need this package (with the ``sim`` extra) and the trace files at the same paths.

    Raises:
        SimInputError: ``ray`` is not installed (the message names the ``ray`` extra).
        SweepError: a run failed (its message; the remaining tasks are cancelled).
    """
    try:
        import ray
    except ImportError:
        raise SimInputError(f"--ray-address needs the optional 'ray' extra: {RAY_EXTRA_HINT}") from None
    if not specs:
        return []
    started = not ray.is_initialized()  # a session this call starts, it also ends
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    try:
        task: Any = ray.remote(num_cpus=1)(execute)
        refs = [task.remote(spec) for spec in specs]
        index = {ref: i for i, ref in enumerate(refs)}
        outcomes: list[RunOutcome | None] = [None] * len(specs)
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                outcome: RunOutcome = ray.get(ref)
                outcomes[index[ref]] = outcome
                if on_done is not None:
                    on_done(index[ref], outcome)
                if outcome.result is None:
                    for rest in pending:
                        ray.cancel(rest)
                    raise SweepError(outcome.error or "a run failed")
    finally:
        if started:
            ray.shutdown()
    return _collect(outcomes)
