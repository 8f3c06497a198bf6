"""The LoadAwareScheduling plugin: Filter and Score over precomputed per-node columns.

Mirrors ``pkg/scheduler/plugins/loadaware/load_aware.go``. Cache events update per-node
:class:`NodeLoad` state incrementally and mark the node dirty; dirty rows are written into numpy
columns before the next request, so Filter/Score are array operations over the requested rows.

Filter (per node, upstream order): DaemonSet pods pass; thresholds chosen (prod thresholds for
prod pods when set, else aggregated profile, else plain); all-zero thresholds pass; no NodeMetric
passes; expired NodeMetric fails with ``node(s) nodeMetric expired`` (unless
enableScheduleWhenNodeMetricsExpired); nil ``status.nodeMetric`` passes; otherwise
``round(estimated / allocatable * 100) > threshold`` fails with ``node(s) <res> usage exceed
threshold`` (or ``aggregated usage``) for the first such resource in name order.

Score: ``leastUsed = (alloc - used) * 100 // alloc`` per resource, weighted by resourceWeights
(plus the dominant-resource term), 0 for nodes without a fresh NodeMetric.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple

import numpy as np
import numpy.typing as npt
from prometheus_client.core import GaugeMetricFamily

from app.api.koordext import ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS, PriorityClass
from app.api.quantity import display_resource_list
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import (
    MAX_NODE_SCORE,
    FilterFailures,
    FilterPlugin,
    NodeBatch,
    ScorePlugin,
    ServiceProvider,
)
from app.framework.status import Status
from app.plugins.loadaware.args import LoadAwareSchedulingArgs, decode_args
from app.plugins.loadaware.estimator import estimate_pod, estimation_deadline, node_allocatable
from app.plugins.loadaware.headroom import UNLIMITED, largest_fitting_estimate
from app.plugins.loadaware.metricview import parse_metric
from app.plugins.loadaware.nodeload import AssignInfo, NodeLoad
from app.plugins.loadaware.profile import FilterProfile, profile_for_node, profile_from_args
from app.plugins.loadaware.rowmemo import OneRowFunction, RowFunction, RowMemos
from app.plugins.loadaware.vector import Vec, Vectorizer, is_empty

NAME = "LoadAwareScheduling"
ERR_REASON_NODE_METRIC_EXPIRED = "node(s) nodeMetric expired"
ERR_REASON_USAGE_EXCEED_THRESHOLD = "node(s) %s usage exceed threshold"
ERR_REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD = "node(s) %s aggregated usage exceed threshold"
#: ``pkg/util/reservation.AnnotationReservePod``.
ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"

_ESTIMATE_KEY = NAME + "/IncomingPodEstimated"

#: Entries :attr:`LoadAwareScheduling._assign_estimates` (and ``_incoming_estimates``) hold at most (cleared
#: when full).
ASSIGN_ESTIMATES_MAX = 4096

# Node table columns owned by this plugin.
_ALLOC, _STATE, _UPDATE = "la:alloc", "la:state", "la:update"
_PLAIN, _PROD, _SAGG = "la:plain", "la:prod", "la:sagg"
# What Filter compares per node, worked out when the node's row is written, once for pods that are
# not prod (index 0) and once for prod pods (index 1): per resource, the largest pod estimate that still
# passes the chosen threshold (headroom.largest_fitting_estimate), stored as UNLIMITED minus it in a
# uint64 column (_inverted) so that a row never written (zeros) checks nothing, as every other column's
# zero does; whether the thresholds are the aggregated ones (the reason's wording); and whether the node's
# NodeMetric is checked at all (some threshold set and a NodeMetric present: the expiry test).
_F_LIM = ("la:f_lim", "la:f_lim_prod")
_F_AGG = ("la:f_agg", "la:f_agg_prod")
_F_ON = ("la:f_on", "la:f_on_prod")

#: int64's range: :meth:`LoadAwareScheduling._score_row` computes in Python ints within it.
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# Values of the _STATE column.
_NO_METRIC, _NIL_NODE_METRIC, _HAS_METRIC = 0, 1, 2


def _inverted(value: int) -> int:
    """``UNLIMITED - value`` for an int64 ``value`` (a cut-off or an estimate): 0 ... 2**64 - 1, a uint64.

    Order-reversing and exact over all of int64, so ``estimate > cut_off`` is ``_inverted(cut_off) >
    _inverted(estimate)`` for negative estimates (a negative scaling factor) and cut-offs too, and the
    cut-off UNLIMITED (nothing checked) is stored as 0, the value of a row never written.
    """
    return UNLIMITED - value


def _same_assignment(held: AssignInfo, renewed: AssignInfo) -> bool:
    """``renewed`` would account exactly as ``held`` does (:meth:`NodeLoad._account` reads the key, the
    timestamp, the estimate, the deadline and the prod flag; the fingerprint only decides renewals)."""
    return (
        held.key == renewed.key
        and held.timestamp == renewed.timestamp
        and held.deadline == renewed.deadline
        and held.prod == renewed.prod
        and held.estimated == renewed.estimated
    )


def _is_reserve_pod(pod: PodInfo) -> bool:
    """A reservation's fake pod (``reservationutil.IsReservePod``); never tracked as assigned."""
    return pod.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def _any_per_row(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """``mask.any(axis=1)`` for an (n, r) mask with few columns, as r - 1 element-wise ORs (~3x cheaper);
    a new array (never a view of ``mask``)."""
    r = mask.shape[1]
    if r < 2:
        return mask[:, 0].copy() if r else np.zeros(len(mask), dtype=np.bool_)
    out = mask[:, 0] | mask[:, 1]
    for j in range(2, r):
        out |= mask[:, j]
    return out


class _Estimate(NamedTuple):
    """The incoming pod's estimate, shared by Filter and Score.

    Attributes:
        vector: estimated usage per resource (milli-cores, bytes), read-only.
        filter_bound: ``UNLIMITED - vector`` as uint64 (:func:`_inverted`), read-only: the estimate exceeds
            a node's cut-off exactly where the stored cut-off (inverted the same way) is greater than this.
    """

    vector: npt.NDArray[np.int64]
    filter_bound: npt.NDArray[np.uint64]


class LoadAwareScheduling(CacheListener, FilterPlugin, ScorePlugin, ServiceProvider):
    """Filter and Score by node load. See the module docstring for the semantics."""

    #: Upstream's plugin name (the Go package's ``Name``): the registry key and what ``name`` answers.
    NAME: ClassVar[str] = NAME
    name = NAME
    #: every failing Status of :meth:`filter_nodes` is made with ``plugin=NAME`` (see
    #: :data:`app.framework.runtime.ATTRIBUTED_STATUSES`)
    attributed_statuses: ClassVar[bool] = True

    def __init__(self, args: LoadAwareSchedulingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.vec = Vectorizer(args.resource_names())
        self.default_profile = profile_from_args(args, self.vec)
        weights = self.vec.from_values(args.resource_weights)
        self.weights: npt.NDArray[np.int64] | None = np.array(weights, dtype=np.int64)
        if args.dominant_resource_weight == 0 and is_empty(weights):
            self.weights = None
        self._weight_sum = int(sum(weights))
        self._weights_list: list[int] = [int(w) for w in weights]
        self.loads: dict[str, NodeLoad] = {}
        self.profiles: dict[str, FilterProfile] = {}
        self._dirty: set[str] = set()
        #: The oldest ``updateTime`` (seconds) of the NodeMetrics in the table's rows (-inf for one without;
        #: +inf with none), or None when a row's NodeMetric changed since it was worked out: see
        #: :meth:`_all_fresh`.
        self._oldest_update: float | None = None
        #: Assigned pods' estimates by what they are worked out from (see :meth:`_assign_estimate`).
        self._assign_estimates: dict[tuple[Any, ...], tuple[int, ...] | None] = {}
        #: Incoming pods' estimates by :meth:`_estimate_key` (see :meth:`_estimate`; cleared when full).
        self._incoming_estimates: dict[tuple[Any, ...], _Estimate] = {}
        #: The last incoming pod and its estimate (see :meth:`_estimate`).
        self._last_estimate: tuple[PodInfo, _Estimate] | None = None
        #: Filter codes and scores of each class of incoming pods (one :class:`_Estimate`) by node-table row,
        #: worked out again for the rows :meth:`_flush` rewrites (see :meth:`filter_nodes`, :meth:`score_nodes`)
        self._memos = RowMemos()
        #: One shared Status per threshold reason (failing nodes share it), by code ``2 * resource index +
        #: aggregated`` (the aggregated-usage threshold): see :meth:`filter_nodes`.
        self._exceed_by_code = [
            Status.unschedulable(
                (ERR_REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD if aggregated else ERR_REASON_USAGE_EXCEED_THRESHOLD)
                % name,
                plugin=NAME,
            )
            for name in self.vec.names
            for aggregated in (False, True)
        ]
        r = len(self.vec)
        table = handle.snapshot.table
        for key in (_ALLOC, _PLAIN, _PROD, _SAGG):
            table.column(key, np.int64, (r,))
        for key in _F_LIM:
            table.column(key, np.uint64, (r,))
        table.column(_STATE, np.int8)
        table.column(_UPDATE, np.float64)
        for key in (*_F_AGG, *_F_ON):
            table.column(key, np.bool_)
        handle.add_listener(self)

    # ------------------------------------------------------------------ events
    def _load(self, node: str) -> NodeLoad:
        load = self.loads.get(node)
        if load is None:
            load = NodeLoad(size=len(self.vec), include_sys=self.args.prod_usage_include_sys)
            load.set_metric(None)
            self.loads[node] = load
        return load

    def on_node(self, name: str, node: NodeState | None) -> None:
        """Recompute the node's allocatable vector and threshold profile."""
        if node is None:
            self.profiles.pop(name, None)
            return
        self.profiles[name] = profile_for_node(node.annotations, self.default_profile, self.vec)
        self._dirty.add(name)

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Install or drop a NodeMetric (named after its node)."""
        if kind != "NodeMetric":
            return
        if obj is None:
            load = self.loads.get(key)
            if load is not None:
                load.set_metric(None)
                if load.is_empty():
                    del self.loads[key]
        else:
            self._load(key).set_metric(parse_metric(obj, self.vec))
        self._dirty.add(key)

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Track assigned pods per node (``podAssignCache.OnAdd`` / ``OnUpdate`` / ``OnDelete``).

        A pod that stays on its node keeps its assign info (timestamp, estimate) while its spec and
        ``status.conditions`` are unchanged, as upstream's ``OnUpdate`` does; otherwise it is
        (re-)assigned with its PodScheduled time, or the clock's now when it has none (``assign``).
        A renewal that comes out as the entry already held (same key, timestamp, estimate, deadline and
        prod flag: e.g. the kubelet's Running update, whose new conditions keep the PodScheduled time)
        only records the new fingerprint: taking the entry out of the node's sums and putting it back
        would leave them as they are, so the node's row is not rewritten either (issue 29); likewise a
        renewal whose new timestamp or deadline changes nothing the node sums (:meth:`NodeLoad.upsert_pod`,
        e.g. the watch confirming an assumed pod) only replaces the entry.
        Terminated pods are dropped; reserve pods are never assigned.
        """
        fingerprint = new.spec_hash if new is not None else None
        previous: AssignInfo | None = None
        if old is not None and old.node_name:
            load = self.loads.get(old.node_name)
            previous = load.pods.get(old.uid) if load is not None else None
            if load is not None and previous is not None:
                stays = new is not None and new.node_name == old.node_name and not new.terminated
                if stays and new is not None:
                    if fingerprint == previous.fingerprint or _is_reserve_pod(new):
                        return  # nothing to renew (assign() ignores reserve pods and keeps the old entry)
                else:
                    previous = None
                    load.remove_pod(old.uid)
                    if load.is_empty():
                        del self.loads[old.node_name]
                    self._dirty.add(old.node_name)
        if new is None or not new.node_name or new.terminated or _is_reserve_pod(new):
            return
        estimated = self._assign_estimate(new)
        timestamp = new.scheduled_time if new.scheduled_time is not None else self.handle.now()
        info = AssignInfo(
            key=new.key,
            timestamp=timestamp,
            estimated=estimated,
            deadline=estimation_deadline(new, timestamp, self.args),
            prod=new.priority_class == PriorityClass.PROD,
            fingerprint=fingerprint,
        )
        if previous is not None and _same_assignment(previous, info):
            previous.fingerprint = fingerprint
            return
        if self._load(new.node_name).upsert_pod(new.uid, info):
            self._dirty.add(new.node_name)

    def _estimate_key(self, pod: PodInfo) -> tuple[Any, ...]:
        """What :func:`estimate_pod` reads of ``pod`` besides the plugin's args (fixed for its life): its
        priority class, requests, limits and (with allowCustomizeEstimation) its scaling-factors annotation.
        Pods equal in these have equal estimates: a workload's replicas, and a pod's own events."""
        custom = (
            pod.annotations.get(ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS)
            if self.args.allow_customize_estimation
            else None
        )
        return (pod.priority_class, custom, tuple(pod.requests.items()), tuple(pod.limits.items()))

    def _assign_estimate(self, pod: PodInfo) -> Vec | None:
        """An assigned pod's estimate vector, None when all zero (a new list each call).

        The result is remembered by :meth:`_estimate_key` (:attr:`_assign_estimates`), since a pod's assume
        and watch events (and a workload's replicas) repeat it (~1 us to look up instead of ~8 us to
        estimate).
        """
        key = self._estimate_key(pod)
        memo = self._assign_estimates
        try:
            found = memo[key]
        except KeyError:
            vector = self.vec.from_values(estimate_pod(pod, self.args))
            found = None if is_empty(vector) else tuple(vector)
            if len(memo) >= ASSIGN_ESTIMATES_MAX:
                memo.clear()
            memo[key] = found
        return None if found is None else list(found)

    def _flush(self) -> None:
        """Write dirty nodes' rows into the table columns."""
        if not self._dirty:
            return
        snapshot = self.handle.snapshot
        table = snapshot.table
        written: list[int] = []
        for name in self._dirty:
            row = table.row(name)
            node = snapshot.node(name)
            if row is None or node is None:
                continue
            written.append(row)
            profile = self.profiles.get(name, self.default_profile)
            alloc = self.vec.from_values(node_allocatable(node))
            table.column(_ALLOC)[row] = alloc
            load = self.loads.get(name)
            metric = load.metric if load is not None else None
            if load is None or metric is None:
                if table.column(_STATE)[row] != _NO_METRIC:
                    self._oldest_update = None  # the row leaves the NodeMetrics' oldest
                table.column(_STATE)[row] = _NO_METRIC
                for v in (0, 1):
                    table.column(_F_ON[v])[row] = False
                    table.column(_F_LIM[v])[row] = 0  # nothing checked
                continue
            has_usage = metric.node_usage is not None
            state_value = _HAS_METRIC if has_usage else _NIL_NODE_METRIC
            # no updateTime: -inf, not NaN, so that the expiry test can be one comparison (see _fresh)
            update = metric.update_time if not math.isnan(metric.update_time) else -math.inf
            # a pod's assignment (most flushes) leaves both as they are; anything else may move the oldest
            if table.column(_STATE)[row] != state_value or table.column(_UPDATE)[row] != update:
                self._oldest_update = None
            table.column(_STATE)[row] = state_value
            table.column(_UPDATE)[row] = update
            plain: Vec | int = load.plain_base() or 0
            prod = load.prod_base()
            table.column(_PLAIN)[row] = plain
            table.column(_PROD)[row] = prod
            agg = profile.aggregated
            agg_base: Vec | int = (
                (load.aggregated_base(agg.aggregation_type, agg.duration) or 0) if agg is not None else 0
            )
            sargs = self.args.aggregated
            if sargs is not None and sargs.score_aggregation_type:
                base = load.aggregated_base(sargs.score_aggregation_type, sargs.score_aggregated_duration)
                table.column(_SAGG)[row] = base or 0
            # Filter's choice (upstream's filterNodeUsage / filterProdUsage): prod pods take the prod
            # thresholds when any is set; otherwise the aggregated profile when there is one; else plain.
            use_prod = not is_empty(profile.prod)
            limits: tuple[Vec | int, Vec, list[int]] | None = None  # (base, thresholds, cut-offs) last worked out
            for v, prod_pod in ((0, False), (1, True)):
                base_v: Vec | int
                if prod_pod and use_prod:
                    thr, base_v, aggregated = profile.prod, prod, False
                elif agg is not None:
                    thr, base_v, aggregated = agg.thresholds, agg_base, True
                else:
                    thr, base_v, aggregated = profile.usage, plain, False
                checked = not is_empty(thr)
                table.column(_F_AGG[v])[row] = aggregated
                table.column(_F_ON[v])[row] = checked
                if checked and has_usage:  # a nil status.nodeMetric passes (upstream checks no usage)
                    if limits is None or limits[0] is not base_v or limits[1] is not thr:
                        bases = base_v if isinstance(base_v, list) else [base_v] * len(alloc)
                        cut_offs = [
                            _inverted(largest_fitting_estimate(b, a, t))
                            for b, a, t in zip(bases, alloc, thr, strict=True)
                        ]
                        limits = (base_v, thr, cut_offs)
                    table.column(_F_LIM[v])[row] = limits[2]
                else:
                    table.column(_F_LIM[v])[row] = 0  # nothing checked
        self._dirty.clear()
        self._memos.mark(written)

    # ------------------------------------------------------------------ estimation
    def pod_estimate(self, state: CycleState, pod: PodInfo) -> npt.NDArray[np.int64]:
        """The incoming pod's estimated usage vector (read-only), computed once per cycle, and once for
        the same :class:`PodInfo` object across cycles (``/prioritize`` gets ``/filter``'s parse of the
        pod; a PodInfo is never changed in place, and the estimate depends only on it and the args), and
        once for pods equal in what the estimate reads (:meth:`_estimate`)."""
        return self._estimate(state, pod).vector

    def _estimate(self, state: CycleState, pod: PodInfo) -> _Estimate:
        """The incoming pod's :class:`_Estimate`: the cycle's, else the last pod's when ``pod`` is that very
        PodInfo, else the one kept for an equal :meth:`_estimate_key` (:attr:`_incoming_estimates`: a
        workload's replicas, a pod scheduled again), else worked out (~15 us: the estimate, two arrays)."""
        cached: _Estimate | None = state.get(_ESTIMATE_KEY)
        if cached is None:
            last = self._last_estimate
            if last is not None and last[0] is pod:
                cached = last[1]
            else:
                key = self._estimate_key(pod)
                memo = self._incoming_estimates
                cached = memo.get(key)
                if cached is None:
                    vector = np.array(self.vec.from_values(estimate_pod(pod, self.args)), dtype=np.int64)
                    # estimate > cut-off  <=>  stored (inverted) cut-off > inverted estimate, both uint64
                    bound = np.array([_inverted(e) for e in vector.tolist()], dtype=np.uint64)
                    vector.flags.writeable = bound.flags.writeable = False  # shared by the pods of this key
                    cached = _Estimate(vector, bound)
                    if len(memo) >= ASSIGN_ESTIMATES_MAX:
                        memo.clear()
                    memo[key] = cached
                self._last_estimate = (pod, cached)
            state.write(_ESTIMATE_KEY, cached)
        return cached

    def _fresh(self, update: npt.NDArray[np.float64], now: float) -> npt.NDArray[np.bool_]:
        """Not expired (``isNodeMetricExpired`` negated). A NodeMetric without updateTime is stored as
        -inf (:meth:`_flush`): ``now - (-inf)`` is +inf, never fresh, and :meth:`_expired` is exactly the
        negation with one comparison (no NaN, for which ``>=`` would not negate ``<``)."""
        return now - update < self.args.node_metric_expiration_seconds

    def _expired(self, update: npt.NDArray[np.float64], now: float) -> npt.NDArray[np.bool_]:
        """``isNodeMetricExpired``: ``~_fresh(update, now)`` in one comparison (see :meth:`_fresh`)."""
        return now - update >= self.args.node_metric_expiration_seconds

    def _all_fresh(self, now: float) -> bool:
        """Whether no row of the node table holds an expired NodeMetric at ``now`` (seconds): then every
        node with a NodeMetric is fresh, and :meth:`filter_nodes` and :meth:`score_nodes` skip the per-node
        expiry test (four to six numpy calls over the batch, ~5-7 us each call).

        Exact: ``now - u`` never decreases as ``u`` decreases (IEEE subtraction rounds monotonically), so a
        fresh oldest ``updateTime`` means a fresh one on every row. The oldest is kept in
        :attr:`_oldest_update` and worked out again (one pass over the table) only after :meth:`_flush`
        changed a row's NodeMetric state or updateTime; a pod's assignment, which dirties a row on every
        bind, changes neither. A row freed by a deleted node is zeroed (no NodeMetric), which can only raise
        the true oldest, so the kept one stays a lower bound and the answer stays exact or conservative.
        Call after :meth:`_flush`.
        """
        oldest = self._oldest_update
        if oldest is None:
            table = self.handle.snapshot.table
            with_metric = table.column(_STATE) != _NO_METRIC
            oldest = float(table.column(_UPDATE)[with_metric].min()) if with_metric.any() else math.inf
            self._oldest_update = oldest
        return bool(now - oldest < self.args.node_metric_expiration_seconds)

    # ------------------------------------------------------------------ filter
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        """Failing positions with upstream's reasons (see the module docstring).

        Each node's cut-offs (the largest estimate per resource its threshold still takes) were worked
        out when its row was written (:meth:`_flush`); what is left per call is the expiry check and one
        comparison of the pod's estimate with the cut-offs. While no NodeMetric has expired (or expiry is
        not checked), a node's verdict depends on its row and the pod's estimate only: the verdicts of a
        class of pods (one estimate: a workload's replicas) are kept by row (:mod:`~app.plugins.loadaware.rowmemo`)
        and read with one ``take``, worked out again only for the rows written since.
        """
        if pod.daemonset or len(nodes) == 0:
            return {}
        self._flush()
        rows = nodes.rows
        v = 1 if pod.priority_class == PriorityClass.PROD else 0
        if len(rows) == 1:
            return self._filter_row(state, pod, int(rows[0]), v)
        estimate = self._estimate(state, pod)
        if not self.args.filter_expired_node_metrics or self._all_fresh(state.now):
            table = self.handle.snapshot.table
            memo = self._memos.get(
                ("filter", id(estimate), v),
                table.generation,
                table.capacity,
                lambda: self._filter_codes(estimate.filter_bound, v),
                estimate,
            )
            if memo is not None:
                return self._failures(memo.take(rows))
        return self._filter_batch(state, rows, estimate, v)

    def _filter_codes(self, bound: npt.NDArray[np.uint64], v: int) -> tuple[RowFunction, OneRowFunction]:
        """The functions of :meth:`filter_nodes`' memo: :meth:`_codes` and :meth:`_code` for a pod of estimate
        ``bound`` and cut-off variant ``v``. No expiry test: the memo is read only while no NodeMetric has expired
        or expiry is not checked."""
        return functools.partial(self._codes, bound=bound, v=v), functools.partial(self._code, bound=bound, v=v)

    def _codes(self, rows: npt.NDArray[np.int64], bound: npt.NDArray[np.uint64], v: int) -> npt.NDArray[np.int16]:
        """Filter's reason code of each of ``rows`` (int16, parallel) for a pod of estimate ``bound``
        (:attr:`_Estimate.filter_bound`) against the usage thresholds of cut-off variant ``v`` (1 for a PROD pod):
        0 where it passes, else 1 + ``2 * (its first resource over the cut-off) + (aggregated threshold)``, the
        index of its reason in :attr:`_exceed_by_code` plus one. The expiry test is not made here."""
        table = self.handle.snapshot.table
        exceed = table.column(_F_LIM[v]).take(rows, axis=0) > bound
        out = np.zeros(len(rows), dtype=np.int16)
        bad = np.flatnonzero(_any_per_row(exceed))
        if len(bad):
            out[bad] = exceed[bad].argmax(axis=1) * 2 + table.column(_F_AGG[v])[rows[bad]] + 1
        return out

    def _code(self, row: int, bound: npt.NDArray[np.uint64], v: int) -> int:
        """:meth:`_codes` of the one ``row``, read as Python scalars: the batch path's numpy calls on one-row
        arrays cost more than the comparisons themselves."""
        table = self.handle.snapshot.table
        exceed = (table.column(_F_LIM[v])[row] > bound).tolist()
        if True not in exceed:
            return 0
        return 1 + 2 * exceed.index(True) + int(table.column(_F_AGG[v])[row])

    def _failures(self, codes: npt.NDArray[np.int16]) -> FilterFailures:
        """Failing positions of :meth:`_codes`' ``codes`` with their shared statuses, mapped in C: no Python
        work per node (many fail on a loaded cluster; a loop with a tuple and a dict look-up each cost ~0.4 us a
        node)."""
        bad = codes.nonzero()[0]
        if not len(bad):
            return {}
        statuses = self._exceed_by_code
        return dict(zip(bad.tolist(), map(statuses.__getitem__, (codes[bad] - 1).tolist()), strict=True))

    def _filter_batch(
        self, state: CycleState, rows: npt.NDArray[np.int64], estimate: _Estimate, v: int
    ) -> FilterFailures:
        """:meth:`filter_nodes` over ``rows`` without a memo: the expiry test, then :meth:`_codes`."""
        codes = self._codes(rows, estimate.filter_bound, v)
        failures: FilterFailures = {}
        if self.args.filter_expired_node_metrics and not self._all_fresh(state.now):
            table = self.handle.snapshot.table
            expired = table.column(_F_ON[v]).take(rows) & self._expired(table.column(_UPDATE).take(rows), state.now)
            if expired.any():
                if not self.args.enable_schedule_when_node_metrics_expired:
                    status = Status.unschedulable(ERR_REASON_NODE_METRIC_EXPIRED, plugin=NAME)
                    for pos in np.flatnonzero(expired).tolist():
                        failures[pos] = status
                codes[expired] = 0  # an expired NodeMetric's usage is not compared
        failures.update(self._failures(codes))
        return failures

    def _filter_row(self, state: CycleState, pod: PodInfo, row: int, v: int) -> FilterFailures:
        """:meth:`filter_nodes` for a batch of the one node at ``row`` (the binding cycle's re-check) with
        ``v`` the cut-off variant (1 for a PROD pod), read as Python scalars (:meth:`_code`). Same verdicts, same
        statuses."""
        table = self.handle.snapshot.table
        bound = self._estimate(state, pod).filter_bound
        if (
            self.args.filter_expired_node_metrics
            and table.column(_F_ON[v])[row]
            and self._expired(table.column(_UPDATE)[row], state.now)
        ):
            if not self.args.enable_schedule_when_node_metrics_expired:
                return {0: Status.unschedulable(ERR_REASON_NODE_METRIC_EXPIRED, plugin=NAME)}
            return {}  # an expired NodeMetric's usage is not compared
        code = self._code(row, bound, v)
        return {0: self._exceed_by_code[code - 1]} if code else {}

    # ------------------------------------------------------------------ score
    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        """Scores 0..100 per node; 0 without a fresh NodeMetric or without weights.

        While every NodeMetric is fresh, a node's score depends on its row and the pod's estimate only: the
        scores of a class of pods (one estimate) are kept by row, as :meth:`filter_nodes`' verdicts are."""
        n = len(nodes)
        if self.weights is None or n == 0:
            return np.zeros(n, dtype=np.int64)
        self._flush()
        table = self.handle.snapshot.table
        rows = nodes.rows
        prod = self.args.score_according_prod_usage and pod.priority_class == PriorityClass.PROD
        agg = self.args.aggregated
        if prod:
            key = _PROD
        elif agg is not None and agg.score_aggregation_type:
            key = _SAGG
        else:
            key = _PLAIN
        estimate = self._estimate(state, pod)
        fresh = self._all_fresh(state.now)
        if fresh and n > 1:
            memo = self._memos.get(
                ("score", id(estimate), key),
                table.generation,
                table.capacity,
                lambda: (
                    functools.partial(self._score_rows, key=key, vector=estimate.vector, now=None),
                    functools.partial(self._score_row, key=key, vector=estimate.vector),
                ),
                estimate,
            )
            if memo is not None:
                return memo.take(rows)
        return self._score_rows(rows, key, estimate.vector, None if fresh else state.now)

    def _score_row(self, row: int, key: str, vector: npt.NDArray[np.int64]) -> int:
        """:meth:`_score_rows` of the one ``row`` with every NodeMetric fresh, in Python ints (a few us, against
        ~15 for the batch path's numpy calls on one row). Equal to it: int64 arithmetic and Python's agree while
        no intermediate leaves int64, and a row where one would (values near 2**63 / 100) goes through
        :meth:`_score_rows`, which wraps as upstream's Go does."""
        assert self.weights is not None
        table = self.handle.snapshot.table
        if table.column(_STATE)[row] != _HAS_METRIC:
            return 0
        least: list[int] = []
        columns = (table.column(_ALLOC)[row].tolist(), table.column(key)[row].tolist(), vector.tolist())
        in_int64 = True
        for a, u, e in zip(*columns, strict=True):
            used = u + e
            part = max(a - used, 0) * MAX_NODE_SCORE
            in_int64 &= _INT64_MIN <= used <= _INT64_MAX and _INT64_MIN <= a - used <= _INT64_MAX and part <= _INT64_MAX
            least.append(part // max(a, 1))
        score = sum(p * w for p, w in zip(least, self._weights_list, strict=True))
        weight_sum = self._weight_sum
        dominant = self.args.dominant_resource_weight
        if dominant:
            score += min(min(least), MAX_NODE_SCORE) * dominant
            weight_sum += dominant
        if not (in_int64 and _INT64_MIN <= score <= _INT64_MAX):
            return int(self._score_rows(np.array([row], dtype=np.int64), key, vector, None)[0])
        return score // weight_sum if weight_sum > 0 else 0

    def _score_rows(
        self, rows: npt.NDArray[np.int64], key: str, vector: npt.NDArray[np.int64], now: float | None
    ) -> npt.NDArray[np.int64]:
        """Scores 0..100 of ``rows`` for a pod of estimate ``vector`` against usage column ``key``; ``now``
        (seconds) when some NodeMetric may have expired (rows with an expired one score 0), None when every
        NodeMetric is fresh. Needs weights (:attr:`weights` not None)."""
        assert self.weights is not None
        table = self.handle.snapshot.table
        n = len(rows)
        valid = table.column(_STATE).take(rows) == _HAS_METRIC
        if now is not None:
            valid &= self._fresh(table.column(_UPDATE).take(rows), now)
        # (n, r) columns: take() rather than fancy indexing, ~4x cheaper for a few hundred rows
        used = table.column(key).take(rows, axis=0) + vector
        alloc = table.column(_ALLOC).take(rows, axis=0)
        # upstream's leastUsedScore: 0 when capacity is 0 or used > capacity, else (capacity - used) * 100 /
        # capacity. Usage and estimates are never negative, so clamping the free part at 0 covers both cases.
        least = np.maximum(alloc - used, 0) * MAX_NODE_SCORE // np.maximum(alloc, 1)
        score = least @ self.weights
        weight_sum = self._weight_sum
        dominant = self.args.dominant_resource_weight
        if dominant:
            score = score + np.minimum(least.min(axis=1), MAX_NODE_SCORE) * dominant
            weight_sum += dominant
        score = score // weight_sum if weight_sum > 0 else np.zeros(n, dtype=np.int64)
        return np.where(valid, score, 0).astype(np.int64)

    # ------------------------------------------------------------------ REST
    def collect_metrics(self) -> Iterable[GaugeMetricFamily]:
        """Node usage against the thresholds, read at scrape time: ``koord_loadaware_node_usage_percent{node,
        resource}`` (the NodeMetric's nodeUsage over allocatable, nodes with a NodeMetric only) and the cluster-wide
        ``koord_loadaware_usage_threshold_percent{resource}`` of the args (per-node custom thresholds excluded)."""
        usage = GaugeMetricFamily(
            "koord_loadaware_node_usage_percent",
            "Node usage reported by the NodeMetric, percent of allocatable.",
            labels=["node", "resource"],
        )
        names = self.vec.names
        snapshot = self.handle.snapshot
        for node_name, load in sorted(self.loads.items()):
            node = snapshot.node(node_name)
            if load.metric is None or load.metric.node_usage is None or node is None:
                continue
            for resource, used in zip(names, load.metric.node_usage, strict=True):
                allocatable = node.allocatable.get(resource, 0)
                if allocatable > 0:
                    usage.add_metric([node_name, resource], 100.0 * used / allocatable)
        thresholds = GaugeMetricFamily(
            "koord_loadaware_usage_threshold_percent",
            "LoadAwareScheduling's cluster-wide usage threshold (filter), percent.",
            labels=["resource"],
        )
        for resource, percent in sorted(self.args.usage_thresholds.items()):
            thresholds.add_metric([resource], percent)
        return [usage, thresholds]

    def usage_thresholds(self, node_name: str) -> dict[str, int]:
        """The node's usage thresholds in percent by resource (its annotation's profile, else the args'); zero
        thresholds (not checked) are left out."""
        profile = self.profiles.get(node_name, self.default_profile)
        return {r: int(t) for r, t in zip(self.vec.names, profile.usage, strict=True) if t > 0}

    def routes(self) -> list[tuple[str, Any]]:
        """``GET node/{nodeName}``: the node's assign-cache view, as upstream's ``NodeAssignInfoData``."""
        return [("/node/{nodeName}", self.node_info)]

    async def node_info(self, nodeName: str) -> dict[str, Any]:
        """Assigned pods (by timestamp) and, with a NodeMetric, prodUsage / nodeDelta / prodDelta /
        nodeEstimated as ResourceLists plus the pods behind each (sorted ``namespace/name``)."""
        from app.api.timeparse import format_time

        load = self.loads.get(nodeName)
        if load is None:
            return {}
        snapshot = self.handle.snapshot
        pods = sorted(load.pods.items(), key=lambda kv: kv[1].timestamp)
        out: dict[str, Any] = {
            "pods": [
                {
                    "timestamp": format_time(info.timestamp),
                    "pod": snapshot.pod_object(uid) or {"metadata": {"uid": uid}},
                }
                for uid, info in pods
            ]
        }
        if load.metric is not None:
            names = self.vec.names
            out["prodUsage"] = display_resource_list(dict(zip(names, load.prod_usage, strict=True)))
            out["nodeDelta"] = display_resource_list(dict(zip(names, load.node_delta, strict=True)))
            out["prodDelta"] = display_resource_list(dict(zip(names, load.prod_delta, strict=True)))
            out["nodeEstimated"] = display_resource_list(dict(zip(names, load.node_estimated, strict=True)))
            out["nodeDeltaPods"] = sorted(load.node_delta_pods)
            out["prodDeltaPods"] = sorted(load.prod_delta_pods)
            out["nodeEstimatedPods"] = sorted(info.key for info in load.pods.values() if info.estimated is not None)
        return out


def new_load_aware(args: dict[str, Any], handle: Handle) -> LoadAwareScheduling:
    """Factory: decode, default and validate the args, then build the plugin.

    Raises:
        ArgsError: invalid args (see :func:`decode_args`).
    """
    return LoadAwareScheduling(decode_args(args), handle)
