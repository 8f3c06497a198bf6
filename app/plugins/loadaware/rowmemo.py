"""Per-class answers kept by node-table row: what one kind of incoming pod gets from every node, worked out
again only for the rows written since (issue 47).

LoadAwareScheduling's verdict and score for a node depend on the node's row (its cut-offs, usage, allocatable,
NodeMetric state) and on the incoming pod's estimate only, once every NodeMetric is fresh. Pods whose estimates
are equal (a workload's replicas: same priority class, requests, limits and scaling factors) therefore get the
same answer from an unchanged node. A :class:`RowMemo` keeps that answer for every row of the node table, for
one such class of pods; the plugin marks the rows it rewrites (:meth:`RowMemos.mark`, each bind dirties one
row, each NodeMetric update one), and a call reads the candidates' answers with one ``take`` after working out
the few marked rows again. A call over 500 unchanged nodes is then a lookup, not 500 evaluations: the cost per
candidate node is one element of a C-level copy.

Exact by construction: a row's kept answer is the function's answer for the row as it is now, since every
write of a row the function reads marks it, and a change of the name <-> row mapping (the table's
generation, which also covers its growth) drops every memo.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

#: Memos kept at most (classes of incoming pods); past it the least recently used is dropped. A cluster
#: schedules a few workload shapes at a time; each memo is one value per node-table row.
MEMOS_MAX = 32

#: Rows -> their answers (one value per row, in order), for one class of pods.
RowFunction = Callable[[npt.NDArray[np.int64]], npt.NDArray[Any]]

#: One row -> its answer (a Python scalar), for one class of pods: what a memo uses for a few marked rows.
OneRowFunction = Callable[[int], Any]

#: Marked rows a memo works out one by one with its one-row function (when it has one); more go through the
#: rows function. A steady stream of binds marks one row between two calls of a class, and a batch function's
#: ten numpy calls cost the same for one row as for hundreds (~1-2 us each), a one-row function a few us.
ONE_BY_ONE_MAX = 8


class RowMemo:
    """One class's answer for every row of a node table, worked out again only for rows marked since.

    Args:
        compute: rows (int64, any order) -> their answers (same length); called with every row on the
            first read and then with the marked rows only. Must read nothing but those rows' state and
            constants of the class.
        capacity: rows of the node table (the memo covers ``0 .. capacity - 1``).
        owner: an object kept alive with the memo (the class's key object, so its ``id`` is not reused).
        compute_one: one row -> its answer, equal to ``compute``'s for that row; used for up to
            :data:`ONE_BY_ONE_MAX` marked rows.

    Raises:
        ValueError: a negative capacity.
    """

    __slots__ = ("_compute", "_compute_one", "_size", "_values", "owner", "stale")

    def __init__(
        self, compute: RowFunction, capacity: int, owner: Any = None, compute_one: OneRowFunction | None = None
    ) -> None:
        if capacity < 0:
            raise ValueError(f"capacity {capacity} < 0")
        self._compute = compute
        self._compute_one = compute_one
        self._size = capacity
        self._values: npt.NDArray[Any] | None = None
        self.owner = owner
        #: rows written since their answer was worked out
        self.stale: set[int] = set()

    def take(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        """The answers of ``rows`` (int64 rows below the capacity), in their order: a new array.

        Raises:
            IndexError: a row outside the memo's capacity.
        """
        values = self._values
        if values is None:
            values = self._values = self._compute(np.arange(self._size, dtype=np.int64))
            self.stale.clear()
        elif self.stale:
            one = self._compute_one
            if one is not None and len(self.stale) <= ONE_BY_ONE_MAX:
                for row in self.stale:
                    values[row] = one(row)
            else:
                stale = np.fromiter(self.stale, dtype=np.int64, count=len(self.stale))
                values[stale] = self._compute(stale)
            self.stale.clear()
        return values.take(rows)


class RowMemos:
    """The :class:`RowMemo` of each class of pods over one node table, dropped together when its name <-> row
    mapping moves (:attr:`~app.cache.nodetable.NodeTable.generation`), least recently used first past
    :data:`MEMOS_MAX`.

    A memo is made for a class the second time it is asked for (:meth:`get` answers None the first time):
    its first read works out every row of the table, which for a pod of a shape seen once (5,000 rows for
    500 candidates) would cost more than answering the candidates alone.

    Args:
        limit: memos kept at most.
    """

    def __init__(self, limit: int = MEMOS_MAX) -> None:
        if limit < 1:
            raise ValueError(f"limit {limit} < 1")
        self._limit = limit
        self._memos: dict[Hashable, RowMemo] = {}
        #: classes asked for once, with no memo yet (oldest first, at most ``limit``)
        self._seen: dict[Hashable, None] = {}
        self._generation: int | None = None

    def __len__(self) -> int:
        """Memos kept now."""
        return len(self._memos)

    def get(
        self,
        key: Hashable,
        generation: int,
        capacity: int,
        compute: Callable[[], tuple[RowFunction, OneRowFunction | None]],
        owner: Any = None,
    ) -> RowMemo | None:
        """The memo of class ``key`` for a table at ``generation`` with ``capacity`` rows; made with the rows and
        one-row functions ``compute()`` gives (and ``owner`` kept alive with it) when the class is asked for the
        second time, None the first time (answer the call without a memo). Every memo is dropped first when the
        generation moved. ``key`` must identify the class for as long as ``owner`` lives (e.g. hold
        ``id(owner)``)."""
        memos = self._memos
        if generation != self._generation:
            memos.clear()
            self._seen.clear()
            self._generation = generation
        memo = memos.pop(key, None)
        if memo is None:
            seen = self._seen
            if key not in seen:
                if len(seen) >= self._limit:
                    del seen[next(iter(seen))]
                seen[key] = None
                return None
            del seen[key]
            rows_function, one_row_function = compute()
            memo = RowMemo(rows_function, capacity, owner, one_row_function)
            if len(memos) >= self._limit:
                del memos[next(iter(memos))]
        memos[key] = memo  # the newest
        return memo

    def mark(self, rows: list[int]) -> None:
        """Rows whose state the memos' functions read were written: each memo works them out again."""
        if rows:
            for memo in self._memos.values():
                memo.stale.update(rows)

    def clear(self) -> None:
        """Drop every memo (a change of what the functions read besides rows, e.g. the plugin's args)."""
        self._memos.clear()
        self._seen.clear()
