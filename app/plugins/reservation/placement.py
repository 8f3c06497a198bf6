"""Placing a pending Reservation: its reserve pod through every Filter and Score plugin, plus our own fit.

Upstream schedules the reserve pod (``NewReservePod``) in koord-scheduler's normal cycle and binds it
by marking the Reservation Available (``pkg/scheduler/frameworkext/reservation`` ``BindReservation``).
Here kube-scheduler never sees reserve pods, so the service runs the cycle itself:

1. PreFilter and Filter of every enabled plugin over all nodes (the Reservation plugin's own Filter
   keeps other reservations' capacity off limits);
2. our fit for every resource the template requests (cpu, memory, extended) against
   ``allocatable - requested - reserved``, and the pod count, which kube-scheduler would check for a pod;
3. a template ``spec.nodeName`` admits only that node; ``spec.nodeSelector`` and the required node
   affinity (``matchExpressions``, ``matchFields`` on ``metadata.name``) must match the node;
   a node marked ``spec.unschedulable`` or with a NoSchedule/NoExecute taint the template does not
   tolerate is refused (kube-scheduler's NodeUnschedulable and TaintToleration, which would have run);
   a default-policy reservation does not share a node with Aligned/Restricted ones, nor they with it
   (``node(s) reservation allocate policy conflict``);
4. Score over the feasible nodes; the highest total wins (the first by name among equals).

The answer is the chosen node, or the failure message kube-scheduler would write
(``0/3 nodes are available: 2 Insufficient cpu, 1 node(s) didn't match ...``) with the nodes where
preemption might help (those refused only by the fit of step 2 or by a Filter's resolvable
Unschedulable status, upstream ``nodesWherePreemptionMightHelp``). :func:`fit_reasons` re-checks one
node with some pods gone, for the preemption of :mod:`.preemption`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.api.nodeaffinity import required_affinity_matches
from app.api.tolerations import UNSCHEDULABLE_TAINT, tolerates, untolerated_taint
from app.cache.podinfo import PodInfo
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import NodeBatch
from app.framework.runtime import Framework, ScoreError
from app.framework.status import Code
from app.plugins.reservation import names as n
from app.plugins.reservation.model import ReservationInfo
from app.plugins.reservation.store import ReservationStore


@dataclass(frozen=True, slots=True)
class Placement:
    """Outcome of one attempt: ``node`` when placed, else ``message`` saying why not; ``state`` is the
    cycle's state (the Reserve of the chosen node reads what Filter wrote). When not placed: ``total``
    nodes looked at, ``reasons`` per refused node, and ``helpful``, the refused nodes where removing pods
    might make room (sorted by name)."""

    node: str | None
    message: str = ""
    state: CycleState | None = None
    total: int = 0
    reasons: dict[str, tuple[str, ...]] | None = None
    helpful: tuple[str, ...] = ()


def _own_fit(handle: Handle, store: ReservationStore, info: ReservationInfo, batch: NodeBatch) -> dict[int, list[str]]:
    """Positions of ``batch`` that cannot hold the reserve pod, with reasons (see step 2); the pods of
    ``batch.removed`` (preemption's victims) count as gone."""
    snapshot = handle.snapshot
    removed = batch.removed
    out: dict[int, list[str]] = {}
    for res in sorted(r for r, v in info.requests.items() if v > 0):
        alloc, requested = snapshot.allocatable_and_requested(res, batch.rows)
        if removed is not None:
            freed = np.array([sum(p.requests.get(res, 0) for p in gone) for gone in removed], dtype=np.int64)
            requested = requested - freed
        reserved = store.reserved_at(res, batch.rows)
        free = alloc - requested - (reserved if reserved is not None else 0)
        for pos in np.flatnonzero(info.requests[res] > free).tolist():
            out.setdefault(pos, []).append(f"Insufficient {res}")
    alloc_pods, _ = snapshot.allocatable_and_requested("pods", batch.rows)
    for pos, name in enumerate(batch.names):
        node = snapshot.node(name)
        if node is None or "pods" not in node.allocatable:
            continue
        used = len(node.pods) + len(store.by_node.get(name, ())) - (len(removed[pos]) if removed is not None else 0)
        if used + 1 > int(alloc_pods[pos]):
            out.setdefault(pos, []).append("Too many pods")
    return out


def fit_reasons(
    handle: Handle,
    framework: Framework,
    store: ReservationStore,
    info: ReservationInfo,
    state: CycleState,
    node: str,
    removed: list[PodInfo],
) -> list[str]:
    """Why the reserve pod of ``info`` does not fit ``node`` once ``removed`` are gone: step 2's fit, then
    every Filter plugin with the victims removed ([] when it fits). ``state`` is a cycle whose PreFilter
    passed for the reserve pod."""
    row = handle.snapshot.row(node)
    if row is None:
        return ["node(s) not found"]
    batch = NodeBatch(np.array([row], dtype=np.int64), [node], [removed])
    own = _own_fit(handle, store, info, batch)
    if own:
        return own[0]
    failures = framework.run_filters(state, info.reserve_info, batch)
    if 0 in failures:
        st = failures[0]
        return list(st.reasons or (st.message,))
    return []


def _node_refusal(spec: dict[str, Any], tolerations: list[Any]) -> str:
    """kube-scheduler's NodeUnschedulable and TaintToleration verdicts for the reserve pod ("" = admitted)."""
    if spec.get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
        return "node(s) were unschedulable"
    taint = untolerated_taint(spec.get("taints") or [], tolerations)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
    return ""


def _policy_conflict(info: ReservationInfo, others: list[ReservationInfo]) -> bool:
    """Upstream's Filter for reserve pods: the default ("") allocate policy cannot share a node with
    reservations of another policy (``Aligned`` and ``Restricted`` may mix)."""
    mine = info.allocate_policy
    return any((mine == "" or o.allocate_policy == "") and mine != o.allocate_policy for o in others)


def node_refusal(handle: Handle, store: ReservationStore, info: ReservationInfo, name: str) -> str:
    """Step 3's verdict on node ``name`` for the reserve pod of ``info`` ("" = admitted): the pinned node,
    node affinity/selector, allocate-policy conflict, NodeUnschedulable and TaintToleration. Removing pods
    cannot change it."""
    node = handle.snapshot.node(name)
    wanted = info.reserve_info.annotations.get(n.ANNOTATION_RESERVATION_NODE, "")
    spec = info.reserve_pod.get("spec") or {}
    if wanted and name != wanted:
        return n.ERR_REASON_NODE_NOT_MATCH_RESERVATION
    if node is None:
        return "node(s) not found"
    if not required_affinity_matches(spec, node.labels, name):
        return "node(s) didn't match Pod's node affinity/selector"
    if _policy_conflict(info, store.active_on(name)):
        return n.ERR_REASON_RESERVATION_ALLOCATE_POLICY_CONFLICT
    return _node_refusal(node.obj.get("spec") or {}, spec.get("tolerations") or [])


def fit_error_message(total: int, reasons: Counter[str]) -> str:
    """kube-scheduler's ``FitError`` text: ``0/<total> nodes are available: <count> <reason>, ....``, reasons sorted."""
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"0/{total} nodes are available: {parts}."


def place(
    handle: Handle,
    framework: Framework,
    store: ReservationStore,
    info: ReservationInfo,
    only: str = "",
) -> Placement:
    """Choose a node for ``info``'s reserve pod (see the module docstring); never raises for a plugin failure.
    ``only`` (a node name) evaluates that node alone: the nominated node of a preemption, tried first as
    kube-scheduler's PreferNominatedNode does."""
    pod = info.reserve_info
    names = [only] if only and handle.snapshot.node(only) is not None else sorted(handle.snapshot.nodes)
    if not names:
        return Placement(None, "0/0 nodes are available.")
    rows, _ = handle.snapshot.table.rows_of(names)
    batch = NodeBatch(rows, names)
    state = framework.new_cycle()
    status = framework.run_pre_filter(state, pod)
    if not status.is_success():
        refused: dict[str, tuple[str, ...]] = dict.fromkeys(names, (status.message,))
        message = fit_error_message(len(names), Counter({status.message: len(names)}))
        return Placement(None, message, None, len(names), refused)
    reasons: Counter[str] = Counter()
    per_node: dict[str, tuple[str, ...]] = {}
    helpful: list[str] = []
    failed = np.zeros(len(names), dtype=bool)
    for pos, name in enumerate(names):
        why = node_refusal(handle, store, info, name)
        if why:
            failed[pos] = True
            reasons[why] += 1
            per_node[name] = (why,)
    for pos, short in _own_fit(handle, store, info, batch).items():
        if not failed[pos]:
            failed[pos] = True
            reasons.update(short)
            per_node[names[pos]] = tuple(short)
            helpful.append(names[pos])
    alive = np.flatnonzero(~failed)
    if len(alive):
        sub = batch.subset(alive)
        failures = framework.run_filters(state, pod, sub)
        for pos, st in failures.items():
            failed[alive[pos]] = True
            reasons.update(st.reasons or (st.message,))
            per_node[sub.names[pos]] = tuple(st.reasons or (st.message,))
            if st.code == Code.UNSCHEDULABLE:
                helpful.append(sub.names[pos])
    feasible = np.flatnonzero(~failed)
    if not len(feasible):
        message = fit_error_message(len(names), reasons)
        return Placement(None, message, state, len(names), per_node, tuple(sorted(helpful)))
    sub = batch.subset(feasible)
    try:
        totals = framework.run_scores(state, pod, sub).total
    except ScoreError:
        totals = np.zeros(len(sub), dtype=np.int64)
    best = int(np.argmax(totals)) if len(totals) else 0
    return Placement(sub.names[best], state=state)
