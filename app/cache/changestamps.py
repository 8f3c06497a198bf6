"""Which nodes changed since a moment: a change counter per node row, and one for changes tied to no node.

A result worked out from the cache for a set of nodes (the extender scores of a ``/prioritize`` answered ahead,
issue 47) is still what the same work would give while none of those nodes' counters moved, the counter of
changes tied to no node stayed, and no node got or lost a row (:attr:`~app.cache.nodetable.NodeTable.generation`).
:class:`ChangeStamps` keeps those counters as a :class:`~app.cache.listener.CacheListener`, so every change the
cache applies or makes (watch events, relists, assumed and forgotten pods) moves one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from app.cache.listener import CacheListener

if TYPE_CHECKING:
    from app.cache.nodestate import NodeState
    from app.cache.nodetable import NodeTable
    from app.cache.podinfo import PodInfo

#: The NodeTable column of the per-node counters.
STAMP_COLUMN = "change-stamp"

#: Kinds whose objects are named after the node they describe (cluster-scoped, one per node): a change to one
#: moves that node's counter. A change to any other kind moves the counter of changes tied to no node.
NODE_NAMED_KINDS = frozenset({"NodeMetric", "Device", "NodeResourceTopology"})


@dataclass(frozen=True, slots=True)
class Stamp:
    """The counters of some node rows at one moment (:meth:`ChangeStamps.stamp`).

    Attributes:
        rows: the node rows (int64, as the caller gave them; not copied, so the caller must not change them).
        counters: each row's counter then (a copy).
        shared: the counter of changes tied to no node then.
        generation: the node table's generation then.
    """

    rows: npt.NDArray[np.int64]
    counters: npt.NDArray[np.int64]
    shared: int
    generation: int


class ChangeStamps(CacheListener):
    """Change counters for :class:`~app.cache.snapshot.ClusterCache`: one per node row, moved by a change to the
    node, to a pod on it (bound or assumed, before or after the change) or to an object named after it
    (:data:`NODE_NAMED_KINDS`); and one shared, moved by a change to any other object, and by a change to a node
    the table holds no row for. A pod with no node before and after (pending) moves nothing: no score plugin
    reads pending pods (LoadAware, NodeNUMAResource, DeviceShare and Reservation read what is on the nodes).

    Register it with ``cache.add_listener``; it then sees every change as the cache applies it.

    Args:
        table: the cache's node table (the counters live in its :data:`STAMP_COLUMN` column).
    """

    def __init__(self, table: NodeTable) -> None:
        self._table = table
        self.shared = 0

    def _move(self, name: str) -> None:
        row = self._table.row(name)
        if row is None:
            self.shared += 1
        else:
            self._table.column(STAMP_COLUMN)[row] += 1

    def on_node(self, name: str, node: NodeState | None) -> None:
        """Move node ``name``'s counter (the shared one once it has no row)."""
        self._move(name)

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Move the counter of the node the pod was on and of the node it is on (bound or assumed)."""
        before = old.node_name if old is not None else ""
        after = new.node_name if new is not None else ""
        if before:
            self._move(before)
        if after and after != before:
            self._move(after)

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Move the counter of the node ``key`` names for :data:`NODE_NAMED_KINDS`, else the shared one."""
        if kind in NODE_NAMED_KINDS:
            self._move(key)
        else:
            self.shared += 1

    def stamp(self, rows: npt.NDArray[np.int64]) -> Stamp:
        """The counters of ``rows`` (node rows, int64) now."""
        table = self._table
        return Stamp(rows, table.column(STAMP_COLUMN)[rows], self.shared, table.generation)

    def unchanged(self, stamp: Stamp) -> bool:
        """Whether no counter of ``stamp`` moved since it was taken: no change to those nodes, none tied to no
        node, and no node got or lost a row."""
        table = self._table
        return (
            stamp.shared == self.shared
            and stamp.generation == table.generation
            and bool(np.array_equal(table.column(STAMP_COLUMN)[stamp.rows], stamp.counters))
        )
