"""Fail fast: a gang group whose members still to place cannot fit the cluster's free capacity.

Beyond upstream. Upstream's Coscheduling lets such a gang's members be assumed one by one and hold
their resources at Permit until the gang's wait times out. Here, PreFilter (at ``/filter`` and at the
binding cycle's re-check) first compares, per resource:

- needed: for every gang of the group that is not yet satisfied by its match policy, the members it
  still lacks, ``minMember - waiting`` (``- bound`` too under ``waiting-and-running``), each at the
  average request of the gang's pending members (exact for the usual uniform gang; computed from a
  running sum, O(1) per call);
- free: the sum over every node of ``max(0, allocatable - requested)``, requested counting every pod
  bound or assumed (so other gangs' waiting members hold theirs).

A shortfall fails the pod UnschedulableAndUnresolvable with a message naming it. This is a necessary
condition only (free capacity may be fragmented); what it guarantees is that two gangs competing for the
same capacity cannot both hold part of it: the binding cycle runs the re-check and assumes the pod
without yielding in between, so once one gang's waiting members hold the room, the other's members are
refused at once instead of waiting until both time out.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.api import coscheduling as n
from app.api.quantity import format_resource
from app.framework.handle import SnapshotLister
from app.plugins.coscheduling.gang import Gang


def members_to_place(gang: Gang) -> int:
    """How many more members ``gang`` needs at Permit before its match policy is satisfied (0 when it is)."""
    if gang.match_policy == n.MATCH_POLICY_ONCE_SATISFIED and gang.once_satisfied:
        return 0
    have = len(gang.waiting)
    if gang.match_policy == n.MATCH_POLICY_WAITING_AND_RUNNING:
        have += len(gang.bound)
    return max(0, gang.min_required - have)


def needed_requests(gangs: list[Gang]) -> tuple[int, dict[str, int]]:
    """(members still to place, their requests summed) over ``gangs`` (internal units)."""
    count = 0
    total: dict[str, int] = {}
    for gang in gangs:
        missing = members_to_place(gang)
        pending = len(gang.pending)
        if missing == 0 or pending == 0:
            continue
        take = min(missing, pending)
        count += take
        for name, value in gang.pending_requests.items():
            if value > 0:
                total[name] = total.get(name, 0) + value * take // pending
    return count, total


class ClusterFree:
    """The cluster's free capacity per resource, from the node table (see the module docstring).

    Kept incrementally: the first call for a resource sums ``max(0, allocatable - requested)`` over every
    live node and keeps the per-node terms; a pod event names its node(s) with :meth:`touch` and the next
    call re-reads only those nodes and moves the sums by the difference (one member's bind changes one
    node, where a full sum gathers every row: at 5,000 nodes, two calls per gang member). A node event
    calls :meth:`invalidate`: the rows and every sum are rebuilt on the next call. More touched nodes
    than a quarter of the cluster rebuild too (cheaper than the per-node update then).
    """

    def __init__(self, snapshot: SnapshotLister) -> None:
        self.snapshot = snapshot
        self._rows: npt.NDArray[np.int64] | None = None
        #: Node name -> position in ``_rows`` (and in every per-node array of ``_terms``).
        self._positions: dict[str, int] = {}
        #: Resource -> (per-node ``max(0, allocatable - requested)`` parallel to ``_rows``, their sum); plain
        #: lists of ints: a touched node's term is read and written as a Python int, no numpy call per node.
        self._terms: dict[str, tuple[list[int], int]] = {}
        #: Nodes whose requested changed since the last call (names; unknown names are ignored).
        self._touched: set[str] = set()

    def invalidate(self) -> None:
        """Nodes changed: recompute the rows and every sum on the next call."""
        self._rows = None
        self._terms.clear()
        self._touched.clear()

    def touch(self, node: str) -> None:
        """What is requested on ``node`` changed (a pod bound, assumed, forgotten or gone there)."""
        if self._rows is not None:
            self._touched.add(node)

    def free(self, resources: list[str]) -> dict[str, int]:
        """Free capacity of each of ``resources`` summed over all nodes (negative per-node values count as 0)."""
        if self._rows is None or len(self._touched) * 4 > len(self._rows):
            self.invalidate()
            index = self.snapshot.table.index
            self._rows = np.fromiter(index.values(), dtype=np.int64, count=len(index))
            self._positions = dict(zip(index, range(len(index)), strict=True))
        rows = self._rows
        if self._touched:
            at = [p for p in map(self._positions.get, self._touched) if p is not None]
            self._touched.clear()
            if at:
                sub = rows[at]
                for name, (terms, total) in self._terms.items():
                    alloc, requested = self.snapshot.allocatable_and_requested(name, sub)
                    for p, a, r in zip(at, alloc.tolist(), requested.tolist(), strict=True):
                        fresh = a - r if a > r else 0
                        total += fresh - terms[p]
                        terms[p] = fresh
                    self._terms[name] = (terms, total)
        out: dict[str, int] = {}
        for name in resources:
            kept = self._terms.get(name)
            if kept is None:
                alloc, requested = self.snapshot.allocatable_and_requested(name, rows)
                fresh_terms: list[int] = np.maximum(alloc - requested, 0).tolist()
                kept = self._terms[name] = (fresh_terms, sum(fresh_terms))
            out[name] = kept[1]
        return out


#: The words every fail-fast refusal carries (what a client such as ``koord sim`` counts them by).
FAIL_FAST_MARK = "cannot fit the cluster"


def shortfall_message(group: list[str], count: int, needed: dict[str, int], free: dict[str, int]) -> str:
    """The fail-fast reason, "" when every resource fits.

    Shape: ``gangGroup [ns/a ns/b] cannot fit the cluster: 8 member(s) still to place request cpu 8,
    memory 8Gi; free: cpu 7, memory 250Gi; short of cpu 1``.
    """
    short = {r: v - free.get(r, 0) for r, v in sorted(needed.items()) if v > free.get(r, 0)}
    if not short:
        return ""

    def fmt(values: dict[str, int]) -> str:
        return ", ".join(f"{r} {format_resource(r, v)}" for r, v in sorted(values.items()))

    return (
        f"gangGroup [{' '.join(group)}] {FAIL_FAST_MARK}: {count} member(s) still to place request "
        f"{fmt(needed)}; free: {fmt({r: free.get(r, 0) for r in needed})}; short of {fmt(short)}"
    )
