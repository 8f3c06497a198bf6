"""Per pod shape, the fragmentation growth FragmentationAware computed for each node-table row.

A node's growth (:func:`~app.plugins.deviceshare.fragmentation.best_placement`,
:func:`~app.plugins.deviceshare.fragmentation.no_gpu_growth`) depends on the pod's shape, the target
workload, the node's GPU row (free milli, fit test and GPU model: all covered by the row's
``GPUTable.version`` stamp) and its free cpu and memory, and on nothing else: every node's value is
computed on its own (per-row sums), so a value computed in an earlier cycle is the value a
recomputation would give, bit for bit, while those inputs hold. Between two pods of the same shape
usually only the few nodes that took pods in between changed; the others' values are reused.

The memo keeps one entry per shape key (the caller's), at most :data:`MAX_SHAPES`, the least recently
used dropped first; a different table or workload object empties it.

Rows that miss can still share a value with another node: the growth is a function of the node's
*state* (its GPU row's contents, GPU model and the cpu/memory classes before and after the pod),
and among ~1,000 candidate nodes few states are distinct (same model, same free GPUs). A caller
that passes ``states`` (a hashable key per missed row, holding every input of its value) gets each
distinct state computed once per call, and states seen in earlier calls (under any row, any pod of
the same reduced shape) are not computed again; at most :data:`MAX_STATES` are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import numpy.typing as npt

#: Shape keys kept (32 bytes per node-table row each).
MAX_SHAPES = 256
#: Node states kept (one dict item each); past it the state memo starts over.
MAX_STATES = 200_000

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class _Entry:
    """Per table row: the stamp, free cpu (milli) and memory (bytes) a value was computed at, and the value."""

    __slots__ = ("cpu", "mem", "stamp", "value")

    def __init__(self, size: int) -> None:
        self.stamp: I64 = np.full(size, -1, dtype=np.int64)
        self.cpu: I64 = np.zeros(size, dtype=np.int64)
        self.mem: I64 = np.zeros(size, dtype=np.int64)
        self.value: F64 = np.zeros(size, dtype=np.float64)

    def grow(self, size: int) -> None:
        extra = size - len(self.stamp)
        self.stamp = np.concatenate([self.stamp, np.full(extra, -1, dtype=np.int64)])
        self.cpu = np.concatenate([self.cpu, np.zeros(extra, dtype=np.int64)])
        self.mem = np.concatenate([self.mem, np.zeros(extra, dtype=np.int64)])
        self.value = np.concatenate([self.value, np.zeros(extra, dtype=np.float64)])


class DeltaMemo:
    """Fragmentation growth per (shape key, node-table row), valid while the row's stamp, free cpu and
    free memory are those it was computed at.

    Not thread-safe (the plugin is called from the event loop).
    """

    def __init__(self, max_shapes: int = MAX_SHAPES) -> None:
        self.max_shapes = max_shapes
        self._owner: tuple[object, object] | None = None
        self._entries: dict[Hashable, _Entry] = {}
        self._states: dict[Hashable, dict[Hashable, float]] = {}  # space -> state key -> value
        self._state_count = 0
        #: rows computed (missed) and reused (hit) so far, for tests and profiles; ``shared``: missed
        #: rows whose value came from an equal node state (counted in ``computed`` too).
        self.computed = 0
        self.reused = 0
        self.shared = 0

    def values(
        self,
        table: object,
        workload: object,
        key: Hashable,
        rows: I64,
        stamps: I64,
        cpu: I64,
        mem: I64,
        compute: Callable[[I64], F64],
        size: int = 0,
        states: Callable[[I64], Sequence[Hashable]] | None = None,
        space: Hashable = None,
    ) -> F64:
        """(N,) growth at table ``rows`` (N,) with their ``stamps``, free ``cpu`` (milli) and ``mem``
        (bytes), all (N,) int64; ``compute(positions)`` gives the values of the positions (into ``rows``) not
        memoised, which are then kept. ``table`` and ``workload`` are compared by identity: another
        object empties the memo. ``size``: a bound above every row (the table's capacity) when the
        caller knows one. ``states(positions)``: optional, one hashable key per position (into ``rows``)
        that determines its value completely, whatever the row (see the module docstring), within the
        key ``space`` (e.g. the pod's reduced shape); positions with equal keys, or a key computed
        before in the same space, share one value. Returns a new array."""
        owner = (table, workload)
        if self._owner is None or self._owner[0] is not table or self._owner[1] is not workload:
            self._owner = owner
            self._entries.clear()
            self._states.clear()
            self._state_count = 0
        entry = self._entries.pop(key, None)  # re-inserted below: the most recently used is last
        if entry is None:
            if len(self._entries) >= self.max_shapes:
                del self._entries[next(iter(self._entries))]
            entry = _Entry(0)
        self._entries[key] = entry
        if len(rows) == 0:
            return np.zeros(0, dtype=np.float64)
        need = size or int(rows.max()) + 1
        if need > len(entry.stamp):
            entry.grow(max(need, 2 * len(entry.stamp)))
        ok = (entry.stamp.take(rows) == stamps) & (entry.cpu.take(rows) == cpu) & (entry.mem.take(rows) == mem)
        out: F64 = entry.value.take(rows)
        miss = np.flatnonzero(~ok)
        self.reused += len(rows) - len(miss)
        if len(miss):
            fresh = compute(miss) if states is None else self._by_state(miss, compute, space, states(miss))
            out[miss] = fresh
            at = rows[miss]
            entry.value[at] = fresh
            entry.stamp[at] = stamps[miss]
            entry.cpu[at] = cpu[miss]
            entry.mem[at] = mem[miss]
            self.computed += len(miss)
        return out

    def _by_state(self, miss: I64, compute: Callable[[I64], F64], space: Hashable, keys: Sequence[Hashable]) -> F64:
        """(len(miss),) values of the missed positions ``miss``, whose state ``keys`` are given: known
        states are read, each new distinct state is computed once (at its first position)."""
        known = self._states.get(space)
        if known is None:
            known = self._states[space] = {}
        fresh: F64 = np.empty(len(miss), dtype=np.float64)
        first: dict[Hashable, int] = {}  # new state -> index into todo
        todo: list[int] = []
        where: list[int] = []  # per position of a new state: its index into todo
        late: list[int] = []
        for i, k in enumerate(keys):
            v = known.get(k)
            if v is not None:
                fresh[i] = v
                continue
            t = first.get(k)
            if t is None:
                t = first[k] = len(todo)
                todo.append(i)
            late.append(i)
            where.append(t)
        self.shared += len(miss) - len(todo)
        if todo:
            got = compute(miss[np.array(todo, dtype=np.int64)])
            fresh[late] = got[where]
            if self._state_count + len(todo) > MAX_STATES:
                self._states.clear()
                self._state_count = 0
                known = self._states[space] = {}
            self._state_count += len(todo)
            known.update(zip(first, got.tolist(), strict=True))
        return fresh
