"""Per-node answers of LoadAware for the last few pod estimates, kept over the node table's rows.

LoadAware's Filter verdict and Score of a node depend on the node's columns (written when the node
changes, :meth:`~app.plugins.loadaware.plugin.LoadAwareScheduling._flush`) and on the incoming pod's
estimate only; most pods in a cluster share a handful of estimates (same requests, same priority
class). :class:`EstimateRowCache` keeps, per estimate key, the answer of every row of the table,
computed once over all rows when the key is first asked for and refreshed row by row when a node's
columns are rewritten. A call over a window of nodes is then one ``take`` of that array instead of the
whole arithmetic over ``(nodes, resources)`` arrays.

Invariant: for every cached key, ``array[row] == compute(rows=[row], key)`` for every row in use. It
holds as long as every write to the columns ``compute`` reads is followed by :meth:`refresh` of the rows
written, and the table's growth (which replaces every column) is seen by :meth:`get` (the cached arrays
are then dropped). Rows freed by a node's removal are zeroed by the table and never read until a node
takes the row again, which writes (and refreshes) it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

#: ``compute(rows, key)``: the answer of each row of ``rows`` (int64 indices into the table) for ``key``.
Compute = Callable[[npt.NDArray[np.int64], Any], npt.NDArray[Any]]
#: ``compute_one(row, key)``: the same answer for one row, in plain Python (a refresh usually rewrites one or
#: two rows, where a dozen numpy calls on one-row arrays would cost more than the window's whole arithmetic).
ComputeOne = Callable[[int, Any], int]

#: Refreshes of at most this many rows use ``compute_one`` row by row.
ONE_BY_ONE = 4


class EstimateRowCache:
    """The answers of ``compute`` over every table row for up to ``size`` keys (least recently used dropped).

    Args:
        compute: the per-row answer for a key (see :data:`Compute`); must depend only on the rows'
            columns and the key.
        compute_one: the same for one row (see :data:`ComputeOne`), used to refresh a few rows; must
            equal ``compute`` on every row.
        size: how many keys are kept (a cluster whose pods have more distinct estimates recomputes
            over all rows on a miss, as often as the keys alternate).
    """

    def __init__(self, compute: Compute, compute_one: ComputeOne, size: int = 8) -> None:
        self._compute = compute
        self._compute_one = compute_one
        self._size = max(1, size)
        self._arrays: OrderedDict[Hashable, npt.NDArray[Any]] = OrderedDict()
        self._capacity = -1

    def __len__(self) -> int:
        return len(self._arrays)

    def get(self, key: Hashable, capacity: int) -> npt.NDArray[Any]:
        """The answers of rows ``0 .. capacity - 1`` for ``key`` (read-only; do not keep across events).

        ``capacity`` is the table's current row count: when it changed since the arrays were made, every
        cached key is dropped (the table grew and replaced its columns).
        """
        if capacity != self._capacity:
            self._arrays.clear()
            self._capacity = capacity
        array = self._arrays.get(key)
        if array is None:
            array = self._compute(np.arange(capacity, dtype=np.int64), key)
            self._arrays[key] = array
            if len(self._arrays) > self._size:
                self._arrays.popitem(last=False)
        else:
            self._arrays.move_to_end(key)
        return array

    def refresh(self, rows: npt.NDArray[np.int64]) -> None:
        """Recompute ``rows`` (their columns were just rewritten) for every cached key."""
        if not len(rows) or not self._arrays:
            return
        rows = rows[rows < self._capacity]  # rows beyond: the table grew, get() will drop everything
        if not len(rows):
            return
        if len(rows) <= ONE_BY_ONE:
            one = self._compute_one
            for row in rows.tolist():
                for key, array in self._arrays.items():
                    array[row] = one(row, key)
            return
        for key, array in self._arrays.items():
            array[rows] = self._compute(rows, key)

    def clear(self) -> None:
        """Drop every cached key."""
        self._arrays.clear()
