"""The Reservation plugin (upstream ``pkg/scheduler/plugins/reservation/plugin.go``, ``scoring.go``).

- PreFilter: the pod's candidate reservations per node (:mod:`.matching`); Skip for
  ``reservation-ignored`` pods and when nothing is reserved; a pod with ``reservation-affinity`` that
  matches no active reservation fails every node (``node(s) no reservations match reservation affinity``).
- Filter: nodes without a candidate: reserved capacity counts as used (:mod:`.fit`,
  ``Insufficient cpu (reserved)``), and each active reservation holds one pod slot (``Too many pods
  (reserved)``); nodes with candidates: the pod fits one of them (Aligned /
  Restricted / pods limit) or, without affinity, the node alone. An owner of a Reservation made for a
  PodMigrationJob that fits it keeps only the nodes of such Reservations (koordinator-py's reservation-first
  migration: the extender's score alone does not outweigh kube-scheduler's own at weight 1).
- PreScore / Score / NormalizeScore: the node with the smallest positive ``reservation-order`` gets
  1000, else the best MostAllocated score over its fitting reservations; then upstream's
  DefaultNormalizeScore to 0..100. Skip for pods without candidates.
- Reserve / Unreserve: the pod is charged to the chosen reservation (smallest order, then best score)
  and uncharged when the binding fails.
- PreBind: writes ``scheduling.koordinator.sh/reservation-allocated`` = ``{"name","uid"}`` on the pod.
- Background (leader only): places pending reservations (:mod:`.placement`) with backoff, preempting
  lower-priority pods for those with a priority of their own (:mod:`.preemption`: victims evicted through
  the Eviction API, ``status.nominatedNodeName`` written, the nominated node tried first next time), and
  runs the controller (:mod:`.controller`).
- REST: ``nodeReservations/{node}`` (upstream's path), ``reservations`` and a Reservation's ``explain``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import orjson

from app.api.reservation import is_migration_reservation
from app.cache.listener import CacheListener
from app.cache.podinfo import PodInfo
from app.client.errors import ApiError, NotFound
from app.framework.config import ArgsError
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import (
    BackgroundPlugin,
    FilterFailures,
    FilterPlugin,
    NodeBatch,
    NormalizeScorePlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservationNominator,
    ReservationPreBindPlugin,
    ReservePlugin,
    ServiceProvider,
)
from app.framework.status import SUCCESS, Status
from app.plugins.reservation import names as n
from app.plugins.reservation.affinity import AffinityError
from app.plugins.reservation.conditions import available_patch, unschedulable_patch, waiting_patch
from app.plugins.reservation.controller import decide
from app.plugins.reservation.explain import explain_reservation
from app.plugins.reservation.fit import (
    fits_reservation,
    node_reason,
    reserved_reason,
    reserved_shortfalls,
    score_reservation,
)
from app.plugins.reservation.matching import PodReservations, match_pod
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.placement import Placement, place
from app.plugins.reservation.preallocation import find_pre_allocatable
from app.plugins.reservation.preemption import (
    Nomination,
    choose,
    find_candidates,
    not_eligible_reason,
    reservation_priority,
    victim_view,
)
from app.plugins.reservation.store import ReservationStore
from app.plugins.reservation.views import node_reservations_view, reservation_view

log = logging.getLogger(__name__)

NAME = n.NAME
_STATE = f"{NAME}/pod"
_SKIP = Status.skip()
_CHOSEN = f"{NAME}/chosen"
#: Shared by every node failing a pod's reservation affinity (a Status is immutable).
_AFFINITY_MISMATCH = Status.unresolvable(n.ERR_REASON_RESERVATION_AFFINITY)
#: Every node but those of a fitting migration Reservation, for an owner of one.
_NOT_MIGRATION_NODE = Status.unresolvable(n.ERR_REASON_MIGRATION_RESERVATION)
#: Seconds between two placement rounds and between two controller rounds.
PLACEMENT_INTERVAL = 0.2
CONTROLLER_INTERVAL = 1.0
#: Reservations the controller looks at between two yields to the event loop.
YIELD_EVERY = 64
#: Backoff of an unschedulable reservation (kube-scheduler's podInitialBackoff / podMaxBackoff).
INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0


class Reservation(
    CacheListener,
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    NormalizeScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    BackgroundPlugin,
    ServiceProvider,
    ReservationNominator,
):
    """See the module docstring. Units: milli-cores for cpu, base units otherwise."""

    NAME: ClassVar[str] = NAME
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.store = ReservationStore(handle)
        #: pod uid -> (namespace, name, annotation value) whose PreBind write waits for the pod to exist.
        self._pending_writes: dict[str, tuple[str, str, str]] = {}
        #: reservation name -> (generation seen, next attempt epoch s, current backoff s).
        self._backoff: dict[str, tuple[int, float, float]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: reservation name -> its preemption under way (nominated node, victims).
        self.nominations: dict[str, Nomination] = {}
        #: uid of a running pod a Reservation pre-allocated from -> that Reservation's name.
        self._adopted: dict[str, str] = {}
        #: epoch seconds of the next controller round (brought forward when an adopted pod goes).
        self._controller_due = 0.0
        # last: registering replays the cache into the listeners at once
        handle.add_listener(self.store)
        handle.add_listener(self)

    # ------------------------------------------------------------------ PreFilter / Filter
    def _pod_state(self, state: CycleState, pod: PodInfo) -> PodReservations | Status:
        found = state.get(_STATE)
        if found is None:
            try:
                found = match_pod(self.store, pod)
            except AffinityError as exc:
                return Status.unresolvable(str(exc))
            state.write(_STATE, found)
        return found

    def _nothing_reserved_for(self, pod: PodInfo) -> bool:
        """No reservation is active and the pod names none (no reservation-affinity, no exact-match annotation):
        :func:`~app.plugins.reservation.matching.match_pod` would find nothing and raise nothing, so PreFilter
        and PreScore skip the pod in O(1), without matching (the cycle state is then filled on first use)."""
        annotations = pod.annotations
        return (
            not self.store.any_active()
            and n.ANNOTATION_RESERVATION_AFFINITY not in annotations
            and n.ANNOTATION_EXACT_MATCH_RESERVATION not in annotations
        )

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """SKIP when the pod ignores reservations or nothing is reserved and it has no affinity."""
        if self._nothing_reserved_for(pod):
            return _SKIP
        found = self._pod_state(state, pod)
        if isinstance(found, Status):
            return found
        if found.ignored:
            return Status.skip()
        if found.affinity is not None and not found.by_node:
            return Status.unresolvable(n.ERR_REASON_RESERVATION_AFFINITY)
        if not self.store.any_active():
            return Status.skip()
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        """Failing positions (see the module docstring)."""
        found = self._pod_state(state, pod)
        if isinstance(found, Status):
            return dict.fromkeys(range(len(nodes)), found)
        if found.ignored or len(nodes) == 0:
            return {}
        requests = {r: v for r, v in pod.requests.items() if v > 0}
        out: FilterFailures = {}
        owner_pos: list[int] = []
        if found.by_node:
            table = self.handle.snapshot.table
            cand_rows = [r for r in (table.row(name) for name in found.by_node) if r is not None]
            owner_pos = np.flatnonzero(np.isin(nodes.rows, np.array(cand_rows, dtype=np.int64))).tolist()
        if found.affinity is not None:
            outside = np.ones(len(nodes), dtype=bool)
            outside[owner_pos] = False
            out.update(dict.fromkeys(np.flatnonzero(outside).tolist(), _AFFINITY_MISMATCH))
        if found.affinity is None:
            self._filter_non_owner(requests, nodes, owner_pos, out)
        if owner_pos:
            at = np.array(owner_pos, dtype=np.int64)
            removed = [nodes.removed[i] for i in owner_pos] if nodes.removed is not None else None
            free, reserved = self._free_and_reserved(requests, nodes.rows[at], removed)
            for i, pos in enumerate(owner_pos):
                status = self._filter_owner_node(found, requests, nodes.names[pos], i, free, reserved)
                if status is not None:
                    out[pos] = status
            if found.affinity is None:
                self._keep_migration_nodes(found, nodes, owner_pos, out)
        return out

    def _keep_migration_nodes(
        self, found: PodReservations, nodes: NodeBatch, owner_pos: list[int], out: FilterFailures
    ) -> None:
        """Reservation-first migration: when the pod fits, on some node of ``nodes``, a Reservation made
        for a PodMigrationJob (:func:`~app.api.reservation.is_migration_reservation`) that it owns, every
        other node fails (``node(s) didn't have the pod's migration reservation``, unresolvable), as
        upstream's reservation affinity filters. Without it the reserved node only wins the extender's
        score, which kube-scheduler scales by the extender weight (1) and adds to its own plugins' scores
        (spreading a ReplicaSet's pods), so the replacement lands elsewhere and the job waits until it
        expires. When the pod fits none (or their nodes are not in the request), nothing is filtered."""
        keep = [
            pos
            for pos in owner_pos
            if pos not in out
            and any(is_migration_reservation(i.labels, i.annotations) for i in found.fitting.get(nodes.names[pos], ()))
        ]
        if not keep:
            return
        kept = set(keep)
        for pos in range(len(nodes)):
            if pos not in kept:
                out[pos] = _NOT_MIGRATION_NODE

    def _free_and_reserved(
        self, resources: Iterable[str], rows: npt.NDArray[np.int64], removed: list[list[PodInfo]] | None
    ) -> tuple[dict[str, npt.NDArray[np.int64]], dict[str, npt.NDArray[np.int64]]]:
        """Per resource, allocatable - requested (victims given back) and reserved-but-unallocated at
        ``rows`` (the latter only for resources some reservation holds)."""
        free: dict[str, npt.NDArray[np.int64]] = {}
        reserved: dict[str, npt.NDArray[np.int64]] = {}
        for res in resources:
            alloc, requested = self.handle.snapshot.allocatable_and_requested(res, rows)
            if removed is not None:
                freed = np.array([sum(p.requests.get(res, 0) for p in v) for v in removed], dtype=np.int64)
                requested = requested - freed
            free[res] = alloc - requested
            at = self.store.reserved_at(res, rows)
            if at is not None:
                reserved[res] = at
        return free, reserved

    def _filter_non_owner(
        self, requests: dict[str, int], nodes: NodeBatch, owner_pos: list[int], out: FilterFailures
    ) -> None:
        """Fail, into ``out``, the nodes where reservations the pod does not own keep it off: only nodes
        holding an active reservation are looked at (one column lookup for the rest)."""
        has = self.store.counts_at(nodes.rows) > 0
        if owner_pos:
            has[owner_pos] = False
        idx = np.flatnonzero(has)
        if not len(idx):
            return
        if nodes.removed is None:
            self._filter_non_owner_fast(requests, nodes.rows[idx], idx, out)
            return
        counts, pods = self.store.slots_at(nodes.rows)
        rows = nodes.rows[idx]
        removed = [nodes.removed[i] for i in idx.tolist()] if nodes.removed is not None else None
        free, reserved = self._free_and_reserved([r for r in requests if r in self.store.resources], rows, removed)
        shortfalls = reserved_shortfalls(requests, free, reserved)
        pods = pods[idx]
        if removed is not None:
            pods = pods - np.array([len(v) for v in removed], dtype=np.int64)
        allowed, _ = self.handle.snapshot.allocatable_and_requested("pods", rows)
        room = allowed - pods
        slots = (room >= 1) & (room < 1 + counts[idx])  # each reservation holds a pod slot (upstream fitsNode)
        if slots.any():
            shortfalls.append(("pods", slots))
        if not shortfalls:
            return
        failed_any = np.zeros(len(idx), dtype=bool)
        for _, mask in shortfalls:
            failed_any |= mask
        shared: dict[tuple[str, ...], Status] = {}  # one immutable Status per distinct reason set
        for j in np.flatnonzero(failed_any).tolist():
            reasons = tuple(reserved_reason(r) for r, m in shortfalls if m[j])
            status = shared.get(reasons)
            if status is None:
                status = shared[reasons] = Status.unschedulable(*reasons)
            out[int(idx[j])] = status

    def _filter_non_owner_fast(
        self,
        requests: dict[str, int],
        rows: npt.NDArray[np.int64],
        positions: npt.NDArray[np.int64],
        out: FilterFailures,
    ) -> None:
        """:meth:`_filter_non_owner` from the store's matrices (no victims): a node fails a resource the pod
        asks for when ``request > headroom`` but ``request <= headroom + reserved`` (the pod takes one
        ``pods`` slot)."""
        keys = self.store.keys
        want = np.array([requests.get(k, 0) for k in keys[:-1]] + [1], dtype=np.int64)
        matrix = self.store.matrices(rows)
        head = matrix[:, 0]
        short = (want > head) & (want <= head + matrix[:, 1]) & (want > 0)
        failing = np.flatnonzero(short.any(axis=1))
        if not len(failing):
            return
        shared: dict[tuple[str, ...], Status] = {}  # one immutable Status per distinct reason set
        for j in failing.tolist():
            reasons = tuple(reserved_reason(keys[i]) for i in np.flatnonzero(short[j]).tolist())
            status = shared.get(reasons)
            if status is None:
                status = shared[reasons] = Status.unschedulable(*reasons)
            out[int(positions[j])] = status

    def _filter_owner_node(
        self,
        found: PodReservations,
        requests: dict[str, int],
        node: str,
        pos: int,
        free: dict[str, npt.NDArray[np.int64]],
        reserved: dict[str, npt.NDArray[np.int64]],
    ) -> Status | None:
        store = self.store
        by_node: set[str] = set()
        by_resv: list[str] = []
        fitting: list[ReservationInfo] = []
        for info in found.by_node.get(node, ()):
            if found.affinity is None and not (info.resource_names & requests.keys()):
                continue  # upstream: a reservation holding none of the pod's resources is irrelevant
            remaining = store.remaining(info.name)
            besides = {
                r: int(free[r][pos]) - (int(reserved[r][pos]) if r in reserved else 0) + remaining.get(r, 0)
                for r in requests
            }
            short_node, short_resv = fits_reservation(
                requests, info, remaining, len(store.pods_of.get(info.name, ())), besides
            )
            if not short_node and not short_resv:
                fitting.append(info)
            by_node.update(short_node)
            by_resv.extend(short_resv)
        found.fitting[node] = fitting
        if fitting:
            return None
        if found.affinity is not None:
            reasons = [node_reason(r) for r in sorted(by_node)] + by_resv
            return Status.unschedulable(*(reasons or [n.ERR_REASON_NO_RESERVATIONS_MEET_REQUIREMENTS]))
        alone = [
            r
            for r in sorted(requests)
            if requests[r] > int(free[r][pos]) - (int(reserved[r][pos]) if r in reserved else 0)
        ]
        return Status.unschedulable(*(node_reason(r) for r in alone)) if alone else None

    def reservations_for(self, pod: PodInfo) -> list[tuple[str, dict[str, int]]]:
        """(name, unallocated remainder) of the active reservations ``pod`` may use, sorted by name (a
        malformed affinity annotation: none)."""
        if not self.store.any_active():
            return []
        try:
            found = match_pod(self.store, pod)
        except AffinityError:
            return []
        infos = sorted((i for infos in found.by_node.values() for i in infos), key=lambda i: i.name)
        return [(i.name, self.store.remaining(i.name)) for i in infos]

    # ------------------------------------------------------------------ Score
    def _fitting(self, found: PodReservations, pod: PodInfo, node: str) -> list[ReservationInfo]:
        """The candidates on ``node`` that hold ``pod`` (Filter's answer, or computed now for prioritize)."""
        if node in found.fitting:
            return found.fitting[node]
        row = self.handle.snapshot.row(node)
        if row is None:
            return []
        rows = np.array([row], dtype=np.int64)
        self.filter_nodes_single(found, pod, NodeBatch(rows, [node]))
        return found.fitting.get(node, [])

    def filter_nodes_single(self, found: PodReservations, pod: PodInfo, batch: NodeBatch) -> None:
        """Run the owner check of ``batch`` (one node) to fill ``found.fitting``."""
        state = CycleState(self.handle.now())
        state.write(_STATE, found)
        self.filter_nodes(state, pod, batch)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status:
        """SKIP for pods with no candidate reservation (upstream ``preScoreForNormalPod``)."""
        if self._nothing_reserved_for(pod):
            return _SKIP
        found = self._pod_state(state, pod)
        if isinstance(found, Status) or found.ignored or not found.by_node:
            return Status.skip()
        return SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        """1000 for the node of the most preferred reservation by order, else the best reservation score."""
        found = self._pod_state(state, pod)
        scores = np.zeros(len(nodes), dtype=np.int64)
        if isinstance(found, Status) or not found.by_node:
            return scores
        requests = {r: v for r, v in pod.requests.items() if v > 0}
        best_order, preferred = 0, -1
        for pos, name in enumerate(nodes.names):
            if name not in found.by_node:
                continue
            fitting = self._fitting(found, pod, name)
            for info in fitting:
                if info.order and (best_order == 0 or info.order < best_order):
                    best_order, preferred = info.order, pos
            if fitting:
                scores[pos] = max(score_reservation(requests, i, self.store.allocated(i.name)) for i in fitting)
        if preferred >= 0:
            scores[preferred] = n.MOST_PREFERRED_SCORE
        return scores

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """``DefaultNormalizeScore(MaxNodeScore, false)``: scale so the best node has 100."""
        top = int(scores.max()) if len(scores) else 0
        if top == 0:
            return scores
        return scores * 100 // top

    # ------------------------------------------------------------------ Reserve / PreBind
    def choose(self, pod: PodInfo, fitting: list[ReservationInfo]) -> ReservationInfo | None:
        """The reservation a pod takes among those fitting on one node: smallest positive order, else the
        best score, else the first by name (upstream's nominator)."""
        if not fitting:
            return None
        ordered = [i for i in fitting if i.order]
        if ordered:
            return min(ordered, key=lambda i: (i.order, i.name))
        requests = {r: v for r, v in pod.requests.items() if v > 0}
        return max(
            sorted(fitting, key=lambda i: i.name),
            key=lambda i: score_reservation(requests, i, self.store.allocated(i.name)),
        )

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Charge the pod to the chosen reservation on ``node`` (none: nothing to do).

        When this cycle has not matched the pod yet (its PreFilter skipped it: the ``/bind`` re-check of a pod
        with nothing reserved) and still nothing is reserved for it, there is nothing to charge: matching
        would find no reservation on any node, so it is not run (issue 29: ~1.2 us per ``/bind``).
        """
        if state.get(_STATE) is None and self._nothing_reserved_for(pod):
            return SUCCESS
        found = self._pod_state(state, pod)
        if isinstance(found, Status) or found.ignored or node not in found.by_node:
            return SUCCESS
        fitting = found.fitting.get(node)
        if fitting is None:
            fitting = self._fitting(found, pod, node)
        chosen = self.choose(pod, fitting)
        if chosen is None:
            return SUCCESS
        self.store.reserve(pod, chosen.name)
        state.write(_CHOSEN, chosen)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Give the reserved capacity back (idempotent)."""
        chosen = state.get(_CHOSEN)
        if chosen is not None:
            self.store.unreserve(pod, chosen.name)
            state.delete(_CHOSEN)
        self._pending_writes.pop(pod.uid, None)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Write ``reservation-allocated`` on the pod; a refused write fails the binding. In embedded mode
        a pod the source does not hold yet is annotated once it enters at bind."""
        chosen: ReservationInfo | None = state.get(_CHOSEN)
        if chosen is None:
            return SUCCESS
        value = orjson.dumps({"name": chosen.name, "uid": chosen.uid}).decode()
        if pod.annotations.get(n.ANNOTATION_RESERVATION_ALLOCATED) == value:
            return SUCCESS
        patch = {"metadata": {"annotations": {n.ANNOTATION_RESERVATION_ALLOCATED: value}}}
        try:
            await self.handle.client.patch("Pod", pod.name, patch, namespace=pod.namespace)
        except NotFound:
            self._pending_writes[pod.uid] = (pod.namespace, pod.name, value)
        except ApiError as exc:
            return Status.error(f"cannot write {n.ANNOTATION_RESERVATION_ALLOCATED}: {exc}")
        return SUCCESS

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """A pod whose annotation write waited for it to exist (embedded bind) is annotated now. A victim of a
        preemption gone: its Reservation is retried at once (kube-scheduler requeues on an assigned pod's
        deletion); a pod a Reservation pre-allocated from gone: the controller runs at the next round."""
        if new is None and old is not None and self.nominations:
            for name, nomination in self.nominations.items():
                if any(v["uid"] == old.uid for v in nomination.victims):
                    self._backoff.pop(name, None)
        if new is None and old is not None and self._adopted.pop(old.uid, None) is not None:
            self._controller_due = 0.0  # its Waiting Reservation may turn Available now
        if new is None or new.uid not in self._pending_writes:
            return
        obj = self.handle.snapshot.pod_object(new.uid) or {}
        if not (obj.get("spec") or {}).get("nodeName"):
            return
        namespace, name, value = self._pending_writes.pop(new.uid)
        patch = {"metadata": {"annotations": {n.ANNOTATION_RESERVATION_ALLOCATED: value}}}
        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(self._write(namespace, name, patch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _write(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        try:
            await self.handle.client.patch("Pod", name, patch, namespace=namespace)
        except ApiError as exc:
            log.warning("pod %s/%s: cannot write %s: %s", namespace, name, n.ANNOTATION_RESERVATION_ALLOCATED, exc)

    # ------------------------------------------------------------------ background
    async def run_background(self) -> None:
        """Place pending reservations and run the controller, on the leader, until cancelled. A failed round
        ends the loop; the service's loop supervisor logs, counts and restarts it (:mod:`app.sources.loops`)."""
        while True:
            await asyncio.sleep(PLACEMENT_INTERVAL)
            if not self.handle.has_synced() or not self.handle.is_leader():
                continue
            await self.place_pending()
            if self.handle.now() >= self._controller_due:
                self._controller_due = self.handle.now() + CONTROLLER_INTERVAL
                await self.control_once()

    async def place_pending(self) -> int:
        """One placement round over pending reservations whose backoff passed; returns how many were placed."""
        framework = self.handle.framework
        if framework is None:
            return 0
        now = self.handle.now()
        placed = 0
        pending = sorted(
            (i for i in self.store.by_name.values() if i.pending),
            key=lambda i: (-(i.reserve_info.priority or 0), i.created or 0.0, i.name),
        )
        for info in pending:
            version = str((info.obj.get("metadata") or {}).get("resourceVersion") or id(info.obj))
            gen, due, delay = self._backoff.get(info.name, (-1, 0.0, 0.0))
            same = gen == hash(version)
            if same and now < due:
                continue
            if info.pre_allocation and await self._pre_allocate(framework, info, now):
                self._backoff.pop(info.name, None)
                placed += 1
                continue
            nomination = self.nominations.get(info.name)
            result = place(self.handle, framework, self.store, info, only=nomination.node) if nomination else None
            if result is None or result.node is None:
                result = place(self.handle, framework, self.store, info)
            message = result.message
            if result.node is not None and result.state is not None:
                failure = await self._bind_reservation(framework, info, result.node, result.state, now)
                if failure is None:
                    self._backoff.pop(info.name, None)
                    self.nominations.pop(info.name, None)
                    placed += 1
                    continue
                message = failure
            else:
                message = await self._preempt(framework, info, result, now)
            delay = min(max(delay * 2, INITIAL_BACKOFF), MAX_BACKOFF)
            nominated = self.nominations.get(info.name)
            patch_u = unschedulable_patch(info, message, now, nominated.node if nominated else "")
            if patch_u is not None and await self._patch_status(info, patch_u):
                self.store.on_object("Reservation", info.name, _applied(info.obj, patch_u))
            self._backoff[info.name] = (hash(version), now + delay, delay)
        for name in [k for k in self._backoff if k not in self.store.by_name]:
            del self._backoff[name]
        for name in [k for k in self.nominations if k not in self.store.by_name]:
            del self.nominations[name]
        return placed

    async def _preempt(self, framework: Any, info: ReservationInfo, result: Placement, now: float) -> str:
        """PostFilter for a Reservation that fits no node (:mod:`.preemption`): nominate a node and evict its
        victims, or say why not. Returns the Scheduled condition's message: the fit error, with
        kube-scheduler's PostFilter message appended when preemption was tried and failed."""
        priority = reservation_priority(info, dict(self.handle.snapshot.objects("PriorityClass")))
        if priority is None or not result.reasons:
            return result.message
        why = not_eligible_reason(info, self.nominations.get(info.name), self.handle, now)
        if why:
            return f"{result.message} {why}."
        candidates, failure = find_candidates(self.handle, framework, self.store, info, result, priority)
        best = choose(self.handle, candidates, now)
        if best is None:
            self.nominations.pop(info.name, None)
            return f"{result.message} {failure}."
        nomination = Nomination(best.node, victim_view(best), now, best.num_pdb_violations)
        self.nominations[info.name] = nomination
        log.info(
            "reservation %s: preempting %d pod(s) on node %s: %s",
            info.name,
            len(nomination.victims),
            best.node,
            ", ".join(f"{v['namespace']}/{v['name']}" for v in nomination.victims),
        )
        reason = f"Preempted by pod {info.reserve_info.uid} on node {best.node} (reservation {info.name})"
        for victim in best.victims:
            try:
                await self.handle.client.evict(victim.namespace, victim.name, victim.uid, reason)
            except ApiError as exc:
                log.warning("reservation %s: could not evict %s: %s", info.name, victim.key, exc)
                self.nominations.pop(info.name, None)  # prepareCandidate failed: choose again next time
                break
        return result.message

    async def _pre_allocate(self, framework: Any, info: ReservationInfo, now: float) -> bool:
        """:mod:`.preallocation`: adopt a running owner pod that satisfies ``info``; True when it did (the
        Reservation is Waiting on the pod's node, the pod annotated ``reservation-allocated``)."""
        found = find_pre_allocatable(self.handle, framework, self.store, info)
        if found is None:
            return False
        pod, state = found
        owner = {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid}
        if await self._bind_reservation(framework, info, pod.node_name, state, now, adopt=owner) is not None:
            return False
        self.store.reserve(pod, info.name)
        self._adopted[pod.uid] = info.name
        value = orjson.dumps({"name": info.name, "uid": info.uid}).decode()
        patch = {"metadata": {"annotations": {n.ANNOTATION_RESERVATION_ALLOCATED: value}}}
        try:
            await self.handle.client.patch("Pod", pod.name, patch, namespace=pod.namespace)
        except ApiError as exc:
            log.warning("reservation %s: cannot annotate pre-allocated pod %s: %s", info.name, pod.key, exc)
        log.info("reservation %s: pre-allocated from running pod %s on node %s", info.name, pod.key, pod.node_name)
        return True

    async def _bind_reservation(
        self,
        framework: Any,
        info: ReservationInfo,
        node: str,
        state: CycleState,
        now: float,
        adopt: dict[str, str] | None = None,
    ) -> str | None:
        """Reserve the reserve pod on ``node`` in every plugin, let ReservationPreBind plugins write onto
        the Reservation (DeviceShare's GPUs), then mark it Available (Waiting with ``adopt``, the running
        pod it pre-allocates from, as its owner). Returns None when bound, else why not (everything
        reserved is undone)."""
        pod = info.reserve_info
        status = framework.run_reserve(state, pod, node)
        if not status.is_success():
            return f"0/1 nodes are available: 1 {status.message}."
        for plugin in framework.plugins:
            if isinstance(plugin, ReservationPreBindPlugin):
                status = await plugin.pre_bind_reservation(state, pod, info.name, node)
                if not status.is_success():
                    framework.run_unreserve(state, pod, node)
                    return status.message
        patch = available_patch(info, node, now) if adopt is None else waiting_patch(info, node, [adopt], now)
        if not await self._patch_status(info, patch):
            framework.run_unreserve(state, pod, node)
            return "the status write was refused"
        # charge it at once: the next reservation of this round must see it
        self.store.on_object("Reservation", info.name, _applied(info.obj, patch))
        return None

    async def control_once(self) -> int:
        """One controller round (expiry, node gone, owners, allocateOnce, GC); returns the actions taken."""
        now = self.handle.now()
        done = 0
        for i, info in enumerate(list(self.store.by_name.values())):
            if i and i % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # thousands of reservations must not hold the event loop
            if self.store.get(info.name) is not info:
                continue  # changed while we yielded: the next round sees the new version
            action = decide(self.handle, self.store, info, now)
            if action is None:
                continue
            log.info("reservation %s: %s", info.name, action.why)
            if action.delete:
                try:
                    await self.handle.client.delete("Reservation", info.name)
                    done += 1
                except ApiError as exc:
                    log.warning("reservation %s: delete failed: %s", info.name, exc)
            elif action.patch is not None and await self._patch_status(info, action.patch):
                # seen at once, as the placement's writes: the next round must not write it again
                self.store.on_object("Reservation", info.name, _applied(info.obj, action.patch))
                done += 1
        return done

    async def _patch_status(self, info: ReservationInfo, patch: dict[str, Any]) -> bool:
        try:
            await self.handle.client.patch("Reservation", info.name, patch, subresource="status")
        except ApiError as exc:
            log.warning("reservation %s: status patch failed: %s", info.name, exc)
            return False
        return True

    # ------------------------------------------------------------------ REST
    def routes(self) -> list[tuple[str, Any]]:
        """``nodeReservations/{node}`` (upstream's path), ``reservations``, ``reservations/{name}`` and
        ``reservations/{name}/explain`` (:mod:`.explain`)."""
        return [
            ("/nodeReservations/{node}", self._get_node_reservations),
            ("/reservations", self._get_reservations),
            ("/reservations/{name}", self._get_reservation),
            ("/reservations/{name}/explain", self._get_reservation_explain),
        ]

    async def _get_node_reservations(self, node: str) -> list[dict[str, Any]]:
        if self.handle.snapshot.node(node) is None:
            raise NotFound(f'nodes "{node}" not found')
        return node_reservations_view(self.store, node)

    async def _get_reservations(self) -> list[dict[str, Any]]:
        return [reservation_view(self.store, i, self.nominations.get(k)) for k, i in sorted(self.store.by_name.items())]

    async def _get_reservation(self, name: str) -> dict[str, Any]:
        info = self.store.get(name)
        if info is None:
            raise NotFound(f'reservations.scheduling.koordinator.sh "{name}" not found')
        return reservation_view(self.store, info, self.nominations.get(name))

    async def _get_reservation_explain(self, name: str) -> dict[str, Any]:
        info = self.store.get(name)
        if info is None:
            raise NotFound(f'reservations.scheduling.koordinator.sh "{name}" not found')
        return explain_reservation(self.handle, self.handle.framework, self.store, info, self.nominations.get(name))


def _applied(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with a status patch applied (shallow: the patch's status keys replace the object's)."""
    return {**obj, "status": {**(obj.get("status") or {}), **patch["status"]}}


def new_reservation(args: dict[str, Any], handle: Handle) -> Reservation:
    """Factory: the Reservation plugin takes no args here.

    Raises:
        ArgsError: any arg is given.
    """
    if args:
        raise ArgsError(sorted(args)[0], "unknown field (Reservation takes no args here)")
    return Reservation(handle)
