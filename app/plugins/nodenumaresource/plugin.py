"""The NodeNUMAResource plugin: exclusive cpusets for LSE/LSR pods and NUMA-aware placement (upstream
``pkg/scheduler/plugins/nodenumaresource/plugin.go``).

- PreFilter: parse ``resource-spec`` and ``numa-topology-spec`` (malformed or unknown values fail every
  node UnschedulableAndUnresolvable naming the annotation). A pod without requests, or a plain pod (not
  an LSE/LSR prod pod asking a cpuset, no NUMA policy of its own) while no node has a node-side cpu-bind
  or NUMA policy, answers Skip: no per-node cost. An LSE/LSR prod pod (``AllowUseCPUSet``) gets a bind
  policy: required (``Default`` = the args' default) over preferred (empty or ``Default`` = the args'
  default, FullPCPUs); FullPCPUs / SpreadByPCPUs need an integer cpu request
  (``the requested CPUs must be integer``).
- Filter, per node: pod and node NUMA policies must agree (``node(s) NUMA Topology policy not match``);
  a node-side bind policy (label ``node.koordinator.sh/cpu-bind-policy`` or kubelet static
  ``full-pcpus-only``) makes every pod requesting cpu bind there; a binding pod needs the node's cpu
  topology (``node(s) invalid CPU Topology``, unresolvable), no conflicting required policy
  (``node(s) cpu bind policy conflicts with pod's required cpu bind policy``), a cpu count that is a
  multiple of threads per core under FullPCPUs (``node(s) requested cpus not multiple cpus per core``),
  and enough free cpus its policy can use (``not enough cpus available to satisfy request``).
  ``Restricted`` and ``SingleNUMANode`` run the topology manager's admission (:mod:`.topology_hint`).
- Score: without a NUMA policy the node-level strategy over cpu and memory (``scoringStrategy``);
  with one, the strategy over the NUMA nodes the pod would get, their holders included.
- Reserve: choose the cpuset (:mod:`.cpu_accumulator`) and NUMA resources on the best hint and hold
  them at once; a pod owning a Reservation with a cpuset on the node takes its cpus first.
  Unreserve releases them.
- PreBind: write ``scheduling.koordinator.sh/resource-status`` (and the effective ``resource-spec``
  when the pod did not name its policy) through ``handle.client.patch``; a reserve pod's goes onto
  its Reservation (``pre_bind_reservation``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from app.api.koordext import LABEL_POD_QOS
from app.api.quantity import format_resource
from app.api.topology import dumps_annotation, format_cpuset
from app.cache.podinfo import PodInfo
from app.client.errors import ApiError, NotFound
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import (
    FilterFailures,
    FilterPlugin,
    NodeBatch,
    NodeDetailPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservationNominator,
    ReservationPreBindPlugin,
    ReservePlugin,
    ScorePlugin,
)
from app.framework.status import SKIP, SUCCESS, Status
from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.args import NodeNUMAResourceArgs, decode_args
from app.plugins.nodenumaresource.cpu_accumulator import filter_by_required_policy
from app.plugins.nodenumaresource.cpu_manager import (
    CPU,
    MEMORY,
    CPUManager,
    PodAllocation,
    Refused,
    ResourceOptions,
    allocate,
    free_cpus,
    numa_available,
)
from app.plugins.nodenumaresource.cpu_topology import TopologyMemo
from app.plugins.nodenumaresource.pod_eventhandler import AllocationTracker
from app.plugins.nodenumaresource.podspec import (
    SpecError,
    allow_use_cpuset,
    numa_topology_spec,
    resource_spec,
)
from app.plugins.nodenumaresource.scoring import Scorer
from app.plugins.nodenumaresource.topology_hint import Admission, admit
from app.plugins.nodenumaresource.topology_options import (
    TopologyOptions,
    merge_numa_policy,
    node_reserved_cpus,
    topology_options,
)

log = logging.getLogger(__name__)

NAME = "NodeNUMAResource"
_STATE = NAME
_ALLOC = NAME + "/allocation"
_MAX_WRITE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class _PodState:
    """``preFilterState``: the pod's requests, whether it asks a cpuset and by which policies."""

    skip: bool
    requests: dict[str, int]
    num_cpus: int = 0
    request_bind: bool = False
    required: str = ""
    preferred: str = ""
    exclusive: str = ""
    numa_policy: str = ""
    numa_exclusive: str = ""
    #: the pod named a bind policy in its resource-spec (else PreBind writes the effective one back)
    spec: dict[str, str] | None = None


_SKIP_STATE = _PodState(True, {})
#: Entries :attr:`NodeNUMAResource._parses` holds at most (cleared when full).
_PARSES_MAX = 4096
#: Per-node columns in the node table (see ``_flush``).
_COLUMN_PREFIX = NAME + "/"
_COLUMNS = ("valid", "perCore", "free", "full", "spread")
#: NUMA slots per node in the per-NUMA-node columns; a node with more NUMA nodes is judged one by one.
_NUMA_SLOTS = 16
#: per node: how many NUMA nodes (-1: more than the slots), whether any zone has cpu / memory
_NUMA_SCALARS = ("numaCount", "numaHasCpu", "numaHasMemory")
#: per NUMA node (slot k = the k-th lowest id): available cpu (milli) and memory (bytes), and the free cpus
#: there usable without a required policy, under required FullPCPUs, under required SpreadByPCPUs
_NUMA_VECTORS = ("numaCpu", "numaMemory", "numaFree", "numaFull", "numaSpread")
_USABLE_KEY = {n.CPU_BIND_FULL_PCPUS: "full", n.CPU_BIND_SPREAD_BY_PCPUS: "spread"}
_NUMA_USABLE_KEY = {n.CPU_BIND_FULL_PCPUS: "numaFull", n.CPU_BIND_SPREAD_BY_PCPUS: "numaSpread"}
# Status is immutable: failing nodes share one per reason
_INVALID_TOPOLOGY = Status.unresolvable(n.ERR_INVALID_CPU_TOPOLOGY)
_SMT_ALIGNMENT = Status.unresolvable(n.ERR_SMT_ALIGNMENT)
_NOT_ENOUGH_CPUS = Status.unschedulable(n.ERR_NOT_ENOUGH_CPUS)
_VECTOR_NUMA_POLICIES = frozenset({n.NUMA_POLICY_BEST_EFFORT, n.NUMA_POLICY_RESTRICTED, n.NUMA_POLICY_SINGLE_NUMA_NODE})
_MISSING_NUMA = Status.unresolvable(n.ERR_MISSING_NUMA_RESOURCES)


@dataclass(frozen=True, slots=True)
class _NodeDecision:
    """What Filter / Score / Reserve decided on one node for one pod."""

    opts: TopologyOptions
    ro: ResourceOptions | None  # None: the plugin has nothing to do there
    numa_policy: str


@dataclass(slots=True)
class _View:
    """A node's options and free cpus, memoised until the Node, its topology or its holders change."""

    node_state: object
    topo: object
    version: int
    opts: TopologyOptions
    free: frozenset[int]
    usable: dict[str, int]
    numa: tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]] | None = None


class NodeNUMAResource(
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    ReservationPreBindPlugin,
    NodeDetailPlugin,
):
    """See the module docstring."""

    NAME: ClassVar[str] = NAME
    name = NAME

    def __init__(self, args: NodeNUMAResourceArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.scorer = Scorer(args.scoring)
        self.numa_scorer = Scorer(args.numa_scoring)
        self.manager = CPUManager()
        self.memo = TopologyMemo()
        self._views: dict[str, _View] = {}
        #: nodes whose per-NUMA-node columns are stale (refreshed only when a NUMA-policy pod reads them)
        self._numa_dirty: set[str] = set()
        self._pending: dict[str, tuple[str, str, dict[str, str], int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._nominators: list[ReservationNominator] | None = None
        self.tracker = AllocationTracker(handle, self.manager, on_pod_seen=self._pod_seen)
        #: The last pod parsed and its parse (or the error it raised): ``/prioritize`` and the binding cycle
        #: get ``/filter``'s PodInfo object, and a PodInfo is never changed in place.
        self._last_parse: tuple[PodInfo, _PodState | SpecError | Refused] | None = None
        #: Parses by :meth:`_parse_key` (see :meth:`_parse`; cleared when full).
        self._parses: dict[tuple[Any, ...], _PodState | SpecError | Refused] = {}

    # ------------------------------------------------------------------ node view
    def _view(self, node: str) -> _View | None:
        """The node's memoised view (None when the node is unknown): rebuilt only when the Node object, its
        NodeResourceTopology object or its holders (``NodeAllocation.version``) changed."""
        snapshot = self.handle.snapshot
        state = snapshot.node(node)
        if state is None:
            self._views.pop(node, None)
            return None
        topo = snapshot.topology(node)
        na = self.manager.node(node)
        view = self._views.get(node)
        if view is not None and view.node_state is state and view.topo is topo and view.version == na.version:
            return view
        node_reserved = node_reserved_cpus(snapshot.objects("NodeResourceTopology").get(node)) if topo else frozenset()
        opts = topology_options(
            state.labels, topo, self.memo.get(node, topo), self.args.numa_allocate_strategy, node_reserved
        )
        view = _View(state, topo, na.version, opts, free_cpus(opts, na), {})
        self._views[node] = view
        return view

    def options(self, node: str) -> TopologyOptions | None:
        """The node's options (None when the node is unknown)."""
        view = self._view(node)
        return view.opts if view is not None else None

    def _usable_count(self, view: _View, ro: ResourceOptions) -> int:
        """How many of the node's free cpus the pod's policy can use (memoised per policy)."""
        key = ro.policy if ro.required else ""
        found = view.usable.get(key)
        if found is None:
            assert view.opts.cpu is not None
            usable = filter_by_required_policy(view.opts.cpu, view.free, ro.policy) if ro.required else view.free
            found = view.usable[key] = len(usable)
        return found

    def _numa(self, view: _View, node: str) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
        """(available, total) per NUMA node, memoised (callers get copies of the available maps)."""
        if view.numa is None:
            view.numa = numa_available(view.opts, self.manager.node(node))
        available, total = view.numa
        return {k: dict(v) for k, v in available.items()}, total

    # ------------------------------------------------------------------ prefilter
    def _parse(self, pod: PodInfo) -> _PodState:
        """:meth:`_parse_pod`, kept for the last PodInfo object, and for pods equal in what the parse reads
        (:meth:`_parse_key`: a workload's replicas) in :attr:`_parses`; the parse depends only on these and
        the args, and a :class:`_PodState` is never changed.

        Raises SpecError / Refused (see :meth:`pre_filter`), the same error again for the same pod.
        """
        last = self._last_parse
        if last is not None and last[0] is pod:
            found = last[1]
        else:
            key = self._parse_key(pod)
            memo = self._parses
            kept = memo.get(key)
            if kept is not None:
                found = kept
            else:
                try:
                    found = self._parse_pod(pod)
                except (SpecError, Refused) as exc:
                    found = exc
                if len(memo) >= _PARSES_MAX:
                    memo.clear()
                memo[key] = found
            self._last_parse = (pod, found)
        if isinstance(found, _PodState):
            return found
        raise found.with_traceback(None)

    @staticmethod
    def _parse_key(pod: PodInfo) -> tuple[Any, ...]:
        """What :meth:`_parse_pod` reads of ``pod``: the resource-spec and numa-topology-spec annotations,
        the requests, the QoS label and the priority class (``AllowUseCPUSet``)."""
        annotations = pod.annotations
        return (
            annotations.get(n.ANNOTATION_RESOURCE_SPEC),
            annotations.get(n.ANNOTATION_NUMA_TOPOLOGY_SPEC),
            tuple(pod.requests.items()),
            pod.labels.get(LABEL_POD_QOS),
            pod.priority_class,
        )

    def _parse_pod(self, pod: PodInfo) -> _PodState:
        """Raises SpecError / Refused (see :meth:`pre_filter`)."""
        spec = resource_spec(pod.annotations)
        numa = numa_topology_spec(pod.annotations)
        requests = {r: pod.requests.get(r, 0) for r in (CPU, MEMORY)}
        if not any(pod.requests.values()):
            return _SKIP_STATE
        milli = requests[CPU]
        state = _PodState(
            skip=False,
            requests=requests,
            num_cpus=milli // 1000,
            numa_policy=numa.numa_topology_policy,
            numa_exclusive=numa.single_numa_node_exclusive,
        )
        if allow_use_cpuset(pod):
            default = self.args.default_cpu_bind_policy
            preferred = spec.preferred_cpu_bind_policy
            if preferred in ("", n.CPU_BIND_DEFAULT):
                preferred = default
            required = spec.required_cpu_bind_policy
            if required == n.CPU_BIND_DEFAULT:
                required = default
            policy = required or preferred
            if policy in (n.CPU_BIND_FULL_PCPUS, n.CPU_BIND_SPREAD_BY_PCPUS):
                if milli % 1000:
                    raise Refused(n.ERR_INVALID_REQUESTED_CPUS, unresolvable=True)
                if milli > 0:
                    named = {
                        k: v
                        for k, v in (
                            ("requiredCPUBindPolicy", spec.required_cpu_bind_policy),
                            ("preferredCPUBindPolicy", spec.preferred_cpu_bind_policy),
                            ("preferredCPUExclusivePolicy", spec.preferred_cpu_exclusive_policy),
                        )
                        if v
                    }
                    return _PodState(
                        skip=False,
                        requests=requests,
                        num_cpus=milli // 1000,
                        request_bind=True,
                        required=required,
                        preferred=policy,
                        exclusive=spec.preferred_cpu_exclusive_policy,
                        numa_policy=numa.numa_topology_policy,
                        numa_exclusive=numa.single_numa_node_exclusive,
                        spec=named,
                    )
        return state

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Parse the pod's annotations and requests (see the module docstring); Skip plain pods while no
        node has a node-side policy."""
        try:
            ps = self._parse(pod)
        except SpecError as exc:
            state.write(_STATE, _SKIP_STATE)
            return Status.unresolvable(str(exc))
        except Refused as exc:
            state.write(_STATE, _SKIP_STATE)
            return Status.unresolvable(exc.reason)
        ps = self._plain_skip(ps)
        state.write(_STATE, ps)
        return SKIP if ps.skip else SUCCESS

    def _plain_skip(self, ps: _PodState) -> _PodState:
        """A pod asking no cpuset and no NUMA policy concerns the plugin only on nodes with node-side policies."""
        if not ps.skip and not ps.request_bind and not ps.numa_policy and not self.tracker.policy_nodes:
            return _SKIP_STATE
        return ps

    def _state(self, state: CycleState, pod: PodInfo) -> _PodState:
        found: _PodState | None = state.get(_STATE)
        if found is None:
            try:
                found = self._plain_skip(self._parse(pod))
            except (SpecError, Refused):
                found = _SKIP_STATE
            state.write(_STATE, found)
        return found

    # ------------------------------------------------------------------ per-node decision
    def _decide(self, ps: _PodState, node: str) -> _NodeDecision | Status:
        """The node's options and the pod's request there, or the failing status (Filter's checks
        before any allocation)."""
        view = self._view(node)
        if view is None:
            return Status.unresolvable(f"node {node} not found")
        opts = view.opts
        numa_policy = merge_numa_policy(opts.numa_policy, ps.numa_policy)
        if numa_policy is None:
            return Status.unresolvable(n.ERR_NOT_MATCH_NUMA_TOPOLOGY)
        bind = ps.request_bind
        if not bind and ps.requests[CPU] and opts.bind_policy != n.NODE_CPU_BIND_NONE:
            if ps.requests[CPU] % 1000:
                return Status.unresolvable(n.ERR_INVALID_REQUESTED_CPUS)
            bind = True
        if not bind and not numa_policy:
            return _NodeDecision(opts, None, numa_policy)
        policy, required = ps.preferred, bool(ps.required)
        if ps.required:
            policy = ps.required
        if bind:
            if not opts.cpu_valid():
                return Status.unresolvable(n.ERR_INVALID_CPU_TOPOLOGY)
            node_required = ""
            if opts.bind_policy == n.NODE_CPU_BIND_FULL_PCPUS_ONLY:
                node_required = n.CPU_BIND_FULL_PCPUS
            elif opts.bind_policy == n.NODE_CPU_BIND_SPREAD_BY_PCPUS:
                node_required = n.CPU_BIND_SPREAD_BY_PCPUS
            if node_required:
                if ps.required and ps.required != node_required:
                    return Status.unresolvable(n.ERR_CPU_BIND_POLICY_CONFLICT)
                policy, required = node_required, True
            assert opts.cpu is not None
            if required and policy == n.CPU_BIND_FULL_PCPUS and (ps.requests[CPU] // 1000) % opts.cpu.cpus_per_core():
                return Status.unresolvable(n.ERR_SMT_ALIGNMENT)
        ro = ResourceOptions(
            num_cpus=ps.requests[CPU] // 1000,
            requests=ps.requests,
            bind=bind,
            policy=policy,
            required=required,
            exclusive=ps.exclusive,
        )
        return _NodeDecision(opts, ro, numa_policy)

    def _preferred(self, state: CycleState, pod: PodInfo) -> dict[str, frozenset[int]]:
        """Node -> the cpus of reservations ``pod`` owns there that no other pod holds."""
        key = _STATE + "/reserved"
        found: dict[str, frozenset[int]] | None = state.get(key)
        if found is not None:
            return found
        found = {}
        if self.tracker.reservations:
            if self._nominators is None:
                fw = self.handle.framework
                self._nominators = [p for p in fw.plugins if isinstance(p, ReservationNominator)] if fw else []
            for nominator in self._nominators:
                for name, _ in nominator.reservations_for(pod):
                    rem = self.tracker.reservation_remainder(name)
                    if rem is not None and rem[1]:
                        found[rem[0]] = found.get(rem[0], frozenset()) | rem[1]
        state.write(key, found)
        return found

    def _admission(self, d: _NodeDecision, node: str, preferred: frozenset[int], choose: bool = True) -> Admission:
        assert d.ro is not None
        view = self._view(node)
        assert view is not None
        available, total = self._numa(view, node)
        free = view.free if not preferred else free_cpus(d.opts, self.manager.node(node), preferred)
        return admit(d.opts, d.numa_policy, d.ro, available, total, free, self.numa_scorer, choose)

    # ------------------------------------------------------------------ filter
    def _filter_one(self, ps: _PodState, node: str, preferred: frozenset[int]) -> Status:
        d = self._decide(ps, node)
        if isinstance(d, Status):
            return d
        ro = d.ro
        if ro is None:
            return SUCCESS
        if d.numa_policy in (n.NUMA_POLICY_RESTRICTED, n.NUMA_POLICY_SINGLE_NUMA_NODE):
            verdict = self._admission(d, node, preferred, choose=False)
            if not verdict.admit:
                if verdict.unresolvable:
                    return Status.unresolvable(verdict.reason)
                return Status.unschedulable(verdict.reason)
            return SUCCESS
        if ro.bind:
            # what the accumulator needs: enough free cpus the policy can use (it always finds them then)
            assert d.opts.cpu is not None
            if preferred:
                free = free_cpus(d.opts, self.manager.node(node), preferred)
                usable = filter_by_required_policy(d.opts.cpu, free, ro.policy) if ro.required else free
                count = len(usable)
            else:
                view = self._view(node)
                assert view is not None
                count = self._usable_count(view, ro)
            if count < ro.num_cpus:
                return Status.unschedulable(n.ERR_NOT_ENOUGH_CPUS)
        return SUCCESS

    def _flush(self) -> None:
        """Refresh the per-node columns (cpu topology valid, cpus per core, free cpus usable by each policy)
        of the nodes whose Node, topology or holders changed since the last call."""
        dirty = self.manager.dirty
        if not dirty:
            return
        table = self.handle.snapshot.table
        cols = {key: table.column(_COLUMN_PREFIX + key) for key in _COLUMNS}
        for name in list(dirty):
            row = table.row(name)
            if row is None:
                continue
            self._numa_dirty.add(name)
            view = self._view(name)
            if view is None or not view.opts.cpu_valid():
                for col in cols.values():
                    col[row] = 0
                continue
            assert view.opts.cpu is not None
            cols["valid"][row] = 1
            cols["perCore"][row] = view.opts.cpu.cpus_per_core()
            cols["free"][row] = len(view.free)
            cols["full"][row] = len(filter_by_required_policy(view.opts.cpu, view.free, n.CPU_BIND_FULL_PCPUS))
            cols["spread"][row] = len(filter_by_required_policy(view.opts.cpu, view.free, n.CPU_BIND_SPREAD_BY_PCPUS))
        dirty.clear()

    def _flush_numa(self, names: list[str]) -> None:
        """Refresh the per-NUMA-node columns of those of ``names`` changed since they were last read (after
        :meth:`_flush`, which marks them), so pods without a NUMA policy never pay for them."""
        self._flush()
        dirty = self._numa_dirty
        if not dirty:
            return
        todo = dirty.intersection(names)
        dirty -= todo
        table = self.handle.snapshot.table
        for name in todo:
            row = table.row(name)
            if row is not None:
                self._flush_numa_row(self._view(name), name, row)

    def _flush_numa_row(self, view: _View | None, name: str, row: int) -> None:
        """Refresh one row of the per-NUMA-node columns (what :func:`.topology_hint.admit` reads in Filter)."""
        table = self.handle.snapshot.table
        scalars = {key: table.column(_COLUMN_PREFIX + key) for key in _NUMA_SCALARS}
        vectors = {key: table.column(_COLUMN_PREFIX + key, tail=(_NUMA_SLOTS,)) for key in _NUMA_VECTORS}
        for col in (*scalars.values(), *vectors.values()):
            col[row] = 0
        if view is None:
            return
        ids = view.opts.numa_nodes()
        if len(ids) > _NUMA_SLOTS:
            scalars["numaCount"][row] = -1
            return
        scalars["numaCount"][row] = len(ids)
        available, total = self._numa(view, name)
        slot = {nid: k for k, nid in enumerate(ids)}
        for nid, k in slot.items():
            vectors["numaCpu"][row, k] = available[nid].get(CPU, 0)
            vectors["numaMemory"][row, k] = available[nid].get(MEMORY, 0)
        scalars["numaHasCpu"][row] = any(CPU in total[i] for i in ids)
        scalars["numaHasMemory"][row] = any(MEMORY in total[i] for i in ids)
        cpu = view.opts.cpu
        if cpu is None:
            return
        for key, policy in (
            ("numaFree", ""),
            ("numaFull", n.CPU_BIND_FULL_PCPUS),
            ("numaSpread", n.CPU_BIND_SPREAD_BY_PCPUS),
        ):
            usable = filter_by_required_policy(cpu, view.free, policy) if policy else view.free
            col = vectors[key]
            for nid, count in Counter(map(cpu.node.__getitem__, usable)).items():
                at = slot.get(nid)
                if at is not None:
                    col[row, at] = count

    def _filter_numa_columns(
        self, ps: _PodState, nodes: NodeBatch, positions: npt.NDArray[np.int64]
    ) -> tuple[FilterFailures, list[int]]:
        """Filter of a pod with a NUMA policy on nodes without node-side policies (the merged policy is the
        pod's), from the columns: what :meth:`_decide` checks for a cpuset, then the topology manager's
        admission of :func:`.topology_hint.admit` decided over the window at once. Under SingleNUMANode a
        node admits iff one NUMA node holds the whole request; under Restricted iff the NUMA nodes lacking
        none of the requested resources hold it together (sums only grow with the mask, so that widest
        mask fits iff some mask does).

        Returns:
            (failures, the positions to judge one by one: nodes with more NUMA nodes than the slots).
        """
        if ps.numa_policy == n.NUMA_POLICY_BEST_EFFORT:
            # admission always admits: what is left is the cpuset check without a NUMA policy
            return (self._filter_columns(ps, nodes, positions) if ps.request_bind else {}), []
        self._flush_numa([nodes.names[pos] for pos in positions.tolist()])
        table = self.handle.snapshot.table
        rows = nodes.rows[positions]

        def scalar(key: str) -> npt.NDArray[np.int64]:
            return table.column(_COLUMN_PREFIX + key)[rows]

        def vector(key: str) -> npt.NDArray[np.int64]:
            return table.column(_COLUMN_PREFIX + key, tail=(_NUMA_SLOTS,))[rows]

        failures: FilterFailures = {}
        count = scalar("numaCount")
        wide = count < 0
        undecided = ~wide
        if ps.request_bind:
            valid = scalar("valid") > 0
            failures.update(dict.fromkeys(positions[undecided & ~valid].tolist(), _INVALID_TOPOLOGY))
            undecided &= valid
            if ps.required == n.CPU_BIND_FULL_PCPUS:
                smt = undecided & (ps.num_cpus % np.maximum(scalar("perCore"), 1) != 0)
                failures.update(dict.fromkeys(positions[smt].tolist(), _SMT_ALIGNMENT))
                undecided &= ~smt
        missing = undecided & (count == 0)
        failures.update(dict.fromkeys(positions[missing].tolist(), _MISSING_NUMA))
        undecided &= ~missing
        cpu = vector("numaCpu")
        memory = vector("numaMemory")
        usable = vector(_NUMA_USABLE_KEY.get(ps.required, "numaFree")) if ps.request_bind else None
        if usable is not None and ps.required:
            cpu = np.minimum(cpu, usable * 1000)  # trim_cpu (available cpu is never negative)
        want_cpu, want_memory = ps.requests[CPU], ps.requests[MEMORY]
        use_cpu = (scalar("numaHasCpu") > 0) & bool(want_cpu)
        use_memory = (scalar("numaHasMemory") > 0) & bool(want_memory)
        in_node = np.arange(_NUMA_SLOTS) < count[:, None]
        usable_slot = in_node & ~(use_cpu[:, None] & (cpu == 0)) & ~(use_memory[:, None] & (memory == 0))
        if ps.numa_policy == n.NUMA_POLICY_SINGLE_NUMA_NODE:
            fit = (
                usable_slot & (~use_cpu[:, None] | (cpu >= want_cpu)) & (~use_memory[:, None] | (memory >= want_memory))
            )
            if usable is not None:
                fit &= usable >= ps.num_cpus
            admitted = fit.any(axis=1)
        else:
            admitted = (
                usable_slot.any(axis=1)
                & (~use_cpu | ((cpu * usable_slot).sum(axis=1) >= want_cpu))
                & (~use_memory | ((memory * usable_slot).sum(axis=1) >= want_memory))
            )
            if usable is not None:
                admitted &= (usable * usable_slot).sum(axis=1) >= ps.num_cpus
        rejected = undecided & ~admitted
        sep = "," if ps.numa_policy == n.NUMA_POLICY_SINGLE_NUMA_NODE else " & "
        for with_cpu in (True, False):
            for with_memory in (True, False):
                group = rejected & (use_cpu == with_cpu) & (use_memory == with_memory)
                if not group.any():
                    continue
                requested = [r for r, on in ((CPU, with_cpu), (MEMORY, with_memory)) if on] or [CPU]
                summary = sep.join(f"{r} prefer [] among []" for r in requested)
                status = Status.unschedulable(n.ERR_NUMA_HINT_CANNOT_ALIGNED.format(summary))
                failures.update(dict.fromkeys(positions[group].tolist(), status))
        return failures, positions[wide].tolist()

    def _filter_columns(self, ps: _PodState, nodes: NodeBatch, positions: npt.NDArray[np.int64]) -> FilterFailures:
        """Filter of a cpuset pod without a NUMA policy on nodes without node-side policies, from the
        columns: no topology -> unresolvable, SMT misalignment under a required FullPCPUs -> unresolvable,
        too few usable free cpus -> unschedulable."""
        self._flush()
        table = self.handle.snapshot.table
        rows = nodes.rows[positions]
        valid = table.column(_COLUMN_PREFIX + "valid")[rows] > 0
        key = _USABLE_KEY.get(ps.required, "free")
        usable = table.column(_COLUMN_PREFIX + key)[rows]
        failures: FilterFailures = {}
        invalid = _INVALID_TOPOLOGY
        failures.update(dict.fromkeys(positions[~valid].tolist(), invalid))
        short = valid & (usable < ps.num_cpus)
        if ps.required == n.CPU_BIND_FULL_PCPUS:
            per_core = np.maximum(table.column(_COLUMN_PREFIX + "perCore")[rows], 1)
            smt = valid & (ps.num_cpus % per_core != 0)
            failures.update(dict.fromkeys(positions[smt].tolist(), _SMT_ALIGNMENT))
            short &= ~smt
        failures.update(dict.fromkeys(positions[short].tolist(), _NOT_ENOUGH_CPUS))
        return failures

    def _victims_cpus(self, nodes: NodeBatch) -> dict[int, frozenset[int]]:
        """For a preemption dry run: per position, the cpus its victims hold there (free once they are gone)."""
        out: dict[int, frozenset[int]] = {}
        if not nodes.removed:
            return out
        for pos, victims in enumerate(nodes.removed):
            cpus: frozenset[int] = frozenset()
            for victim in victims:
                held = self.manager.get(victim.uid)
                if held is not None and held[0] == nodes.names[pos]:
                    cpus |= held[1].cpus
            if cpus:
                out[pos] = cpus
        return out

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        """Failing positions with upstream's reasons (see the module docstring). A cpuset pod without a NUMA
        policy, or with a BestEffort / Restricted / SingleNUMANode one, is judged from per-node columns on the
        nodes without node-side policies or reservations it owns (and, for a NUMA policy, at most
        ``_NUMA_SLOTS`` NUMA nodes); every other case node by node."""
        ps = self._state(state, pod)
        if ps.skip or len(nodes) == 0:
            return {}
        failures: FilterFailures = {}
        look_all = ps.request_bind or bool(ps.numa_policy)
        policy_nodes = self.tracker.policy_nodes
        owned = self._preferred(state, pod)
        freed = self._victims_cpus(nodes)
        one_by_one: list[int] = []
        vector: list[int] = []
        numa_vector: list[int] = []
        for pos, name in enumerate(nodes.names):
            if name in policy_nodes or name in owned or pos in freed:
                one_by_one.append(pos)
            elif look_all:
                if not ps.numa_policy:
                    (vector if ps.request_bind else one_by_one).append(pos)
                else:
                    (numa_vector if ps.numa_policy in _VECTOR_NUMA_POLICIES else one_by_one).append(pos)
        if vector:
            failures.update(self._filter_columns(ps, nodes, np.array(vector, dtype=np.int64)))
        if numa_vector:
            found, rest = self._filter_numa_columns(ps, nodes, np.array(numa_vector, dtype=np.int64))
            failures.update(found)
            one_by_one.extend(rest)
        for pos in one_by_one:
            name = nodes.names[pos]
            status = self._filter_one(ps, name, owned.get(name, frozenset()) | freed.get(pos, frozenset()))
            if not status.is_success():
                failures[pos] = status
        return failures

    # ------------------------------------------------------------------ score
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status:
        """Skip the pods PreFilter skipped."""
        return SKIP if self._state(state, pod).skip else SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        """0..100 per node: the node-level strategy, or over the pod's NUMA nodes under a NUMA policy."""
        ps = self._state(state, pod)
        count = len(nodes)
        if ps.skip or count == 0:
            return np.zeros(count, dtype=np.int64)
        rows = nodes.rows
        allocatable: dict[str, npt.NDArray[np.int64]] = {}
        requested: dict[str, npt.NDArray[np.int64]] = {}
        for res in self.scorer.weights:
            allocatable[res], requested[res] = self.handle.snapshot.allocatable_and_requested(res, rows)
        scores = self.scorer.score_rows(requested, allocatable, ps.requests, count)
        if not ps.numa_policy and not self.tracker.policy_nodes:
            return scores
        owned = self._preferred(state, pod)
        for pos, name in enumerate(nodes.names):
            if not ps.numa_policy and name not in self.tracker.policy_nodes:
                continue
            d = self._decide(ps, name)
            if isinstance(d, Status) or d.ro is None or not d.numa_policy:
                continue
            verdict = self._admission(d, name, owned.get(name, frozenset()))
            if not verdict.admit or verdict.hint is None:
                scores[pos] = 0
                continue
            view = self._view(name)
            assert view is not None
            available, total = self._numa(view, name)
            alloc = {r: sum(total[i].get(r, 0) for i in verdict.hint) for r in (CPU, MEMORY)}
            taken = {r: alloc[r] - sum(available[i].get(r, 0) for i in verdict.hint) for r in (CPU, MEMORY)}
            scores[pos] = self.scorer.score(taken, alloc, ps.requests)
        return scores

    # ------------------------------------------------------------------ reserve
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Choose and hold the cpuset / NUMA resources on ``node`` (see the module docstring)."""
        ps = self._state(state, pod)
        if ps.skip:
            return SUCCESS
        d = self._decide(ps, node)
        if isinstance(d, Status):
            return d
        ro = d.ro
        if ro is None:
            return SUCCESS
        preferred = self._preferred(state, pod).get(node, frozenset())
        hint: tuple[int, ...] | None = None
        if d.numa_policy:
            verdict = self._admission(d, node, preferred)
            if not verdict.admit:
                return Status.unschedulable(verdict.reason)
            hint = verdict.hint
        try:
            cpus, numa = allocate(d.opts, self.manager.node(node), ro, hint, preferred)
        except Refused as exc:
            return Status.unresolvable(exc.reason) if exc.unresolvable else Status.unschedulable(exc.reason)
        if not cpus and not numa:
            return SUCCESS
        self.manager.add(node, PodAllocation(pod.uid, pod.key, cpus, ps.exclusive, numa))
        state.write(_ALLOC, (node, cpus, numa, ro))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Release what :meth:`reserve` held in this cycle."""
        if state.get(_ALLOC) is None:
            return
        self.manager.release(pod.uid)
        state.write(_ALLOC, None)

    # ------------------------------------------------------------------ prebind
    def _annotations(self, state: CycleState, pod: PodInfo) -> dict[str, str] | None:
        entry = state.get(_ALLOC)
        if entry is None:
            return None
        _, cpus, numa, ro = entry
        status: dict[str, Any] = {}
        if cpus:
            status["cpuset"] = format_cpuset(cpus)
        if numa:
            status["numaNodeResources"] = [
                {"node": nid, "resources": {k: format_resource(k, v) for k, v in sorted(res.items())}}
                for nid, res in numa
            ]
        out = {n.ANNOTATION_RESOURCE_STATUS: dumps_annotation(status)}
        if ro.bind:
            spec = self._effective_spec(state, pod, ro)
            if spec is not None:
                out[n.ANNOTATION_RESOURCE_SPEC] = spec
        return out

    def _effective_spec(self, state: CycleState, pod: PodInfo, ro: ResourceOptions) -> str | None:
        """``appendResourceSpecIfMissed``: the resource-spec with the effective policy filled in, or None
        when the pod's own already says it."""
        try:
            current = json.loads(pod.annotations.get(n.ANNOTATION_RESOURCE_SPEC) or "{}")
        except ValueError:
            current = {}
        if not isinstance(current, dict):
            current = {}
        required = current.get("requiredCPUBindPolicy", "")
        preferred = current.get("preferredCPUBindPolicy", "")
        write = False
        if ro.required and required in ("", n.CPU_BIND_DEFAULT):
            current["requiredCPUBindPolicy"] = ro.policy
            write = True
        if preferred == n.CPU_BIND_DEFAULT:
            current["preferredCPUBindPolicy"] = ro.policy
            write = True
        if not current.get("requiredCPUBindPolicy") and not current.get("preferredCPUBindPolicy") and ro.policy:
            current["preferredCPUBindPolicy"] = ro.policy
            write = True
        if not write:
            return None
        order = ("requiredCPUBindPolicy", "preferredCPUBindPolicy", "preferredCPUExclusivePolicy")
        return dumps_annotation({k: current[k] for k in order if current.get(k)})

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Write resource-status (and the effective resource-spec) on the pod before the Binding; a
        refused write fails the binding (its Unreserve releases the cpus)."""
        values = self._annotations(state, pod)
        if values is None:
            return SUCCESS
        if all(pod.annotations.get(k) == v for k, v in values.items()):
            return SUCCESS
        self._pending[pod.uid] = (pod.namespace, pod.name, values, 0)
        try:
            await self._write(pod.namespace, pod.name, values)
        except ApiError as exc:
            self._pending.pop(pod.uid, None)
            return Status.error(f"cannot write {n.ANNOTATION_RESOURCE_STATUS}: {exc}")
        return SUCCESS

    async def pre_bind_reservation(
        self, state: CycleState, reserve_pod: PodInfo, reservation: str, node: str
    ) -> Status:
        """Write the reserve pod's resource-status onto the Reservation before it is marked Available."""
        values = self._annotations(state, reserve_pod)
        if values is None:
            return SUCCESS
        patch = {"metadata": {"annotations": {n.ANNOTATION_RESOURCE_STATUS: values[n.ANNOTATION_RESOURCE_STATUS]}}}
        try:
            await self.handle.client.patch("Reservation", reservation, patch)
        except ApiError as exc:
            return Status.error(f"cannot write {n.ANNOTATION_RESOURCE_STATUS} on reservation {reservation}: {exc}")
        return SUCCESS

    def _pod_seen(self, pod: PodInfo) -> None:
        pending = self._pending.get(pod.uid)
        if pending is None:
            return
        namespace, name, values, attempts = pending
        if all(pod.annotations.get(k) == v for k, v in values.items()):
            del self._pending[pod.uid]
        elif pod.node_name and attempts < _MAX_WRITE_ATTEMPTS:
            self._pending[pod.uid] = (namespace, name, values, attempts + 1)
            self._spawn_write(namespace, name, values)

    def _spawn_write(self, namespace: str, name: str, values: dict[str, str]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._write_logged(namespace, name, values))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_logged(self, namespace: str, name: str, values: dict[str, str]) -> None:
        with contextlib.suppress(ApiError):
            await self._write(namespace, name, values)

    async def _write(self, namespace: str, name: str, values: dict[str, str]) -> None:
        try:
            await self.handle.client.patch("Pod", name, {"metadata": {"annotations": values}}, namespace=namespace)
        except NotFound:
            return  # embedded mode: the pod enters the source at bind; retried when it shows up (_pod_seen)
        except ApiError as exc:
            log.warning("pod %s/%s: cannot write %s: %s", namespace, name, n.ANNOTATION_RESOURCE_STATUS, exc)
            raise

    # ------------------------------------------------------------------ inspection
    def node_cpus(self, node: str) -> dict[str, Any] | None:
        """For ``/apis/v1/nodes/{name}`` and ``koord explain``: per NUMA node its cpus, the free ones, the
        allocated ones and who holds them; None without a cpu topology."""
        opts = self.options(node)
        if opts is None or opts.cpu is None or not opts.cpu.is_valid():
            return None
        na = self.manager.node(node)
        free = free_cpus(opts, na)
        held = na.held()
        out = []
        for nid in sorted(opts.cpu.cpus_in_node):
            cpus = frozenset(opts.cpu.cpus_in_node[nid])
            out.append(
                {
                    "node": nid,
                    "cpus": format_cpuset(cpus),
                    "free": format_cpuset(cpus & free),
                    "freeCount": len(cpus & free),
                    "allocated": format_cpuset(cpus & held.keys()),
                    "reserved": format_cpuset(cpus & opts.reserved),
                }
            )
        holders = [
            {"pod": a.key, "uid": a.uid, "cpuset": format_cpuset(a.cpus)}
            for a in sorted(na.pods.values(), key=lambda a: a.key)
            if a.cpus
        ]
        return {
            "cpuBindPolicy": opts.bind_policy,
            "numaTopologyPolicy": opts.numa_policy or "None",
            "numaNodes": out,
            "holders": holders,
        }

    def explain_node(self, node: str) -> dict[str, Any] | None:
        """``koord explain``: per NUMA node the free and allocated cpus (:meth:`node_cpus`)."""
        return self.node_cpus(node)

    def pod_cpus(self, uid: str) -> dict[str, Any] | None:
        """The cpuset this service holds for pod ``uid`` (before or without its annotation), or None."""
        found = self.manager.get(uid)
        if found is None:
            return None
        node, alloc = found
        return {"node": node, "cpuset": format_cpuset(alloc.cpus)}


def new_node_numa_resource(args: dict[str, Any], handle: Handle) -> NodeNUMAResource:
    """Factory: decode, default and validate the args, then build the plugin.

    Raises:
        ArgsError: invalid args (see :func:`~app.plugins.nodenumaresource.args.decode_args`).
    """
    return NodeNUMAResource(decode_args(args), handle)
