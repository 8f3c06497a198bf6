"""One simulation run: a policy and a seed over a trace, every pod through the service's HTTP verbs.

The run is a coroutine on the in-process service's event loop: its verbs go over real HTTP
connections (:class:`~app.sim.transport.AsyncPoster`) to the uvicorn server on the same loop, and its
source writes and cache reads are direct awaits there, without a thread switch per call.

Per pod, as kube-scheduler with our extender (``nodeCacheCapable: true``) would: the pod is
created in the source, kube-scheduler's own node fit (:mod:`app.sim.fit`) selects the feasible
nodes, ``POST /filter`` with their names, ``POST /prioritize`` with the survivors (except for the
Random policy), the best extender score wins, ``POST /bind``. Ties among the best go by
:data:`TIE_BREAKS` (``order``, the authors' choice, is the static protocol's default so that
figures compare; ``random``, kube-scheduler's own, the timed default). A pod
that fails is recorded with its reason and not retried.

Gangs (:mod:`app.sim.gangs`; only when the run is given some): a member is created in the source when
it arrives and waits there (kube-scheduler's PreEnqueue would hold it: the gang lacks children) until
its gang's last member arrived. Then, member after member in arrival order, as kube-scheduler's
scheduling cycles: fit, ``/filter``, ``/prioritize``, the pod assumed in the sim's node fit, and its
``/bind`` sent on its own connection (a task on the loop) without waiting for the
answer; the next member starts once the service holds this one at Permit (or answered it), so every
member's ``/filter`` sees the earlier ones assumed. Once a member fails, the gang's remaining members
are not tried (a failed pod is not retried, so the gang cannot complete). The sim then waits for
every ``/bind`` of the gang before the next event: the gang is bound together, or its members are
rejected (Strict: by the service at once when a member's ``/filter`` found no node; after their
``waiting-time`` when kube-scheduler's own fit refused a member, as the extender is then not asked).
A bind refused releases its pod from the sim's node fit. Metrics follow the paper: GPU allocation
ratio (allocated milli-GPU over capacity, percent) at each whole percent of arrived GPU requests,
computed as the authors do (:mod:`app.sim.curve`), and the fragmentation ratio at 70 % and 90 %
arrived, the mean over the arrivals that round to them, as the authors compute it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from app.plugins.coscheduling.capacity import FAIL_FAST_MARK
from app.sim.allocations import GpuUsage, GpuUsageTracker, check_allocations
from app.sim.answers import AnswerError, HostScore, VerbError, decode_bind, decode_filter, decode_prioritize
from app.sim.curve import allocation_curve
from app.sim.errors import SimInputError
from app.sim.fit import NodeFit, pod_vector
from app.sim.fragmentation import FragmentationFn, fragmentation_ratio
from app.sim.gangs import DEFAULT_GANG_WAIT, GangStats, SimGang, check_gang_wait, gang_annotations
from app.sim.objects import NAMESPACE, device_object, node_object, pod_object
from app.sim.policies import Policy
from app.sim.service import InProcessService, settle
from app.sim.trace import MILLI_PER_GPU, TraceNode, TracePod
from app.sim.transport import AsyncPoster
from app.sim.workload import Arrival, EventKind, SimEvent

#: Arrived-workload percentages (of GPU capacity) reported in the JSON output.
ALLOCATION_POINTS: tuple[int, ...] = (100, 130)
FRAGMENTATION_POINTS: tuple[int, ...] = (70, 90)
VERBS: tuple[str, ...] = ("filter", "prioritize", "bind")

#: How a run picks among nodes with the best score.
#:
#: - ``order``: the first in a node order drawn once per run with the seed. The authors' simulator
#:   (hkust-adsl/kubernetes-scheduler-simulator) prefixes every node name with its index in a seeded
#:   random permutation (``syncClusterResourceList``) and patches selectHost to take the smallest
#:   name on ties "for reproducibility" (vendor/.../scheduler/core/generic_scheduler.go).
#: - ``name``: the smallest node name (byte order).
#: - ``random``: uniformly, kube-scheduler's reservoir sampling in ``selectHost``.
TIE_BREAKS: tuple[str, ...] = ("order", "name", "random")

#: How ``failed_pods`` names a member refused by Coscheduling's fail-fast capacity check (the service's
#: message names the gang and its figures, one distinct reason per gang otherwise).
FAIL_FAST_REASON = "filter: Coscheduling fail-fast: the gang cannot fit the cluster's free capacity"
#: How ``failed_pods`` names a gang member not tried because an earlier member of its gang failed.
GANG_NOT_TRIED_REASON = "gang: not tried, an earlier member of its gang failed"
#: How ``failed_pods`` names a gang member whose gang lost a member before it was complete (timed mode).
GANG_BROKEN_REASON = "gang: a member left before the gang was complete"
#: Seconds between two looks at whether the service holds a gang member at Permit.
PERMIT_POLL_SECONDS = 0.0005


def check_tie_break(name: str) -> str:
    """``name`` when it is one of :data:`TIE_BREAKS`.

    Raises:
        SimInputError: any other name (the message lists the known ones).
    """
    if name not in TIE_BREAKS:
        raise SimInputError(f"--tie-break: must be one of {', '.join(TIE_BREAKS)}, got {name!r}")
    return name


@dataclass(slots=True)
class SimResult:
    """What one run measured.

    Attributes:
        curve: allocation ratio (percent) at each whole arrived percent 0, 1, 2, ... reached
            (:func:`app.sim.curve.allocation_curve`: the mean over the arrivals that round to it).
        frag: fragmentation ratio (percent) at :data:`FRAGMENTATION_POINTS` (None: not measurable).
        failed: failed pods by reason.
        wall_seconds: wall time of the scheduling loop (service start and cluster load excluded).
        client_seconds / server_seconds: per verb, time spent waiting on HTTP (client side) and
            answering inside the handler (server side, from the service's latency histogram).
        problems: findings of :func:`app.sim.allocations.check_allocations` at the end.
        workload: the pod list's name (its file stem, e.g. ``openb_pod_list_default``); "" unknown.
        gangs: what the run counted about gangs (:class:`~app.sim.gangs.GangStats`); None when the run
            replays no gangs (then the JSON record has no ``gangs`` key, as before gangs existed).
    """

    policy: str
    seed: int
    workload: str = ""
    curve: list[float] = field(default_factory=list)
    frag: dict[int, float | None] = field(default_factory=dict)
    failed: Counter[str] = field(default_factory=Counter)
    arrived_pods: int = 0
    scheduled_pods: int = 0
    wall_seconds: float = 0.0
    client_seconds: dict[str, float] = field(default_factory=dict)
    server_seconds: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    gangs: GangStats | None = None

    def allocation_at(self, percent: int) -> float | None:
        """Allocation ratio when arrived GPU requests reached ``percent`` % of capacity (None: never)."""
        return self.curve[percent] if percent < len(self.curve) else None

    def to_json(self) -> dict[str, Any]:
        """The JSON record: workload, policy, seed, gpu_allocation_ratio, frag_ratio, failed_pods, wall_seconds,
        and ``gangs`` (:meth:`GangStats.to_json`) when the run replayed gangs."""
        record = {
            "workload": self.workload,
            "policy": self.policy,
            "seed": self.seed,
            "gpu_allocation_ratio": {str(p): _round(self.allocation_at(p)) for p in ALLOCATION_POINTS},
            "frag_ratio": {str(p): _round(self.frag.get(p)) for p in FRAGMENTATION_POINTS},
            "failed_pods": dict(sorted(self.failed.items(), key=lambda kv: (-kv[1], kv[0]))),
            "wall_seconds": round(self.wall_seconds, 2),
        }
        if self.gangs is not None:
            record["gangs"] = self.gangs.to_json()
        return record


#: Path of each verb.
_PATHS = {verb: f"/{verb}" for verb in VERBS}
#: The score of one ``HostPriority`` of a ``/prioritize`` answer.
_SCORE = attrgetter("Score")
#: The node name of one ``HostPriority``.
_HOST = attrgetter("Host")


async def _answered(poster: AsyncPoster, path: str, body: bytes) -> tuple[int, bytes, float]:
    """``poster.post(path, body)`` and ``time.perf_counter()`` when the answer was read."""
    status, content = await poster.post(path, body)
    return status, content, time.perf_counter()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _most_common(reasons: dict[str, str]) -> str:
    """The reason given by the most nodes (ties: alphabetical), kube-scheduler's diagnosis in short."""
    counts = Counter(reasons.values())
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


class Simulation:
    """Drives one run against a started :class:`InProcessService`.

    Args:
        service: the running service (fresh: the run loads the cluster into it).
        nodes: the cluster.
        policy: how to choose among feasible nodes.
        seed: RNG seed for random tie-breaks and the Random policy (the arrival order is drawn by the caller).
        fragmentation: F_n bound to the target workload, or None (no fragmentation metric).
        progress: called with the number of events processed so far, now and then.
        tie_break: one of :data:`TIE_BREAKS`.
        gangs: the gang of each arrival uid that belongs to one (:func:`app.sim.gangs.plan_gangs`); None:
            the run replays no gangs (an empty dict: it does, and reports the counts, all zero).
        gang_wait: seconds each gang waits at Permit (its members' ``waiting-time``).

    Raises:
        SimInputError: unknown ``tie_break``, or ``gang_wait`` outside (0, 900].
    """

    def __init__(
        self,
        service: InProcessService,
        nodes: list[TraceNode],
        policy: Policy,
        seed: int,
        fragmentation: FragmentationFn | None = None,
        progress: Callable[[int], None] | None = None,
        tie_break: str = "random",
        gangs: dict[str, SimGang] | None = None,
        gang_wait: float = DEFAULT_GANG_WAIT,
    ) -> None:
        self.tie_break = check_tie_break(tie_break)
        self.gang_wait = check_gang_wait(gang_wait)
        self.gangs = gangs or {}
        self.service = service
        self.nodes = nodes
        self.policy = policy
        self.rng = np.random.default_rng(seed)
        self.fit = NodeFit(nodes)
        self.rows = {n.name: i for i, n in enumerate(nodes)}
        # the run's node order for ``order`` tie-breaks (its own stream: the arrival RNG is untouched)
        # (row i has rank order[i]; node names as an object array, to pick the request's names in C)
        self._rank = np.random.default_rng([seed, 1]).permutation(len(nodes)).astype(np.int64)
        self._names = np.array(self.fit.names, dtype=object)
        ranks = self._rank.tolist()
        self._rank_of = {name: ranks[row] for name, row in self.rows.items()}  # node name -> its rank
        self._by_rank: list[str] = [""] * len(nodes)  # rank -> node name (the inverse of _rank_of)
        for name, rank in self._rank_of.items():
            self._by_rank[rank] = name
        self.gpus = np.array([n.gpu for n in nodes], dtype=np.int64)
        self.capacity = int(self.gpus.sum()) * MILLI_PER_GPU
        self.fragmentation = fragmentation
        self.progress = progress
        self.result = SimResult(policy.name, seed)
        self.result.client_seconds = dict.fromkeys(VERBS, 0.0)
        self._bound: dict[str, tuple[int, npt.NDArray[np.int64], int]] = {}  # uid -> row, vector, gpu milli
        self._pending: set[str] = set()
        self._vectors: dict[int, npt.NDArray[np.int64]] = {}
        self._arrived = 0
        self._allocated = 0
        self._next_point = 0
        self._arrived_log: list[int] = []  # arrived / allocated GPU milli after each arrival
        self._allocated_log: list[int] = []
        self._frag_samples: dict[int, list[float]] = {p: [] for p in FRAGMENTATION_POINTS}
        self._usage = GpuUsageTracker(self.rows)
        self._usage_changed: list[str] = []  # uids bound or deleted since the last usage read
        self._models = [n.model for n in nodes]
        if gangs is not None:
            self.result.gangs = GangStats(planned=len({id(g) for g in gangs.values()}))
        self._gang_arrived: dict[str, list[tuple[Arrival, dict[str, Any], npt.NDArray[np.int64]]]] = {}
        self._gang_closed: set[str] = set()  # gangs scheduled or broken: members arriving later fail
        self._poster = AsyncPoster("127.0.0.1", service.port)  # the verb loop's connection (closed after each run)
        self._gang_posters: list[AsyncPoster] = []  # a gang's binds in flight together, one connection each

    @property
    def allocated_milli(self) -> int:
        """GPU milli of the pods bound now (the sim's own count)."""
        return self._allocated

    @property
    def bound_gpu_pods(self) -> int:
        """GPU pods bound now."""
        return sum(1 for _, _, milli in self._bound.values() if milli > 0)

    # ------------------------------------------------------------------ cluster
    def load_cluster(self) -> None:
        """Write every Node and Device into the service's source."""
        objects: list[dict[str, Any]] = []
        for node in self.nodes:
            objects.append(node_object(node))
            device = device_object(node)
            if device is not None:
                objects.append(device)
        source = self.service.source

        async def write() -> None:
            for obj in objects:
                await source.create_or_update(obj)

        self.service.call(write)

    # ------------------------------------------------------------------ run
    def run(self, events: list[SimEvent]) -> SimResult:
        """Process ``events`` in order and return the result (also kept in :attr:`result`).

        The run is a coroutine on the service's own event loop (``progress`` is called there): its
        verbs go over real HTTP connections to the server without a thread switch per call.

        Raises:
            VerbError: the service answered a verb with an HTTP error.
        """
        return self.service.call(lambda: self._run(events))

    async def _run(self, events: list[SimEvent]) -> SimResult:
        start = time.perf_counter()
        before = self._server_seconds()
        try:
            await self._record_fragmentation()
            for i, event in enumerate(events):
                if event.kind is EventKind.ARRIVE:
                    await self._arrive(event)
                else:
                    await self._depart(event)
                if self.progress is not None and i % 64 == 0:
                    self.progress(i)
            self.result.wall_seconds = time.perf_counter() - start
        finally:
            await self._poster.aclose()
            for poster in self._gang_posters:
                await poster.aclose()
            self._gang_posters.clear()
        if self.capacity:
            self.result.curve = allocation_curve(self._arrived_log, self._allocated_log, self.capacity)
        for point, samples in self._frag_samples.items():
            if samples:
                self.result.frag[point] = sum(samples) / len(samples)
        after = self._server_seconds()
        self.result.server_seconds = {v: after[v] - before[v] for v in VERBS}
        if self.progress is not None:
            self.progress(len(events))
        self.result.problems = await self._check()
        return self.result

    def check(self) -> list[str]:
        """The service's GPU accounting problems now (empty list: consistent); see :func:`check_allocations`."""
        return self.service.call(self._check)

    async def _check(self) -> list[str]:
        await settle()
        problems = check_allocations(self.service.state.cache, self.rows, self.gpus)
        if self._allocated > self.capacity:
            problems.append(f"allocated {self._allocated} milli-GPU above capacity {self.capacity}")
        return problems

    def gpu_usage(self) -> GpuUsage:
        """Per-slot GPU use now, as the service's annotations record it: what
        :func:`app.sim.allocations.read_gpu_usage` reads, re-reading only the pods bound or deleted
        since the last call (:class:`~app.sim.allocations.GpuUsageTracker`)."""
        return self.service.call(self._gpu_usage)

    async def _gpu_usage(self) -> GpuUsage:
        changed, self._usage_changed = self._usage_changed, []
        await settle()
        return self._usage.update(self.service.state.cache, changed)

    def _server_seconds(self) -> dict[str, float]:
        """Seconds the service spent answering each of :data:`VERBS` so far: the ``_sum`` of its latency
        histogram ``koord_extender_request_duration_seconds{verb}``, read from that histogram alone (the
        registry's ``get_sample_value`` collects every collector of the service, per verb)."""
        out = dict.fromkeys(VERBS, 0.0)
        for family in self.service.state.metrics.latency.collect():
            for sample in family.samples:
                verb = sample.labels.get("verb")
                if sample.name.endswith("_sum") and verb in out:
                    out[verb] = float(sample.value)
        return out

    def _vector(self, pod: TracePod) -> npt.NDArray[np.int64]:
        vec = self._vectors.get(id(pod))
        if vec is None:
            vec = self._vectors[id(pod)] = pod_vector(pod)
        return vec

    async def _arrive(self, event: SimEvent) -> None:
        arrival = event.arrival
        pod = arrival.pod
        gang = self.gangs.get(arrival.uid)
        annotations = gang_annotations(gang, self.gang_wait) if gang is not None else None
        obj = pod_object(pod, arrival.name, arrival.uid, annotations)
        created = await self.service.source.create_or_update(obj)
        await asyncio.sleep(0)  # deliver the watch event the write scheduled with call_soon
        obj["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]  # as kube-scheduler's copy
        self.result.arrived_pods += 1
        self._pending.add(arrival.uid)
        vec = self._vector(pod)
        if gang is not None:
            await self._gang_arrive(gang, arrival, obj, vec)
        else:
            node = await self._schedule(pod, obj, vec)
            if node is not None:
                row = self.rows[node]
                self.fit.add(row, vec)
                self._record_bound(arrival, row, vec)
        self._arrived += pod.gpu_total_milli
        self._arrived_log.append(self._arrived)
        self._allocated_log.append(self._allocated)
        await self._record_fragmentation()

    def _record_bound(self, arrival: Arrival, row: int, vec: npt.NDArray[np.int64]) -> None:
        """``arrival`` is bound on node ``row`` (already added to the node fit)."""
        self._bound[arrival.uid] = (row, vec, arrival.pod.gpu_total_milli)
        self._usage_changed.append(arrival.uid)
        self._pending.discard(arrival.uid)
        self._allocated += arrival.pod.gpu_total_milli
        self.result.scheduled_pods += 1

    async def _depart(self, event: SimEvent) -> None:
        arrival = event.arrival
        bound = self._bound.pop(arrival.uid, None)
        if bound is None and arrival.uid not in self._pending:
            return
        gang = self.gangs.get(arrival.uid)
        if gang is not None and gang.name in self._gang_arrived:
            self._break_gang(gang)
        self._pending.discard(arrival.uid)
        await self.service.source.delete("Pod", arrival.name, namespace=NAMESPACE)
        await asyncio.sleep(0)  # deliver the DELETED event
        self._usage_changed.append(arrival.uid)
        if bound is not None:
            row, vec, milli = bound
            self.fit.remove(row, vec)
            self._allocated -= milli

    async def _post(self, verb: str, body: dict[str, Any]) -> bytes:
        """``POST /verb`` with ``body`` as JSON; the answer's bytes (decoded by :mod:`app.sim.answers`).

        Raises:
            VerbError: the service answered with an HTTP error.
        """
        t0 = time.perf_counter()
        status, content = await self._poster.post(_PATHS[verb], orjson.dumps(body))
        self.result.client_seconds[verb] += time.perf_counter() - t0
        if status != 200:
            raise VerbError(f"/{verb} answered {status}: {content.decode(errors='replace')}")
        return content

    async def _schedule(self, pod: TracePod, obj: dict[str, Any], vec: npt.NDArray[np.int64]) -> str | None:
        """Schedule one pod; the chosen node, or None with the failure recorded."""
        node, reason = await self._choose(pod, obj, vec)
        if node is None:
            self.result.failed[reason] += 1
            return None
        meta = obj["metadata"]
        bound = decode_bind(
            await self._post(
                "bind",
                {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node},
            )
        )
        if bound.Error:
            self.result.failed[f"bind: {bound.Error}"] += 1
            return None
        return node

    async def _choose(self, pod: TracePod, obj: dict[str, Any], vec: npt.NDArray[np.int64]) -> tuple[str | None, str]:
        """kube-scheduler's scheduling cycle for one pod: (the chosen node, "") or (None, the failure reason)."""
        rows = self.fit.feasible(pod, vec)
        if len(rows) == 0:
            reasons = self.fit.reasons(pod, vec)
            reason = min(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0] if reasons else "no nodes"
            return None, f"node-fit: {reason}"
        sent: list[str] = self._names[rows].tolist()
        answer = decode_filter(await self._post("filter", {"Pod": obj, "Nodes": None, "NodeNames": sent}))
        if answer.Error:
            return None, f"filter: {answer.Error}"
        survivors = answer.NodeNames or []
        if not survivors:
            failed = answer.failed()  # only read here: decoded only when no node passed
            return None, f"filter: {_most_common(failed)}" if failed else "filter: no node passed"
        if self.policy.prioritize and len(survivors) > 1:
            scores = decode_prioritize(
                await self._post("prioritize", {"Pod": obj, "Nodes": None, "NodeNames": survivors})
            )
            node = self._best(scores)
        else:
            node = survivors[int(self.rng.integers(len(survivors)))]
        return node, ""

    def _best(self, scores: list[HostScore]) -> str:
        """The host of ``scores`` (a ``/prioritize`` answer) with the highest score, ties broken by
        :attr:`tie_break`. Only the best hosts' names are read (a few are tied).

        Raises:
            AnswerError: ``scores`` is empty.
        """
        if not scores:
            raise AnswerError("/prioritize answered no scores for the nodes sent")
        values = np.fromiter(map(_SCORE, scores), dtype=np.int64, count=len(scores))
        top: list[int] = np.flatnonzero(values == values.max()).tolist()
        if len(top) == 1:  # (``rng.integers(1)`` draws nothing: the random stream is the same)
            return scores[top[0]].Host
        # Often most of the ~1,000 hosts, or all of them, tie (empty nodes score alike): one pass in C
        # over the tied entries (all of ``scores`` without a tuple of them when every host ties)
        tied = map(_HOST, scores if len(top) == len(scores) else itemgetter(*top)(scores))
        if self.tie_break == "order":
            # the ranks are a permutation of the nodes (the answer names only nodes we sent): the
            # smallest is unique, so no second key is needed; the min over the ranks themselves (no
            # key function called per host) and the name of that rank (a host we did not send: KeyError)
            return self._by_rank[min(map(self._rank_of.__getitem__, tied))]
        if self.tie_break == "name":
            return min(tied)
        return scores[top[int(self.rng.integers(len(top)))]].Host

    # ------------------------------------------------------------------ gangs
    async def _gang_arrive(
        self, gang: SimGang, arrival: Arrival, obj: dict[str, Any], vec: npt.NDArray[np.int64]
    ) -> None:
        """A member arrived: kept until its gang's last member arrives, then the gang is scheduled."""
        if gang.name in self._gang_closed:
            self.result.failed[GANG_BROKEN_REASON] += 1
            return
        arrived = self._gang_arrived.setdefault(gang.name, [])
        arrived.append((arrival, obj, vec))
        if len(arrived) == gang.size:
            del self._gang_arrived[gang.name]
            self._gang_closed.add(gang.name)
            await self._schedule_gang(gang, arrived)

    def _break_gang(self, gang: SimGang) -> None:
        """A member of ``gang`` left before the gang was complete: its arrived members fail, so will the rest."""
        arrived = self._gang_arrived.pop(gang.name)
        self._gang_closed.add(gang.name)
        self.result.failed[GANG_BROKEN_REASON] += len(arrived)
        stats = self.result.gangs
        if stats is not None:
            stats.failed += 1

    def _gang_reason(self, gang: SimGang, reason: str) -> str:
        """``reason`` with the gang's id and member names replaced by ``<gang>`` and ``<member>`` (one
        ``failed_pods`` key for every gang failing the same way); fail-fast refusals as :data:`FAIL_FAST_REASON`."""
        if FAIL_FAST_MARK in reason:
            return FAIL_FAST_REASON
        reason = reason.replace(f"{NAMESPACE}/{gang.name}", "<gang>")
        for name in sorted((m.name for m in gang.members), key=len, reverse=True):
            reason = reason.replace(name, "<member>")
        return reason

    async def _schedule_gang(
        self, gang: SimGang, members: list[tuple[Arrival, dict[str, Any], npt.NDArray[np.int64]]]
    ) -> None:
        """Schedule every member of ``gang`` and wait for all of their binds (see the module docstring)."""
        while len(self._gang_posters) < len(members):  # one connection per bind in flight
            self._gang_posters.append(AsyncPoster("127.0.0.1", self.service.port, timeout=self.gang_wait + 60.0))
        inflight: list[tuple[Arrival, int, npt.NDArray[np.int64], float, asyncio.Task[tuple[int, bytes, float]]]] = []
        failed = fail_fast = False
        for arrival, obj, vec in members:
            if failed:
                self.result.failed[GANG_NOT_TRIED_REASON] += 1
                continue
            node, reason = await self._choose(arrival.pod, obj, vec)
            if node is None:
                failed = True
                fail_fast = FAIL_FAST_MARK in reason
                self.result.failed[self._gang_reason(gang, reason)] += 1
                continue
            row = self.rows[node]
            self.fit.add(row, vec)  # kube-scheduler assumes the pod before its binding cycle
            body = {"PodName": arrival.name, "PodNamespace": NAMESPACE, "PodUID": arrival.uid, "Node": node}
            sent = time.perf_counter()
            task = asyncio.ensure_future(
                _answered(self._gang_posters[len(inflight)], _PATHS["bind"], orjson.dumps(body))
            )
            await self._await_permit(arrival.uid, task)
            inflight.append((arrival, row, vec, sent, task))
        held = 0.0
        for arrival, row, vec, sent, task in inflight:
            status, content, answered = await task
            self.result.client_seconds["bind"] += answered - sent
            if status != 200:
                raise VerbError(f"/bind answered {status}: {content.decode(errors='replace')}")
            held += (answered - sent) * arrival.pod.gpu_total_milli / MILLI_PER_GPU
            error = decode_bind(content).Error
            if error:
                failed = True
                self.fit.remove(row, vec)
                self.result.failed[self._gang_reason(gang, f"bind: {error}")] += 1
            else:
                self._record_bound(arrival, row, vec)
        stats = self.result.gangs
        if stats is not None:
            stats.waiting_gpu_seconds += held
            stats.failed += failed
            stats.completed += not failed
            stats.fail_fast += fail_fast

    async def _await_permit(self, uid: str, task: asyncio.Task[tuple[int, bytes, float]]) -> None:
        """Return once the service holds pod ``uid`` at Permit (assumed: the next member's ``/filter`` sees
        it) or answered its ``/bind``."""
        waiting = self.service.state.framework.waiting_pods
        while not task.done():
            await settle()
            if waiting.get(uid) is not None:
                return
            await asyncio.sleep(PERMIT_POLL_SECONDS)

    # ------------------------------------------------------------------ metrics
    async def _record_fragmentation(self) -> None:
        """Fragmentation after the latest arrival, measured at most once per arrival.

        Each arrival whose arrived ratio rounds to one of :data:`FRAGMENTATION_POINTS` adds a sample;
        the point reports their mean at the end of the run (the authors' ``merge_frag_ratio_discrete.py``).
        The value at the arrival that first crosses the point is kept as the fallback for a point no
        arrival rounds to. (The allocation curve comes from the per-arrival log, :mod:`app.sim.curve`.)
        """
        if self.capacity == 0:
            return
        point = round(self._arrived * 100 / self.capacity)
        samples = self._frag_samples.get(point) if self.fragmentation is not None else None
        value = await self._fragmentation() if samples is not None else None
        if samples is not None and value is not None:
            samples.append(value)
        while self._arrived * 100 >= self._next_point * self.capacity:
            if self._next_point in FRAGMENTATION_POINTS:
                crossed = value if samples is not None and point == self._next_point else await self._fragmentation()
                self.result.frag[self._next_point] = crossed
            self._next_point += 1

    async def _fragmentation(self) -> float | None:
        if self.fragmentation is None:
            return None
        usage = await self._gpu_usage()
        if usage.unannotated_pods:
            return None  # the service recorded no per-GPU placement (DeviceShare inactive)
        free = self.fit.free_by_resource()
        return fragmentation_ratio(self.fragmentation, free[0], free[1], usage.gpu_free_milli(), self._models)
