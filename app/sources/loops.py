"""Supervised loops: every long-running task of the service runs under one :class:`LoopSupervisor`.

The file source's poll, each list/watch reflector, the kube-scheduler Lease follower, the plugins'
status writers and the embedded controllers are loops that must run for the process's lifetime. A
loop that raised used to end silently (its task kept the exception until garbage collection) while
``/readyz`` went on answering 200, so the cache went stale unseen (issue 28). Under the supervisor,
any exception a loop raises is:

- logged (with its traceback, once per failure);
- counted per loop (:attr:`LoopSupervisor.errors`, exposed as ``koord_source_loop_errors_total{loop}``);
- retried: the loop's factory is called again after an exponential backoff with jitter
  (:data:`BACKOFF_INITIAL_SECONDS` doubling up to :data:`BACKOFF_MAX_SECONDS`; a loop that ran
  :data:`HEALTHY_SECONDS` before failing starts again from the initial delay).

While a loop waits to be restarted it is *not running*: :meth:`LoopSupervisor.not_running` names it
(``/readyz`` answers 503 naming it, ``koord_source_loop_running{loop}`` is 0). A loop that returns
although it should run until stopped counts as a failure too. Cancelling a loop (shutdown, a
source's ``stop``) is not a failure: the loop is forgotten.

Loops that finish by design (``once=True``, e.g. the GC freeze after the first load) are retried on an
exception like any other and leave the supervisor when they complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: A loop: a callable returning a fresh coroutine each time it is (re)started.
LoopFactory = Callable[[], Coroutine[Any, Any, None]]

#: First delay before restarting a failed loop, in seconds.
BACKOFF_INITIAL_SECONDS = 0.5

#: Upper bound of the restart delay, in seconds (client-go's reflector backoff caps at 30 s too).
BACKOFF_MAX_SECONDS = 30.0

#: A loop that ran this long (seconds) before failing restarts from the initial delay.
HEALTHY_SECONDS = 60.0


@dataclass(slots=True)
class LoopState:
    """What the supervisor knows of one loop.

    Attributes:
        name: the loop's name (the ``loop`` label of its metrics).
        running: True while its coroutine runs; False while it waits to be restarted.
        last_error: ``<ExceptionType>: <message>`` of its last failure ("" before any).
        restarts: how many times it was started again after a failure.
    """

    name: str
    running: bool = False
    last_error: str = ""
    restarts: int = 0


class LoopSupervisor:
    """Runs named loops, restarting any that fails (see the module docstring).

    Args:
        backoff_initial: first restart delay, in seconds.
        backoff_max: largest restart delay, in seconds.
        healthy_seconds: a loop that ran this long before failing restarts from ``backoff_initial``.
        clock: monotonic seconds (tests).

    Attributes:
        loops: the loops started and not cancelled (running or waiting to restart), by name.
        errors: failures since start, by loop name (kept after a loop is cancelled).
    """

    def __init__(
        self,
        *,
        backoff_initial: float = BACKOFF_INITIAL_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
        healthy_seconds: float = HEALTHY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.healthy_seconds = healthy_seconds
        self.clock = clock
        self.loops: dict[str, LoopState] = {}
        self.errors: Counter[str] = Counter()

    def spawn(self, name: str, factory: LoopFactory, *, once: bool = False) -> asyncio.Task[None]:
        """Start ``factory()`` as a supervised task on the running event loop and return the task.

        Cancel the task (or pass it to :meth:`cancel`) to stop the loop.

        Raises:
            ValueError: a loop of that name is already supervised.
            RuntimeError: no event loop is running.
        """
        if name in self.loops:
            raise ValueError(f"loop {name!r} is already supervised")
        state = self.loops[name] = LoopState(name, running=True)  # started: ready as soon as spawned
        task = asyncio.get_running_loop().create_task(self._supervise(state, factory, once), name=name)
        task.add_done_callback(lambda _: self._forget(state))  # also when cancelled before its first step
        return task

    def _forget(self, state: LoopState) -> None:
        """Drop a loop that ended (completed or cancelled) from :attr:`loops`."""
        state.running = False
        if self.loops.get(state.name) is state:
            del self.loops[state.name]

    async def _supervise(self, state: LoopState, factory: LoopFactory, once: bool) -> None:
        name = state.name
        failures = 0
        while True:
            state.running = True
            started = self.clock()
            trace: BaseException | None = None
            try:
                await factory()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the point of supervision: nothing a loop raises ends it unseen
                problem, trace = _describe(exc), exc
            else:
                if once:
                    return
                problem = "returned, but it must run until stopped"
            state.running = False
            state.last_error = problem
            self.errors[name] += 1
            failures = 1 if self.clock() - started >= self.healthy_seconds else failures + 1
            delay = self.delay(failures)
            log.error("loop %s failed (%s); restarting in %.1fs", name, problem, delay, exc_info=trace)
            await asyncio.sleep(delay)
            state.restarts += 1
            log.info("loop %s restarted (restart %d)", name, state.restarts)

    def delay(self, failures: int) -> float:
        """Seconds to wait before the restart after the ``failures``-th failure in a row: exponential, capped
        at :attr:`backoff_max`, plus up to 25 % jitter (still capped)."""
        base = min(self.backoff_max, self.backoff_initial * (2 ** min(failures - 1, 30)))
        return min(self.backoff_max, base * (1.0 + 0.25 * random.random()))

    def not_running(self) -> dict[str, str]:
        """The supervised loops that are not running now (waiting to restart), with their last error."""
        return {name: s.last_error for name, s in sorted(self.loops.items()) if not s.running}

    @staticmethod
    async def cancel(tasks: list[asyncio.Task[None]]) -> None:
        """Cancel ``tasks`` (loops from :meth:`spawn`) and wait until they ended."""
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _describe(exc: BaseException) -> str:
    """``<ExceptionType>: <message>`` of ``exc``; of its one member for a group of one (a task group's failure)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
