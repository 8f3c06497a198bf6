"""The DeviceShare plugin: GPU sharing (upstream ``pkg/scheduler/plugins/deviceshare``).

- PreFilter: the pod's GPU request (:mod:`.request`); invalid requests fail every node
  UnschedulableAndUnresolvable with upstream's message; pods without a GPU request answer Skip
  (the plugin's Filter does not run for them).
- Filter: nodes without a Device pass (left to kubelet, as upstream); a Device without GPUs fails
  UnschedulableAndUnresolvable, too few GPUs whose free covers the per-GPU request fail
  Unschedulable, both with ``Insufficient gpu devices``. Unhealthy GPUs are never counted.
- PreScore: Skip for pods without a valid GPU request, unless FragmentationAware scores them.
- Score: LeastAllocated / MostAllocated (``scoreNode``, then ``DefaultNormalizeScore``), or our
  FragmentationAware (:mod:`.fragmentation`): the growth of the node's expected fragmentation if the
  pod goes to its best GPU(s) there, mapped to 0..100 by rank (default) or by the paper's sigmoid.
  FragmentationAware also scores pods without a GPU request (as the reference FGD does): the cpu and
  memory they take decide which workload shapes still fit beside a node's idle GPUs.
  Per-row GPU terms, the before-placement fragmentation and the node's GPU model index are
  memoised and recomputed only for rows whose ``GPUTable.version`` changed (Reserve, pod and Device
  events) or after the learned workload is rebuilt; so is each node's growth per pod shape
  (:mod:`.deltamemo`, also keyed by the node's free cpu and memory).
- Reserve: choose minors (upstream order: per-GPU score desc, then minor; FragmentationAware puts a
  share on the GPU with the least fragmentation growth) and account them at once; Unreserve undoes.
- PreBind: write ``scheduling.koordinator.sh/device-allocated`` with ``handle.client.patch`` and
  await it (a refused write fails the binding, which releases the GPUs); if the pod is not in the
  source yet (404), the write is retried when the bound pod
  shows up in the cache.
- Reservations (:mod:`.reserved`): a reserve pod's GPUs (chosen at its Reserve when the Reservation plugin
  places it) are written onto the Reservation as ``device-allocated`` (``pre_bind_reservation``) and stay
  accounted while it is active. An owner pod of a reservation (``ReservationNominator``) sees the
  reservation's remaining GPUs as free on its node, is given GPUs from it first, and the reservation's
  share shrinks by what the owner took. An owner of a ``Restricted`` reservation holding GPUs on a node
  gets GPUs there only from it (``Reservation(s) Insufficient gpu devices`` when they cannot serve it).
- RDMA / FPGA / joint allocation / GPU hints (:mod:`.allocator`): a pod asking ``koordinator.sh/rdma`` or
  ``koordinator.sh/fpga``, or whose ``device-allocate-hint`` narrows its GPUs (``selector``,
  ``requiredTopologyScope``, ``exclusivePolicy: PCIeLevel``), is also allocated per node in Python, after
  the vectorised GPU test, on the nodes with a Device; its GPUs are still chosen as above. Malformed
  hint or joint-allocate annotations fail every node UnschedulableAndUnresolvable with upstream's
  ``invalid DeviceAllocateHint annotation, err: ...``. Node scores add the scoring strategy over each
  requested RDMA/FPGA type's node totals (not under FragmentationAware). The annotation carries every type.
- REST: ``nodeDeviceSummaries`` and ``nodeDeviceSummaries/{nodeName}`` (upstream ``service.go``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from prometheus_client.core import GaugeMetricFamily

from app.api.reservation import RESERVATION_REASON_PREFIX
from app.cache.podinfo import PodInfo
from app.client.errors import ApiError, NotFound
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import (
    MAX_NODE_SCORE,
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
from app.framework.status import SKIP, SUCCESS, Status
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.allocation import GPUAllocation, format_allocations, format_device_allocations
from app.plugins.deviceshare.allocator import (
    Refused,
    Scorer,
    TypeState,
    allocate_node,
    candidate_minors,
    check_vfs,
    gpu_by_topology,
    instance_request,
)
from app.plugins.deviceshare.args import FRAGMENTATION_AWARE, MOST_ALLOCATED, DeviceShareArgs, decode_args
from app.plugins.deviceshare.deltamemo import DeltaMemo
from app.plugins.deviceshare.devicecache import DeviceCache
from app.plugins.deviceshare.fragmentation import (
    PodShape,
    RowMemo,
    Workload,
    best_placement,
    no_gpu_growth,
    sigmoid_score,
    slot_growth,
)
from app.plugins.deviceshare.gputable import GPUTable
from app.plugins.deviceshare.hints import (
    EXCLUSIVE_PCIE_LEVEL,
    DeviceHint,
    HintError,
    JointAllocate,
    parse_hints,
    parse_joint_allocate,
)
from app.plugins.deviceshare.nodedevice import NodeDevice
from app.plugins.deviceshare.request import DeviceRequestError, GPURequest, gpu_request, secondary_requests
from app.plugins.deviceshare.reserved import ReservedGPUs, restricted_minors
from app.plugins.deviceshare.scoring import (
    device_scores,
    device_scores_rows,
    node_scores,
    normalize,
    score_resources,
)
from app.plugins.deviceshare.summary import node_summary
from app.plugins.deviceshare.workload import WorkloadLearner, pod_shape

log = logging.getLogger(__name__)

NAME = "DeviceShare"
#: Upstream's reason when too few GPUs fit (``Insufficient %s devices`` with the type ``gpu``).
ERR_INSUFFICIENT_GPU = f"Insufficient {n.GPU} devices"
_STATE = NAME
_ALLOC = NAME + "/allocation"
_OWNED = NAME + "/reservedGPUs"
_UNRESOLVABLE_GPU = Status.unresolvable(ERR_INSUFFICIENT_GPU)
_INSUFFICIENT_GPU = Status.unschedulable(ERR_INSUFFICIENT_GPU)
#: An owner of a Restricted Reservation whose GPUs there cannot serve it (``NewReservationReason``).
ERR_RESERVATION_INSUFFICIENT_GPU = RESERVATION_REASON_PREFIX + ERR_INSUFFICIENT_GPU
_RESERVATION_INSUFFICIENT_GPU = Status.unschedulable(ERR_RESERVATION_INSUFFICIENT_GPU)
#: Score step between consecutive ranks of FragmentationAware's Rank mapping (extender buckets are 10 wide).
RANK_STEP = 10
#: Node states whose GPU choice :meth:`DeviceShare._choose` keeps; past it the memo starts over.
_MAX_CHOICES = 100_000
#: Times a deferred annotation write is retried.
_MAX_WRITE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class _Extra:
    """What sends a pod through the per-node allocator: its RDMA/FPGA requests (type -> value), hints
    and joint-allocate request."""

    secondary: dict[str, int]
    hints: dict[str, DeviceHint]
    joint: JointAllocate | None
    #: the GPUs chosen matter beyond their count (a narrowing GPU hint, or GPUs in a joint allocation):
    #: Filter must choose them; otherwise the vectorised count test stands for them.
    gpu_choice_matters: bool = False


@dataclass(slots=True)
class _PodState:
    """PreFilter result: the GPU request (None = no GPU) and the per-node allocator's part (None = the
    vectorised GPU path alone). Not frozen: it is built once per pod per cycle, on every pod's PreFilter,
    and a frozen dataclass's ``__init__`` costs twice as much; nothing writes it after."""

    request: GPURequest | None
    extra: _Extra | None = None


_NO_SECONDARY: dict[str, int] = {}
#: The PreFilter result of a pod asking no device (shared: nothing writes it).
_NO_DEVICE = _PodState(None)


def fitting_gpus(fits: npt.NDArray[np.bool_]) -> npt.NDArray[np.integer[Any]]:
    """Per row of the (N, G) mask ``fits``, how many of its G GPUs are True (shape (N,)).

    A product with a vector of ones over the mask's bytes (uint8: exact while G < 256), half the time of
    ``fits.sum(axis=1)`` at ~1,000 rows by 8 GPUs (the sim's Filter and FGD score each count per call);
    ``sum`` beyond.
    """
    gpus = fits.shape[1]
    if gpus >= 256:
        return fits.sum(axis=1)
    counted: npt.NDArray[np.integer[Any]] = fits.view(np.uint8) @ np.ones(gpus, dtype=np.uint8)
    return counted


def _parse_pod(pod: PodInfo) -> _PodState:
    """The pod's device requests and hints.

    Raises:
        DeviceRequestError: an invalid GPU, RDMA or FPGA request.
        HintError: a malformed ``device-allocate-hint`` or ``device-joint-allocate``.
    """
    requests = pod.requests
    req = gpu_request(requests)
    secondary = (
        secondary_requests(requests) if n.RESOURCE_RDMA in requests or n.RESOURCE_FPGA in requests else _NO_SECONDARY
    )
    if req is None and not secondary:
        return _NO_DEVICE
    if not secondary and n.ANNOTATION_DEVICE_ALLOCATE_HINT not in pod.annotations:
        # a plain GPU pod: only a GPU hint sends it through the per-node allocator; a joint-allocate
        # annotation alone is still validated, as upstream parses it for every device pod
        if n.ANNOTATION_DEVICE_JOINT_ALLOCATE in pod.annotations:
            parse_joint_allocate(pod.annotations)
        return _PodState(req)
    hints = parse_hints(pod.annotations)
    joint = parse_joint_allocate(pod.annotations)
    gpu_hint = hints.get(n.GPU)
    narrows_gpu = gpu_hint is not None and bool(
        gpu_hint.selector is not None
        or gpu_hint.required_topology_scope
        or gpu_hint.exclusive_policy == EXCLUSIVE_PCIE_LEVEL
    )
    if not secondary and not narrows_gpu:
        return _PodState(req)
    matters = narrows_gpu or (joint is not None and n.GPU in joint.device_types)
    return _PodState(req, _Extra(secondary, hints, joint, req is not None and matters))


class DeviceShare(
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    NormalizeScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    ServiceProvider,
    ReservationPreBindPlugin,
):
    """See the module docstring."""

    #: Upstream's plugin name (the Go package's ``Name``): the registry key and what ``name`` answers.
    NAME: ClassVar[str] = NAME
    name = NAME

    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.learner = WorkloadLearner(args.learned_pods)
        self._pending: dict[str, tuple[str, str, str, int]] = {}  # uid -> (namespace, name, value, attempts)
        self._tasks: set[asyncio.Task[None]] = set()
        self.devices = DeviceCache(handle, on_pod_seen=self._pod_seen)
        self._nominators: list[ReservationNominator] | None = None
        # FragmentationAware memos, keyed by GPUTable.version stamps: per-row GPU terms of the current
        # workload, and per-row GPU model index (models change only with a row rewrite)
        self._memo = RowMemo()
        self._deltas = DeltaMemo()  # per pod shape, each row's growth (rows whose inputs held reuse it)
        self._model_index: dict[str, int] = {}
        self._model_names: list[str] = []
        self._row_model = np.zeros(0, dtype=np.int64)
        self._row_model_stamp = np.zeros(0, dtype=np.int64)
        # Reserve's GPU choice per node state (:meth:`_choice_key`), for this table and workload object
        self._choices: dict[Hashable, tuple[int, ...] | None] = {}
        self._choices_owner: tuple[object, object] = (None, None)

    # ------------------------------------------------------------------ events
    def _pod_seen(self, pod: PodInfo) -> None:
        if self.args.strategy == FRAGMENTATION_AWARE and self.args.workload is None and pod.uid not in ("",):
            shape = pod_shape(pod, self.handle.snapshot.pod_object(pod.uid))
            if shape is not None:
                self.learner.observe(pod.uid, shape)
        pending = self._pending.get(pod.uid)
        if pending is None:
            return
        namespace, name, value, attempts = pending
        if pod.annotations.get(n.ANNOTATION_DEVICE_ALLOCATED) == value:
            del self._pending[pod.uid]
        elif pod.node_name and attempts < _MAX_WRITE_ATTEMPTS:
            self._pending[pod.uid] = (namespace, name, value, attempts + 1)
            self._spawn_write(pod.uid, namespace, name, value)

    def workload(self) -> Workload | None:
        """The FragmentationAware target workload: the args' one, else the learned one."""
        return self.args.workload if self.args.workload is not None else self.learner.workload()

    # ------------------------------------------------------------------ prefilter / filter
    def _pod_state(self, state: CycleState, pod: PodInfo) -> _PodState:
        cached: _PodState | None = state.get(_STATE)
        if cached is None:
            try:
                cached = _parse_pod(pod)
            except (DeviceRequestError, HintError):
                cached = _PodState(None)
            state.write(_STATE, cached)
        return cached

    def _request(self, state: CycleState, pod: PodInfo) -> GPURequest | None:
        return self._pod_state(state, pod).request

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Parse the device requests and hints; invalid => UnschedulableAndUnresolvable with upstream's
        message; no GPU, RDMA or FPGA request => Skip."""
        try:
            parsed = _parse_pod(pod)
        except (DeviceRequestError, HintError) as exc:
            state.write(_STATE, _PodState(None))
            return Status.unresolvable(str(exc))
        state.write(_STATE, parsed)
        return SUCCESS if parsed.request is not None or parsed.extra is not None else SKIP

    def _fits(self, req: GPURequest, rows: npt.NDArray[np.int64], removed: list[list[PodInfo]] | None) -> Any:
        """(len(rows), G) GPUs whose free covers the per-GPU request (victims' GPUs given back)."""
        table = self.devices.flush()
        if removed is None or not any(removed):
            fits = table.live.take(rows, axis=0)  # healthy & some free resource, precomputed per row
            if req.core:
                fits &= table.core_free.take(rows, axis=0) >= req.core
            if req.ratio:
                fits &= table.ratio_free.take(rows, axis=0) >= req.ratio
            if req.memory:
                fits &= table.mem_free.take(rows, axis=0) >= req.memory
            return fits
        core, ratio, mem = (
            table.core_free.take(rows, axis=0),
            table.ratio_free.take(rows, axis=0),
            table.mem_free.take(rows, axis=0),
        )
        if any(removed):
            core, ratio, mem = core.copy(), ratio.copy(), mem.copy()
            for i, victims in enumerate(removed):
                for victim in victims:
                    held = self.devices.allocations_of(victim.uid)
                    if held is None:
                        continue
                    for a in held[1]:
                        slots = np.flatnonzero(table.minor[rows[i]] == a.minor)
                        if len(slots):
                            s = int(slots[0])
                            core[i, s] += a.resources.get(n.RESOURCE_GPU_CORE, 0)
                            ratio[i, s] += a.resources.get(n.RESOURCE_GPU_MEMORY_RATIO, 0)
                            mem[i, s] += a.resources.get(n.RESOURCE_GPU_MEMORY, 0)
            core = np.minimum(core, table.core_total.take(rows, axis=0))
            ratio = np.minimum(ratio, table.ratio_total.take(rows, axis=0))
            mem = np.minimum(mem, table.mem_total.take(rows, axis=0))
        healthy = (
            (table.core_total.take(rows, axis=0) > 0)
            | (table.ratio_total.take(rows, axis=0) > 0)
            | (table.mem_total.take(rows, axis=0) > 0)
        )
        fits = healthy & ((core > 0) | (ratio > 0) | (mem > 0))
        if req.core:
            fits &= core >= req.core
        if req.ratio:
            fits &= ratio >= req.ratio
        if req.memory:
            fits &= mem >= req.memory
        return fits

    def _owned(self, state: CycleState, pod: PodInfo) -> dict[str, list[tuple[str, ReservedGPUs]]]:
        """Node -> the (name, GPUs) of the reservations holding GPUs that ``pod`` may use there."""
        found = state.get(_OWNED)
        if found is not None:
            return found
        found = {}
        if self.devices.reservations:
            if self._nominators is None:
                fw = self.handle.framework
                self._nominators = [p for p in fw.plugins if isinstance(p, ReservationNominator)] if fw else []
            for nominator in self._nominators:
                for name, _ in nominator.reservations_for(pod):
                    r = self.devices.reservations.get(name)
                    if r is not None and r.remainder():
                        found.setdefault(r.node, []).append((name, r))
        state.write(_OWNED, found)
        return found

    def _removed_with_reservations(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch
    ) -> list[list[PodInfo]] | None:
        """``nodes.removed`` plus, on nodes holding reservations ``pod`` owns, the reservations' reserve pods
        (their GPUs count as free for the owner, as a victim's would)."""
        owned = self._owned(state, pod)
        if not owned:
            return nodes.removed
        removed = [list(v) for v in nodes.removed] if nodes.removed is not None else [[] for _ in range(len(nodes))]
        positions = {name: pos for pos, name in enumerate(nodes.names) if name in owned}
        for name, pos in positions.items():
            removed[pos].extend(replace(pod, uid=r.uid) for _, r in owned[name])
        return removed

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        """Failing positions: ``Insufficient gpu devices`` (see the module docstring), then for pods with
        RDMA/FPGA requests or GPU hints the per-node allocator's reasons."""
        ps = self._pod_state(state, pod)
        req = ps.request
        if (req is None and ps.extra is None) or len(nodes) == 0:
            return {}
        failures: FilterFailures = {}
        if req is not None:
            failures = self._filter_gpus(state, pod, req, nodes)
        if ps.extra is not None:
            self._filter_extra(state, pod, ps, nodes, failures)
        return failures

    def _filter_extra(
        self, state: CycleState, pod: PodInfo, ps: _PodState, nodes: NodeBatch, failures: FilterFailures
    ) -> None:
        """Run the per-node allocator on the nodes with a Device that passed so far (dry run)."""
        table = self.devices.flush()
        removed = self._removed_with_reservations(state, pod, nodes) if ps.request is not None else nodes.removed
        batched = self._batched_gpu_slots(state, pod, ps, nodes, removed)
        for pos in np.flatnonzero(table.has_device[nodes.rows]).tolist():
            victims = [v.uid for v in removed[pos]] if removed is not None else []
            if failures.get(pos) is _INSUFFICIENT_GPU:
                # upstream's Prepare judges every type before any GPU is chosen: a node lacking the RDMA
                # type (or its VFs) is unresolvable, not merely short of GPUs
                try:
                    self._prepare(self.devices.nodes[nodes.names[pos]], ps, victims)
                except Refused as refused:
                    failures[pos] = refused.status
                continue
            if pos in failures:
                continue
            slots = batched.get(pos) if batched is not None else None
            try:
                self._allocate(
                    state, pod, ps, nodes.names[pos], int(nodes.rows[pos]), victims, dry_run=True, gpu_slots=slots
                )
            except Refused as refused:
                failures[pos] = refused.status

    def _batched_gpu_slots(
        self,
        state: CycleState,
        pod: PodInfo,
        ps: _PodState,
        nodes: NodeBatch,
        removed: list[list[PodInfo]] | None,
    ) -> dict[int, list[int] | None] | None:
        """For a Filter that must know which GPUs a joint allocation starts from: what :meth:`_choose` would
        pick on each node, computed for the whole batch at once (fits and per-GPU scores as arrays).
        None when a node-by-node choice is needed: a narrowing GPU hint, or FragmentationAware placing a
        share. Nodes holding reservations the pod owns are left out (chosen node by node)."""
        req, extra = ps.request, ps.extra
        if req is None or extra is None or not extra.gpu_choice_matters:
            return None
        hint = extra.hints.get(n.GPU)
        if hint is not None and (
            hint.selector is not None or hint.required_topology_scope or hint.exclusive_policy == EXCLUSIVE_PCIE_LEVEL
        ):
            return None
        if self.args.strategy == FRAGMENTATION_AWARE and req.count == 1 and 0 < req.milli() < 1000:
            return None
        rows = nodes.rows
        fits = self._fits(req, rows, removed)
        table = self.devices.table
        strategy = MOST_ALLOCATED if self.args.strategy == FRAGMENTATION_AWARE else self.args.strategy
        scores = device_scores_rows(strategy, self.args.weights, req.per_gpu, table, rows)
        minors = table.minor.take(rows, axis=0)
        owned = self._owned(state, pod)
        out: dict[int, list[int] | None] = {}
        for pos, name in enumerate(nodes.names):
            if name in owned:
                continue
            ok = np.flatnonzero(fits[pos])
            if len(ok) < req.count:
                out[pos] = None
                continue
            order = np.lexsort((minors[pos][ok], -scores[pos][ok]))
            out[pos] = ok[order[: req.count]].tolist()
        return out

    def _filter_gpus(self, state: CycleState, pod: PodInfo, req: GPURequest, nodes: NodeBatch) -> FilterFailures:
        rows = nodes.rows
        fits = self._fits(req, rows, self._removed_with_reservations(state, pod, nodes))
        table = self.devices.table
        has = table.has_device[rows]
        count = fitting_gpus(fits)
        failures: FilterFailures = {}
        no_gpu = has & (table.gpu_count[rows] == 0)
        short = has & ~no_gpu & (count < req.count)
        # Status is immutable: failing nodes share one per reason (no per-node allocation)
        failures.update(dict.fromkeys(np.flatnonzero(no_gpu).tolist(), _UNRESOLVABLE_GPU))
        failures.update(dict.fromkeys(np.flatnonzero(short).tolist(), _INSUFFICIENT_GPU))
        owned = self._owned(state, pod)
        if owned:
            for pos, name in enumerate(nodes.names):
                if name not in owned or pos in failures:
                    continue
                allowed = restricted_minors([r for _, r in owned[name]], req.per_gpu)
                if allowed is None:
                    continue
                minors = table.minor[rows[pos]]
                usable = sum(1 for s in np.flatnonzero(fits[pos]).tolist() if int(minors[s]) in allowed)
                if usable < req.count:
                    failures[pos] = _RESERVATION_INSUFFICIENT_GPU
        if req.shared and self.args.unsupported_models:
            for pos, name in enumerate(nodes.names):
                node = self.handle.snapshot.node(name)
                if node is None or pos in failures:
                    continue
                vendor, model = node.labels.get(n.LABEL_GPU_VENDOR, ""), node.labels.get(n.LABEL_GPU_MODEL, "")
                if (vendor, model) in self.args.unsupported_models:
                    reason = f'model "{model}" of vendor "{vendor}" does not support GPU Share'
                    failures[pos] = Status.unresolvable(reason)
        return failures

    def explain_unjudged(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> dict[int, str]:
        """For ``koord explain``: the nodes a GPU pod passes here only because they report no Device (no
        koordlet, or no GPU): their GPUs, if any, are NodeResourcesFit's to count, not this plugin's."""
        if self._request(state, pod) is None or len(nodes) == 0:
            return {}
        unknown = ~self.devices.table.has_device[nodes.rows]
        return dict.fromkeys(np.flatnonzero(unknown).tolist(), "node reports no Device: GPUs not managed here")

    # ------------------------------------------------------------------ score
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status:
        """Skip pods without a valid GPU request, except that FragmentationAware scores pods asking
        no GPU by the fragmentation their cpu/memory causes (FGD scores every pod)."""
        ps = self._pod_state(state, pod)
        if ps.request is not None:
            return SUCCESS
        if self.args.strategy == FRAGMENTATION_AWARE and _asks_no_gpu(pod):
            return SUCCESS
        if ps.extra is not None and ps.extra.secondary and self.args.strategy != FRAGMENTATION_AWARE:
            return SUCCESS
        return SKIP

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        """0..100 per node (see :meth:`pre_score` for the pods scored)."""
        ps = self._pod_state(state, pod)
        req = ps.request
        if ps.extra is not None and ps.extra.secondary and self.args.strategy != FRAGMENTATION_AWARE:
            extra = self._secondary_scores(ps.extra, nodes)
            if req is None:
                return extra
            table = self.devices.flush()
            gpu = node_scores(self.args.strategy, self.args.weights, req.per_gpu, table, nodes.rows)
            return gpu + extra
        if req is None:
            # FGD: the cpu/memory a pod without GPUs takes decides which workload shapes still fit
            # beside the node's idle GPUs
            if len(nodes) == 0:
                return np.zeros(0, dtype=np.int64)
            return self._map_delta(self._no_gpu_delta(pod, nodes))
        if len(nodes) == 0:
            return np.zeros(0, dtype=np.int64)
        table = self.devices.flush()
        if self.args.strategy != FRAGMENTATION_AWARE:
            return node_scores(self.args.strategy, self.args.weights, req.per_gpu, table, nodes.rows)
        delta = self._fragmentation_delta(pod, req, nodes)
        return self._map_delta(delta)

    def _secondary_scores(self, extra: _Extra, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        """(N,) sum over the requested RDMA/FPGA types of ``scoreNode`` over the node's devices of that type
        (those the hint's selector keeps); 0 for nodes without such devices (``AutopilotAllocator.score``)."""
        out = np.zeros(len(nodes), dtype=np.int64)
        for pos, name in enumerate(nodes.names):
            nd = self.devices.nodes.get(name)
            if nd is None or not nd.has_device:
                continue
            for kind, value in extra.secondary.items():
                if not nd.infos.get(kind):
                    continue
                hint = extra.hints.get(kind)
                type_state = nd.type_state(kind)
                try:
                    request, _ = instance_request(kind, value, hint, type_state)
                except Refused:
                    continue
                minors = candidate_minors(type_state, hint)
                total: dict[str, int] = {}
                free: dict[str, int] = {}
                for m in minors:
                    for k, v in type_state.total(m).items():
                        total[k] = total.get(k, 0) + v
                    for k, v in type_state.free.get(m, {}).items():
                        free[k] = free.get(k, 0) + v
                out[pos] += score_resources(self.args.strategy, self.args.weights, request, total, free)
        return out

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """``DefaultNormalizeScore`` for LeastAllocated/MostAllocated; FragmentationAware is already 0..100."""
        if self.args.strategy == FRAGMENTATION_AWARE:
            return scores
        return normalize(scores)

    def _fragmentation_delta(self, pod: PodInfo, req: GPURequest, nodes: NodeBatch) -> npt.NDArray[np.float64]:
        """(N,) fragmentation growth (GPU milli) of the best placement per node; +inf where none.

        The GPU terms of each node (:class:`RowMemo`) and its model index are memoised per table row
        and recomputed only for rows whose ``GPUTable.version`` changed (or after a workload rebuild);
        without victims (``nodes.removed``) the growth itself is memoised per pod shape and row
        (:class:`DeltaMemo`: reused while the row's stamp and free cpu/memory hold).
        """
        rows = nodes.rows
        if self.learner is not None and self.args.workload is None and pod.uid and not self.learner.seen(pod.uid):
            shape = pod_shape(pod, self.handle.snapshot.pod_object(pod.uid))
            if shape is not None:
                self.learner.observe(pod.uid, shape)
        workload = self.workload() or _NO_WORKLOAD
        table = self.devices.flush()
        free_cpu, free_mem = self._free_cpu_memory(rows)
        cpu, mem = pod.requests.get("cpu", 0), pod.requests.get("memory", 0)
        names = nodes.names

        def compute(pos: npt.NDArray[np.int64], removed: list[list[PodInfo]] | None = None) -> npt.NDArray[np.float64]:
            return self._placement_delta(
                workload,
                PodShape(cpu, mem, req.milli()),
                req,
                rows[pos],
                [names[i] for i in pos.tolist()],
                free_cpu[pos],
                free_mem[pos],
                removed,
            )

        if nodes.removed is not None and any(nodes.removed):
            return compute(np.arange(len(rows), dtype=np.int64), nodes.removed)
        key = ("gpu", cpu, mem, req.count, req.core, req.ratio, req.memory)
        space = ("gpu", req.count, req.core, req.ratio, req.memory)
        return self._memo_deltas(workload, table, nodes, free_cpu, free_mem, cpu, mem, key, space, compute)

    def _placement_delta(
        self,
        workload: Workload,
        shape: PodShape,
        req: GPURequest,
        rows: npt.NDArray[np.int64],
        names: list[str],
        free_cpu: npt.NDArray[np.int64],
        free_mem: npt.NDArray[np.int64],
        removed: list[list[PodInfo]] | None,
    ) -> npt.NDArray[np.float64]:
        """:meth:`_fragmentation_delta` of the nodes at table ``rows`` (their ``names``, free cpu and
        memory), computed."""
        fits = self._fits(req, rows, removed)
        table = self.devices.table
        free = table.milli.take(rows, axis=0)
        access = self._access(workload, table, rows, names)
        terms = self._memo.get(workload, rows, table.version[rows], free) if len(workload.group_per) else None
        placement = best_placement(workload, shape, free_cpu, free_mem, free, (), fits, access=access, gpu_terms=terms)
        if req.milli() >= 1000 or req.count > 1 or req.milli() == 0:
            # whole GPUs (or shares over several GPUs, or bytes only): feasibility is the filter's count test
            ok = fitting_gpus(fits) >= req.count
            return np.where(ok & np.isfinite(placement.delta), placement.delta, np.where(ok, 0.0, np.inf))
        return placement.delta

    def _no_gpu_delta(self, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.float64]:
        """(N,) fragmentation growth (GPU milli, >= 0) of placing a pod without GPU request per node
        (memoised per pod shape and row as :meth:`_fragmentation_delta`)."""
        rows = nodes.rows
        workload = self.workload()
        if workload is None or not len(workload.group_per):
            return np.zeros(len(rows), dtype=np.float64)
        table = self.devices.flush()
        free_cpu, free_mem = self._free_cpu_memory(rows)
        shape = PodShape(pod.requests.get("cpu", 0), pod.requests.get("memory", 0), 0)
        names = nodes.names

        def compute(pos: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
            at = rows[pos]
            free = table.milli.take(at, axis=0)
            access = self._access(workload, table, at, [names[i] for i in pos.tolist()])
            terms = self._memo.get(workload, at, table.version[at], free)
            return no_gpu_growth(workload, shape, free_cpu[pos], free_mem[pos], free, (), access, terms)

        key = ("none", shape.cpu_milli, shape.memory_bytes)
        cpu, mem = shape.cpu_milli, shape.memory_bytes
        return self._memo_deltas(workload, table, nodes, free_cpu, free_mem, cpu, mem, key, ("none",), compute)

    def _memo_deltas(
        self,
        workload: Workload,
        table: GPUTable,
        nodes: NodeBatch,
        free_cpu: npt.NDArray[np.int64],
        free_mem: npt.NDArray[np.int64],
        cpu: int,
        mem: int,
        key: Hashable,
        space: Hashable,
        compute: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]],
    ) -> npt.NDArray[np.float64]:
        """(N,) fragmentation growth of a pod asking ``cpu`` milli-cores and ``mem`` bytes over ``nodes`` (free
        cpu milli-cores and memory bytes parallel), from :attr:`_deltas` under the pod's memo ``key``, rows that
        miss it sharing the value of an equal node state under ``space`` (:meth:`_node_states`), the rest by
        ``compute`` (positions into ``nodes`` -> values)."""
        rows = nodes.rows
        states = self._node_states(workload, table, nodes, free_cpu, free_mem, cpu, mem)
        return self._deltas.values(
            table,
            workload,
            key,
            rows,
            table.version.take(rows),
            free_cpu,
            free_mem,
            compute,
            table.capacity,
            states,
            space,
        )

    def _node_states(
        self,
        workload: Workload,
        table: GPUTable,
        nodes: NodeBatch,
        free_cpu: npt.NDArray[np.int64],
        free_mem: npt.NDArray[np.int64],
        cpu: int,
        mem: int,
    ) -> Callable[[npt.NDArray[np.int64]], Sequence[Hashable]]:
        """The :class:`DeltaMemo` ``states`` callback of a pod (of one reduced shape: the memo key
        without the pod's cpu and memory, which the caller passes as ``space``) asking ``cpu``
        milli-cores and ``mem`` bytes, over ``nodes`` whose free cpu (milli-cores) and memory (bytes)
        are ``free_cpu`` and ``free_mem`` (N,).

        A node's growth reads, besides the pod's GPU request and the workload: its GPU row's free
        milli, free core / ratio / memory and ``live`` flags (the fit test), its GPU model (access),
        and its free cpu and memory only through the workload's (cpu, memory) class before and after
        the pod (:meth:`Workload.class_codes`); the key (the row's bytes) holds exactly these, the
        model as the plugin's model index (append-only), so nodes of one state share one value.
        Valid only without victims (the callers' memoised path)."""
        rows, names = nodes.rows, nodes.names

        def states(pos: npt.NDArray[np.int64]) -> list[bytes]:
            at = rows[pos]
            node_cpu, node_mem = free_cpu[pos], free_mem[pos]
            before = workload.class_codes(node_cpu, node_mem)
            after = workload.class_codes(node_cpu - cpu, node_mem - mem)
            self._model_names_now(table, at, [names[i] for i in pos.tolist()])
            blob = np.concatenate(
                [
                    table.milli.take(at, axis=0),
                    table.core_free.take(at, axis=0),
                    table.ratio_free.take(at, axis=0),
                    table.mem_free.take(at, axis=0),
                    table.live.take(at, axis=0),
                    self._row_model.take(at)[:, None],
                    before[:, None],
                    after[:, None],
                ],
                axis=1,
            )
            # one bytes object per row (a void view's tolist: no Python loop over rows)
            keys: list[bytes] = blob.view(np.dtype((np.void, blob.shape[1] * 8))).ravel().tolist()  # type: ignore[assignment]
            return keys

        return states

    def _free_cpu_memory(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(N,) free cpu (milli-cores) and (N,) free memory (bytes) of the nodes at table ``rows``:
        allocatable minus requested (assumed pods included), negative where overcommitted."""
        snapshot = self.handle.snapshot
        alloc_cpu, req_cpu = snapshot.allocatable_and_requested("cpu", rows)
        alloc_mem, req_mem = snapshot.allocatable_and_requested("memory", rows)
        return alloc_cpu - req_cpu, alloc_mem - req_mem

    def _access(
        self, workload: Workload, table: GPUTable, rows: npt.NDArray[np.int64], names: list[str]
    ) -> npt.NDArray[np.bool_] | None:
        """(N, J) the workload's model access row of each node at table ``rows`` (their ``names``), or None
        when no workload shape is constrained to a GPU model."""
        if not workload.constrained:
            return None
        return workload.access_table(self._model_names_now(table, rows, names)).take(self._row_model[rows], axis=0)

    def _model_names_now(self, table: GPUTable, rows: npt.NDArray[np.int64], names: list[str]) -> list[str]:
        """Refresh the per-row model index of ``rows`` whose table stamp changed; return the index's names
        (``self._row_model[row]`` indexes them)."""
        if len(self._row_model) < table.capacity:
            grow = table.capacity - len(self._row_model)
            self._row_model = np.concatenate([self._row_model, np.zeros(grow, dtype=np.int64)])
            self._row_model_stamp = np.concatenate([self._row_model_stamp, np.full(grow, -1, dtype=np.int64)])
        stamps = table.version[rows]
        stale = np.flatnonzero(self._row_model_stamp[rows] != stamps)
        for pos in stale.tolist():
            model = self.devices.models.get(names[pos], "")
            index = self._model_index.get(model)
            if index is None:
                index = self._model_index[model] = len(self._model_names)
                self._model_names.append(model)
            self._row_model[rows[pos]] = index
        self._row_model_stamp[rows[stale]] = stamps[stale]
        return self._model_names

    def _map_delta(self, delta: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        finite = np.isfinite(delta)
        out = np.zeros(len(delta), dtype=np.int64)
        if not finite.any():
            return out
        if self.args.score_mapping in ("Sigmoid", "SigmoidRank"):
            integer = sigmoid_score(delta[finite])  # the FGD reference's integer score
            if self.args.score_mapping == "Sigmoid":
                out[finite] = integer
                return out
            # rank the reference's integer levels (0..100; its ties stay ties): a node's rank is the
            # number of distinct levels above its own (what np.unique + searchsorted give, without a sort)
            present = np.bincount(integer, minlength=MAX_NODE_SCORE + 1) > 0
            above = np.cumsum(present[::-1])[::-1] - 1
            out[finite] = np.maximum(0, MAX_NODE_SCORE - RANK_STEP * above[integer])
            return out
        rounded = np.round(delta[finite], 3)
        # rank = index among the distinct levels; ranks past MAX_NODE_SCORE // RANK_STEP all score 0
        levels = np.unique(rounded)[: MAX_NODE_SCORE // RANK_STEP + 1]
        rank = np.searchsorted(levels, rounded).astype(np.int64)
        out[finite] = np.maximum(0, MAX_NODE_SCORE - RANK_STEP * rank)
        return out

    # ------------------------------------------------------------------ reserve
    def _choose(
        self,
        pod: PodInfo,
        req: GPURequest,
        node: str,
        row: int,
        reserved: list[ReservedGPUs] | None = None,
        allowed: set[int] | None = None,
        victims: list[str] | None = None,
    ) -> list[int] | None:
        """Slots (indices into the row) to allocate, or None when the pod does not fit. With ``reserved``
        (reservations the pod owns on the node) their GPUs count as free, and they are taken first when
        enough of them fit. ``allowed``: only these minors (a GPU hint's selector); ``victims``: uids of
        pods whose GPUs count as free (preemption dry runs).

        Without those three, the choice is memoised by node state (:meth:`_choice_key`): many nodes
        and pods share one, and the choice is a function of it alone."""
        fgd_share = self.args.strategy == FRAGMENTATION_AWARE and req.count == 1 and 0 < req.milli() < 1000
        free_cpu = free_mem = 0
        if fgd_share:
            node_cpu, node_mem = self._free_cpu_memory(np.array([row], dtype=np.int64))
            free_cpu, free_mem = int(node_cpu[0]), int(node_mem[0])
            if pod.node_name == node:  # assumed before Reserve: its own requests are counted already
                free_cpu += pod.requests.get("cpu", 0)
                free_mem += pod.requests.get("memory", 0)
        if reserved or allowed is not None or victims:
            return self._choose_computed(pod, req, node, row, fgd_share, free_cpu, free_mem, reserved, allowed, victims)
        key = self._choice_key(pod, req, node, row, fgd_share, free_cpu, free_mem)
        if key in self._choices:
            hit = self._choices[key]
            return None if hit is None else list(hit)
        slots = self._choose_computed(pod, req, node, row, fgd_share, free_cpu, free_mem)
        if len(self._choices) >= _MAX_CHOICES:
            self._choices.clear()
        self._choices[key] = None if slots is None else tuple(slots)
        return slots

    def _choice_key(
        self, pod: PodInfo, req: GPURequest, node: str, row: int, fgd_share: bool, free_cpu: int, free_mem: int
    ) -> Hashable:
        """What :meth:`_choose_computed` reads without reservations, hints or victims: the request, the
        GPU row's contents (minors, totals, frees, milli, live flags) and, for a FragmentationAware
        share, the node's GPU model and the workload's (cpu, memory) class of the node before and after
        the pod (``free_cpu`` milli-cores, ``free_mem`` bytes). The memo is emptied when the table or
        the workload object changes."""
        table = self.devices.table
        workload = (self.workload() or _NO_WORKLOAD) if self.args.strategy == FRAGMENTATION_AWARE else None
        if self._choices_owner[0] is not table or self._choices_owner[1] is not workload:
            self._choices.clear()
            self._choices_owner = (table, workload)
        blob = np.concatenate([field[row] for field in (*table.int_fields(), table.live)])
        base = (req.count, tuple(sorted(req.per_gpu.items())), bytes(blob))
        if not fgd_share:
            return base
        assert workload is not None
        codes = workload.class_codes(
            np.array([free_cpu, free_cpu - pod.requests.get("cpu", 0)], dtype=np.int64),
            np.array([free_mem, free_mem - pod.requests.get("memory", 0)], dtype=np.int64),
        ).tolist()
        return (*base, self.devices.models.get(node, ""), codes[0], codes[1])

    def _choose_computed(
        self,
        pod: PodInfo,
        req: GPURequest,
        node: str,
        row: int,
        fgd_share: bool,
        free_cpu: int,
        free_mem: int,
        reserved: list[ReservedGPUs] | None = None,
        allowed: set[int] | None = None,
        victims: list[str] | None = None,
    ) -> list[int] | None:
        """:meth:`_choose` computed; ``fgd_share``: a FragmentationAware share of one GPU, whose node has
        ``free_cpu`` milli-cores and ``free_mem`` bytes free without the pod."""
        rows = np.array([row], dtype=np.int64)
        uids = [r.uid for r in reserved or []] + list(victims or [])
        removed = [[replace(pod, uid=u) for u in uids]] if uids else None
        fits = self._fits(req, rows, removed)[0]
        table = self.devices.table
        if allowed is not None:
            fits = fits & np.isin(table.minor[row], list(allowed))
        if int(fits.sum()) < req.count:
            return None
        if reserved:
            held = set().union(*(r.minors() for r in reserved))
            in_reservation = fits & np.isin(table.minor[row], list(held))
            if int(in_reservation.sum()) >= req.count:
                fits = in_reservation
        if fgd_share:
            workload = self.workload() or _NO_WORKLOAD
            shape = PodShape(pod.requests.get("cpu", 0), pod.requests.get("memory", 0), req.milli())
            model = self.devices.models.get(node, "")
            free = table.free_milli(rows)[0]
            terms = None
            if len(workload.group_per) and len(free):
                # the node's GPU terms from the per-row memo (the row scored this pod already), G times
                g = len(free)
                copies = np.full(g, row, dtype=np.int64)
                terms = self._memo.get(workload, copies, table.version[copies], np.broadcast_to(free, (g, g)))
            growth = slot_growth(workload, shape, free_cpu, free_mem, free, model, fits, gpu_terms=terms)
            usable = np.flatnonzero(np.isfinite(growth))
            if len(usable):
                # as the FGD reference picks the GPU: the highest integer score, then the lowest GPU
                # index; the Rank mapping (exact growth ranks) takes the least exact growth instead
                if self.args.score_mapping == "Rank":
                    key = growth[usable]
                else:
                    key = -sigmoid_score(growth[usable]).astype(np.float64)
                minors = table.minor[row][usable]
                return [int(usable[np.lexsort((minors, key))[0]])]
        strategy = MOST_ALLOCATED if self.args.strategy == FRAGMENTATION_AWARE else self.args.strategy
        scores = device_scores(strategy, self.args.weights, req.per_gpu, table, row)
        minors = table.minor[row]
        order = sorted(np.flatnonzero(fits).tolist(), key=lambda s: (-int(scores[s]), int(minors[s])))
        return order[: req.count]

    def _gpu_allocations(self, nd: NodeDevice, req: GPURequest, row: int, slots: list[int]) -> list[GPUAllocation]:
        table = self.devices.table
        allocs = []
        for s in sorted(slots, key=lambda s: int(table.minor[row, s])):
            minor = int(table.minor[row, s])
            gpu = nd.gpus[minor]
            allocs.append(GPUAllocation(minor, _fill_memory(req.per_gpu, gpu.memory), gpu.uuid))
        return allocs

    def _scorer(self) -> Scorer:
        strategy = MOST_ALLOCATED if self.args.strategy == FRAGMENTATION_AWARE else self.args.strategy
        weights = self.args.weights
        return lambda request, total, free: score_resources(strategy, weights, request, total, free)

    def _allocate(
        self,
        state: CycleState,
        pod: PodInfo,
        ps: _PodState,
        node: str,
        row: int,
        victims: list[str],
        dry_run: bool = False,
        gpu_slots: list[int] | None = None,
    ) -> dict[str, list[GPUAllocation]]:
        """The per-node allocator (:mod:`.allocator`) for a pod with an ``extra`` part: type -> allocations.
        A ``dry_run`` (Filter) skips choosing GPUs whose choice changes nothing else (the vectorised
        test counted them already); ``gpu_slots`` are the GPU slots :meth:`_batched_gpu_slots` chose.

        Raises:
            Refused: the node cannot take the pod.
        """
        extra = ps.extra
        assert extra is not None
        nd = self.devices.nodes[node]
        states, secondary = self._prepare(nd, ps, victims)
        hints = extra.hints
        scorer = self._scorer()
        req = ps.request
        chooser = None
        if req is not None:
            gpu_req, gpu_state = req, states[n.GPU]

            def chooser() -> list[GPUAllocation]:
                if dry_run and not extra.gpu_choice_matters:
                    return []
                hint = hints.get(n.GPU)
                allowed = candidate_minors(gpu_state, hint) if hint is not None else None
                if hint is not None and hint.required_topology_scope:
                    minors = gpu_by_topology(
                        gpu_state,
                        gpu_req.per_gpu,
                        gpu_req.count,
                        gpu_req.shared,
                        hint.required_topology_scope,
                        allowed if allowed is not None else set(gpu_state.infos),
                        scorer,
                    )
                    slot_of = {int(m): s for s, m in enumerate(self.devices.table.minor[row].tolist()) if m >= 0}
                    return self._gpu_allocations(nd, gpu_req, row, [slot_of[m] for m in minors])
                if gpu_slots is not None:
                    return self._gpu_allocations(nd, gpu_req, row, gpu_slots)
                owned = [r for _, r in self._owned(state, pod).get(node, [])]
                only = restricted_minors(owned, gpu_req.per_gpu)
                if only is not None:
                    allowed = only if allowed is None else allowed & only
                slots = self._choose(pod, gpu_req, node, row, owned, allowed, victims)
                if slots is None:
                    raise Refused(_INSUFFICIENT_GPU)
                return self._gpu_allocations(nd, gpu_req, row, slots)

        return allocate_node(secondary, chooser, states, hints, extra.joint, scorer)

    def _prepare(
        self, nd: NodeDevice, ps: _PodState, victims: list[str]
    ) -> tuple[dict[str, TypeState], dict[str, tuple[dict[str, int], int]]]:
        """``AutopilotAllocator.Prepare``: the node's devices by type and, per RDMA/FPGA type, the per-device
        request and count.

        Raises:
            Refused: UnschedulableAndUnresolvable when the node lacks the type or its VFs.
        """
        extra = ps.extra
        assert extra is not None
        states = {kind: nd.type_state(kind, victims) for kind in extra.secondary}
        secondary = {
            kind: instance_request(kind, value, extra.hints.get(kind), states[kind])
            for kind, value in sorted(extra.secondary.items())
        }
        if ps.request is not None:
            states[n.GPU] = nd.type_state(n.GPU, victims)  # for hints, PCIe roots and topology scopes
        check_vfs(([n.GPU] if ps.request is not None else []) + sorted(secondary), extra.hints, states)
        return states, secondary

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Choose the devices and account them now (``Insufficient gpu devices`` when they are gone)."""
        ps = self._pod_state(state, pod)
        req = ps.request
        if req is None and ps.extra is None:
            return SUCCESS
        self.devices.flush()
        row = self.handle.snapshot.row(node)
        nd = self.devices.nodes.get(node)
        if row is None or nd is None or not nd.has_device:
            return SUCCESS  # no Device: left to kubelet, as upstream
        others: dict[str, list[GPUAllocation]] = {}
        if ps.extra is not None:
            try:
                others = self._allocate(state, pod, ps, node, row, [])
            except Refused as refused:
                return refused.status
            allocs = others.pop(n.GPU, [])
        else:
            assert req is not None
            owned = [r for _, r in self._owned(state, pod).get(node, [])]
            only = restricted_minors(owned, req.per_gpu)
            slots = self._choose(pod, req, node, row, owned, only)
            if slots is None:
                return _INSUFFICIENT_GPU if only is None else _RESERVATION_INSUFFICIENT_GPU
            allocs = self._gpu_allocations(nd, req, row, slots)
        self.devices.account(pod.uid, pod.key, node, allocs, others)
        source = max(
            self._owned(state, pod).get(node, []),
            key=lambda item: len(item[1].minors() & {a.minor for a in allocs}),
            default=None,
        )
        if source is not None and source[1].minors() & {a.minor for a in allocs}:
            self.devices.link_owner(pod.uid, source[0], allocs)
        state.write(_ALLOC, (node, allocs, others))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Release what :meth:`reserve` accounted in this cycle."""
        if state.get(_ALLOC) is None:
            return
        self.devices.unlink_owner(pod.uid)
        self.devices.release(pod.uid)
        state.write(_ALLOC, None)

    # ------------------------------------------------------------------ prebind
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Write the device-allocated annotation through ``handle.client`` before the Binding (upstream's
        order); a refused write fails the binding (ERROR with the API's message)."""
        entry = state.get(_ALLOC)
        if entry is None:
            return SUCCESS
        value = _annotation(entry[1], entry[2])
        if pod.annotations.get(n.ANNOTATION_DEVICE_ALLOCATED) == value:
            return SUCCESS
        self._pending[pod.uid] = (pod.namespace, pod.name, value, 0)
        try:
            await self._write(pod.uid, pod.namespace, pod.name, value)
        except ApiError as exc:
            return Status.error(str(exc))
        return SUCCESS

    async def pre_bind_reservation(
        self, state: CycleState, reserve_pod: PodInfo, reservation: str, node: str
    ) -> Status:
        """Write the GPUs Reserve chose for a reserve pod onto the Reservation (``device-allocated``), before
        it is marked Available; a refused write fails the placement (its Unreserve releases them)."""
        entry = state.get(_ALLOC)
        if entry is None:
            return SUCCESS
        patch = {"metadata": {"annotations": {n.ANNOTATION_DEVICE_ALLOCATED: _annotation(entry[1], entry[2])}}}
        try:
            await self.handle.client.patch("Reservation", reservation, patch)
        except ApiError as exc:
            return Status.error(f"cannot write {n.ANNOTATION_DEVICE_ALLOCATED} on reservation {reservation}: {exc}")
        return SUCCESS

    def _spawn_write(self, uid: str, namespace: str, name: str, value: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._write_logged(uid, namespace, name, value))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_logged(self, uid: str, namespace: str, name: str, value: str) -> None:
        """A retry of the annotation write in the background: failures are logged by _write only."""
        with contextlib.suppress(ApiError):
            await self._write(uid, namespace, name, value)

    async def _write(self, uid: str, namespace: str, name: str, value: str) -> None:
        patch = {"metadata": {"annotations": {n.ANNOTATION_DEVICE_ALLOCATED: value}}}
        try:
            await self.handle.client.patch("Pod", name, patch, namespace=namespace)
        except NotFound:
            return  # embedded mode: the pod enters the source at bind; retried when it shows up (_pod_seen)
        except ApiError as exc:
            log.warning("pod %s/%s: cannot write %s: %s", namespace, name, n.ANNOTATION_DEVICE_ALLOCATED, exc)
            raise

    # ------------------------------------------------------------------ REST
    def collect_metrics(self) -> Iterable[GaugeMetricFamily]:
        """GPU allocation per node with a Device, read at scrape time: ``koord_deviceshare_gpu_core_total`` and
        ``_allocated`` (percent of one GPU, 100 per GPU), ``koord_deviceshare_gpus{state}`` (free: nothing
        allocated, partial: shared, some left, full) where ``partial`` GPUs are the fragmentation a pod
        asking whole GPUs cannot use."""
        total = GaugeMetricFamily(
            "koord_deviceshare_gpu_core_total", "GPU core of healthy GPUs (100 per GPU).", labels=["node"]
        )
        allocated = GaugeMetricFamily(
            "koord_deviceshare_gpu_core_allocated", "GPU core allocated to pods.", labels=["node"]
        )
        gpus = GaugeMetricFamily(
            "koord_deviceshare_gpus", "GPUs by allocation state (free, partial, full).", labels=["node", "state"]
        )
        core = n.RESOURCE_GPU_CORE
        for name, nd in sorted(self.devices.nodes.items()):
            if not nd.has_device:
                continue
            states = {"free": 0, "partial": 0, "full": 0}
            node_total = node_used = 0
            for minor in nd.gpus:
                have = nd.total(minor).get(core, 0)
                used = min(have, nd.used.get(minor, {}).get(core, 0))
                node_total, node_used = node_total + have, node_used + used
                if have > 0:
                    states["free" if used == 0 else "full" if used >= have else "partial"] += 1
            total.add_metric([name], node_total)
            allocated.add_metric([name], node_used)
            for state, count in states.items():
                gpus.add_metric([name, state], count)
        return [total, allocated, gpus]

    def routes(self) -> list[tuple[str, Any]]:
        """``GET /nodeDeviceSummaries`` and ``GET /nodeDeviceSummaries/{nodeName}``."""
        return [("/nodeDeviceSummaries", self.all_summaries), ("/nodeDeviceSummaries/{nodeName}", self.one_summary)]

    async def all_summaries(self) -> dict[str, Any]:
        """NodeDeviceSummary of every node the plugin tracks, keyed by node name."""
        return {name: node_summary(nd) for name, nd in sorted(self.devices.nodes.items())}

    async def one_summary(self, nodeName: str) -> dict[str, Any]:
        """NodeDeviceSummary of one node.

        Raises:
            NotFound: the node is not tracked (``cannot find node <name>``; the server answers 404).
        """
        nd = self.devices.nodes.get(nodeName)
        if nd is None:
            raise NotFound(f"cannot find node {nodeName}")
        return node_summary(nd)


#: The workload used before any pod was seen (every GPU milli counts as fragment only with weights).
_NO_WORKLOAD = Workload([], np.zeros(0))


def _annotation(gpus: list[GPUAllocation], others: dict[str, list[GPUAllocation]]) -> str:
    """The device-allocated value: GPU-only pods keep the one-type form; others add their types."""
    if not others:
        return format_allocations(gpus)
    return format_device_allocations({n.GPU: gpus, **others})


def _asks_no_gpu(pod: PodInfo) -> bool:
    """Whether the pod asks for no GPU resource at all (not: an invalid GPU request)."""
    try:
        return gpu_request(pod.requests) is None
    except DeviceRequestError:
        return False


def _fill_memory(per_gpu: dict[str, int], total_memory: int) -> dict[str, int]:
    """``fillGPUTotalMem``: add the missing one of gpu-memory / gpu-memory-ratio from the GPU's total memory."""
    out = dict(per_gpu)
    has_mem, has_ratio = n.RESOURCE_GPU_MEMORY in out, n.RESOURCE_GPU_MEMORY_RATIO in out
    if total_memory <= 0 or (has_mem and has_ratio):
        return out
    if has_mem:
        out[n.RESOURCE_GPU_MEMORY_RATIO] = math.floor(out[n.RESOURCE_GPU_MEMORY] / total_memory * 100)
    elif has_ratio:
        out[n.RESOURCE_GPU_MEMORY] = out[n.RESOURCE_GPU_MEMORY_RATIO] * total_memory // 100
    return out


def new_device_share(args: dict[str, Any], handle: Handle) -> DeviceShare:
    """Factory: decode, default and validate the args, then build the plugin.

    Raises:
        ArgsError: invalid args (see :func:`~app.plugins.deviceshare.args.decode_args`).
    """
    return DeviceShare(decode_args(args), handle)
