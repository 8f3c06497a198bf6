"""Retrying the gang members ``/filter`` refused while their gang was incomplete, once it is complete.

Upstream's Coscheduling runs inside the scheduler: when a gang's last child arrives (``onPodAdd``) or its
PodGroup appears (``onPodGroupAdd``) it calls the scheduling queue's ``Activate`` for the gang, and the
members PreEnqueue held come back at once. An extender cannot reach kube-scheduler's queue. The members
it refused (``can't find gang``, ``gang has not init``, ``child pod not collect enough``) sit in
kube-scheduler's unschedulable queue, which only a cluster event lets go (up to 5 minutes without one,
kube-scheduler's ``podMaxInUnschedulablePodsDuration``). What the extender can do is make kube-scheduler
see an update of each refused member: an update of a pod in the unschedulable queue moves it to the
active queue (or the backoff queue while it backs off: at most 10 s), ``PriorityQueue.Update`` in
kube-scheduler v1.26.

So :class:`GangRetry` records each member refused for one of those reasons, by gang; when a cache
event (a Pod or PodGroup of the gang's group) leaves the gang complete — every gang of its group exists,
is initialised and has at least minMember children, or the group is once satisfied under
``once-satisfied``, exactly the PreFilter checks that refused them — its refused members are due, and
:meth:`GangRetry.send_due` (the plugin's background loop, on the leader only: the replica kube-scheduler
calls) writes on each one a JSON merge patch of :data:`~app.api.coscheduling.ANNOTATION_GANG_STATE`,
``{"gang", "children", "minMember", "completeAt"}`` (RFC 3339, microseconds, so that every write
changes the pod). The writes go through a token bucket (:data:`RETRY_QPS` per second, bursts of
:data:`RETRY_BURST`). A refused member that is bound or deleted meanwhile is forgotten; a write the API
refuses is retried up to :data:`MAX_ATTEMPTS` times; a pod gone (404) is dropped.

The annotation lives under ``gang.scheduling.koordinator.sh/``, the domain of the gang annotations every
member already carries (name, min-available, ...) and of upstream's scheduler-written
``gang.scheduling.koordinator.sh/timeout``: it is about the pod's gang and is read by nobody. Costs: O(1)
per cache event for gangs with nothing refused; a completion costs one check of the group.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from app.api import coscheduling as n
from app.cache.listener import CacheListener
from app.cache.podinfo import PodInfo
from app.client.errors import ApiError, NotFound
from app.plugins.coscheduling.cache import GangCache
from app.sources.base import ClusterClient

log = logging.getLogger(__name__)

#: Patches per second and the burst the token bucket allows (client-go's default rate is 5/s with bursts
#: of 10 for a whole client; these are for retries alone, a gang of 40 goes at once).
RETRY_QPS = 20.0
RETRY_BURST = 40
#: Attempts per member when the API refuses the patch (not counting a 404, which ends it at once).
MAX_ATTEMPTS = 3


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; starts full.

    Args:
        qps: tokens per second (> 0).
        burst: the most tokens held (>= 1).
        clock: monotonic seconds.

    Raises:
        ValueError: ``qps`` not > 0 or ``burst`` < 1.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if not qps > 0 or burst < 1:
            raise ValueError(f"token bucket: qps must be > 0 and burst >= 1, got {qps} and {burst}")
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.stamp = clock()

    def delay(self) -> float:
        """Take one token: 0 when one was saved, else the seconds to wait before using it (the token is
        taken now, so successive callers queue up ``1 / qps`` apart)."""
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps


@dataclass(frozen=True, slots=True)
class Refused:
    """A member ``/filter`` refused: who, and the gang it waits for."""

    namespace: str
    name: str
    uid: str
    gang: str


@dataclass(slots=True)
class Due:
    """A refused member whose gang is complete: the annotation value to write, and attempts so far."""

    who: Refused
    value: str
    attempts: int = 0


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class GangRetry(CacheListener):
    """Refused members by gang, and the members due for a retry (see the module docstring).

    Register it after the :class:`~app.plugins.coscheduling.cache.GangCache` it reads, so that it sees
    each event after the gang cache applied it.

    Args:
        gangs: the gang cache.
        clock: epoch seconds (the annotation's ``completeAt``).
    """

    def __init__(self, gangs: GangCache, clock: Callable[[], float]) -> None:
        self.gangs = gangs
        self.clock = clock
        #: gang id -> pod key -> the refused member
        self.refused: dict[str, dict[str, Refused]] = {}
        #: pod key -> the due retry, in the order they became due
        self.due: dict[str, Due] = {}
        #: patches written (for the tests and the log)
        self.sent = 0

    # ------------------------------------------------------------------ recording
    def record(self, gang_id: str, pod: PodInfo) -> None:
        """``pod`` was refused because gang ``gang_id`` (or its group) is not complete yet."""
        if pod.node_name:
            return
        self.refused.setdefault(gang_id, {})[pod.key] = Refused(pod.namespace, pod.name, pod.uid, gang_id)

    def complete(self, gang_id: str) -> bool:
        """Whether PreFilter's gang checks pass now for a member of ``gang_id``: the gang exists and is
        initialised, and its group is once satisfied under ``once-satisfied`` or every gang of the group
        exists, is initialised and has at least minMember children."""
        gang = self.gangs.get(gang_id)
        if gang is None or not gang.has_init:
            return False
        if gang.match_policy == n.MATCH_POLICY_ONCE_SATISFIED and gang.once_satisfied:
            return True
        for member_id in gang.gang_group:
            member = self.gangs.get(member_id)
            if member is None or not member.has_init or len(member.children) < member.min_required:
                return False
        return True

    def _check(self, gang_id: str) -> None:
        """Make due the refused members of every gang of ``gang_id``'s group that is complete now."""
        if not self.refused:
            return
        gang = self.gangs.get(gang_id)
        for member_id in dict.fromkeys([gang_id, *(gang.gang_group if gang is not None else ())]):
            waiting = self.refused.get(member_id)
            if not waiting or not self.complete(member_id):
                continue
            del self.refused[member_id]
            member = self.gangs.get(member_id)
            assert member is not None  # complete() found it
            value = orjson.dumps(
                {
                    "gang": member_id,
                    "children": len(member.children),
                    "minMember": member.min_required,
                    "completeAt": _stamp(self.clock()),
                }
            ).decode()
            for key, who in waiting.items():
                self.due[key] = Due(who, value)
            log.info("gang %s is complete: %d refused member(s) due for a retry", member_id, len(waiting))

    # ------------------------------------------------------------------ events
    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """A refused member bound or deleted needs no retry; any member's event may complete its gang."""
        if not self.refused and not self.due:
            return  # the common case: nothing waits for a retry
        pod = new or old
        if pod is None:
            return
        name = n.gang_name(pod.labels, pod.annotations)
        if not name:
            return
        gang_id = n.gang_id(pod.namespace, name)
        if new is None or new.node_name:
            waiting = self.refused.get(gang_id)
            if waiting is not None and waiting.pop(pod.key, None) is not None and not waiting:
                del self.refused[gang_id]
            self.due.pop(pod.key, None)
        self._check(gang_id)

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """A PodGroup added or changed may complete (or initialise) its gang."""
        if kind == "PodGroup" and obj is not None:
            self._check(key)

    # ------------------------------------------------------------------ writing
    async def send_due(self, client: ClusterClient, bucket: TokenBucket) -> int:
        """Write the annotation on every due member, paced by ``bucket``; returns the patches written.
        Entries that become due meanwhile are sent in the same call."""
        sent = 0
        while self.due:
            key, due = next(iter(self.due.items()))
            del self.due[key]
            wait = bucket.delay()
            if wait > 0:
                await asyncio.sleep(wait)
            who = due.who
            patch = {"metadata": {"annotations": {n.ANNOTATION_GANG_STATE: due.value}}}
            try:
                await client.patch("Pod", who.name, patch, namespace=who.namespace)
            except NotFound:
                log.debug("gang retry: pod %s is gone", key)
                continue
            except ApiError as exc:
                due.attempts += 1
                if due.attempts < MAX_ATTEMPTS and key not in self.due:
                    self.due[key] = due
                log.warning("gang retry: patching pod %s failed (attempt %d): %s", key, due.attempts, exc)
                continue
            sent += 1
            self.sent += 1
            log.debug("gang retry: pod %s of gang %s updated for kube-scheduler to retry it", key, who.gang)
        return sent
