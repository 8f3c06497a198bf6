"""The node's pods as a runtime hook must see them: read again from the pod source at the hook, single-flight.

The agent's states are refreshed every ``--states-interval`` seconds by its loop; a pod the kubelet admitted
since then is unknown to it. Two pods created together (an LSR pod and an LS pod) then race: the LS pod's
CreateContainer hook computed the shared pool without the LSR pod's cpuset and handed the LS container the
whole pool (seen on a real node; the agent's reconcile fixed it a second later). So a hook that meets a pod
the agent does not know, or that hands out the shared pool, first asks the pod source again
(:meth:`agent.states.providers.StatesProvider.fetch_pods`: the kubelet's ``/pods``) with a short timeout, and
falls back to what the agent knows when the source does not answer. Upstream koordlet has no such read: its
hooks see its informer's pods (``statesInformer.GetAllPods``), updated by the kubelet ``/pods`` poll.

:class:`PodsRefresher` is that read, single-flight: concurrent hooks share one request. A read counts for a
hook only when it started after the hook did (``since``), so a hook never takes a list older than itself; a
hook arriving while an older read is in flight waits for it, then shares the next one (at most two reads deep,
whatever the number of hooks). After a failed read, hooks use the known pods for ``backoff`` seconds without
asking again, so a kubelet that hangs costs one timeout, not one per hook.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.cgroups import CgroupLayout
from agent.qos.cpuset import ResourceStatusError, parse_resource_status
from agent.states.pods import PodMeta, pod_meta
from agent.states.providers import StatesError
from app.api.topology import ANNOTATION_RESOURCE_STATUS

log = logging.getLogger("agent.runtimehooks")

#: Seconds a hook waits for the pod source (the proxy's ``--hook-timeout`` is 1 s: the hook must answer before).
DEFAULT_FETCH_TIMEOUT = 0.5
#: Seconds after a failed read during which hooks use the known pods without asking the source again.
DEFAULT_BACKOFF = 5.0


def exclusive_cpus(pods: Iterable[PodMeta]) -> frozenset[int]:
    """The cpus of the ``resource-status`` cpusets (LSE/LSR) of the active pods: they leave the shared pool (as
    :func:`agent.topologyreport.build_topology_status` takes them out); a malformed annotation is skipped."""
    out: set[int] = set()
    for pod in pods:
        if not pod.active:
            continue
        try:
            out |= parse_resource_status(pod.annotations.get(ANNOTATION_RESOURCE_STATUS)).cpuset
        except ResourceStatusError:
            continue  # logged by the cpuset strategy and the container hook
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class FreshPods:
    """One read of the node's pods.

    Attributes:
        by_uid: the pods by uid.
        exclusive_cpus: cpus held by their ``resource-status`` cpusets (:func:`exclusive_cpus`).
        fresh: read from the pod source for this hook (False: the agent's known pods, the source did not answer).
        started: ``time.monotonic()`` when the read began.
    """

    by_uid: Mapping[str, PodMeta] = field(default_factory=dict)
    exclusive_cpus: frozenset[int] = frozenset()
    fresh: bool = False
    started: float = 0.0

    @classmethod
    def of(cls, pods: Iterable[PodMeta], fresh: bool, started: float) -> FreshPods:
        """The read of ``pods``."""
        listed = list(pods)
        return cls({p.uid: p for p in listed}, exclusive_cpus(listed), fresh, started)


@dataclass(slots=True)
class _Flight:
    started: float
    done: threading.Event = field(default_factory=threading.Event)
    result: FreshPods | None = None


class PodsRefresher:
    """Single-flight reads of the node's pods for the runtime hooks (see the module docstring); thread-safe.

    Args:
        fetch: ``fetch(timeout) -> raw pods`` (:meth:`~agent.states.providers.StatesProvider.fetch_pods`);
            raises :class:`~agent.states.providers.StatesError`.
        known: the pods the agent knows now (the fallback).
        layout: the node's cgroup layout (for :func:`~agent.states.pods.pod_meta`).
        timeout: seconds a read may take.
        backoff: seconds without reads after a failed one.
        clock: monotonic seconds (tests).

    Attributes:
        reads: reads asked of the source so far (successful or not).
    """

    def __init__(
        self,
        fetch: Callable[[float], list[dict[str, Any]]],
        known: Callable[[], Iterable[PodMeta]],
        layout: CgroupLayout,
        *,
        timeout: float = DEFAULT_FETCH_TIMEOUT,
        backoff: float = DEFAULT_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fetch = fetch
        self.known = known
        self.layout = layout
        self.timeout = timeout
        self.backoff = backoff
        self.clock = clock
        self.reads = 0
        self._lock = threading.Lock()
        self._flight: _Flight | None = None
        self._last: FreshPods | None = None
        self._retry_at = -1e18
        self._failing = False

    def _fallback(self) -> FreshPods:
        return FreshPods.of(self.known(), fresh=False, started=self.clock())

    def get(self, since: float) -> FreshPods:
        """The node's pods read from the source at or after ``since`` (``time.monotonic()`` of the hook's
        start), shared with the concurrent hooks; the known pods when the source failed (logged once per
        failing spell) or failed less than ``backoff`` seconds ago. Never raises."""
        for _ in range(3):  # an older read in flight, then ours; a third round only if the clock stood still
            with self._lock:
                last = self._last
                if last is not None and last.started >= since:
                    return last
                if self.clock() < self._retry_at:
                    return self._fallback()
                flight = self._flight
                leader = flight is None
                if flight is None:
                    flight = self._flight = _Flight(self.clock())
            if leader:
                return self._read(flight)
            flight.done.wait(self.timeout + 1.0)
            if flight.started >= since and flight.result is not None:
                return flight.result
        return self._fallback()

    def _read(self, flight: _Flight) -> FreshPods:
        result: FreshPods | None = None
        try:
            self.reads += 1
            raw = self.fetch(self.timeout)
            result = FreshPods.of((pod_meta(p, self.layout) for p in raw), fresh=True, started=flight.started)
            if self._failing:
                log.info("runtime hooks: the pod source answers again")
            self._failing = False
        except StatesError as exc:
            self._retry_fail(f"{exc}")
        except Exception as exc:  # a hook must never fail because of this read
            log.exception("runtime hooks: reading the pods failed")
            self._retry_fail(f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                if result is not None:
                    self._last = result
                self._flight = None
            flight.result = result
            flight.done.set()
        return result if result is not None else self._fallback()

    def _retry_fail(self, why: str) -> None:
        with self._lock:
            self._retry_at = self.clock() + self.backoff
        if not self._failing:
            log.warning("runtime hooks: pods not read again (%s); using the known pods for %.0fs", why, self.backoff)
        self._failing = True
