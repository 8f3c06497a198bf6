"""The framework runtime: builds the enabled plugins and runs them at each extension point.

Mirrors kube-scheduler's ``frameworkImpl`` (pkg/scheduler/framework/runtime/framework.go):
filter plugins run in order and a node failing one is not shown to the next; scores are
weighted per plugin. The weighted total here is normalised back to 0..100
(``sum(score*weight) // sum(weight)``) so it converts to the extender's 0..10 range. The binding
cycle's points (Reserve, Permit, PreBind, Bind, PostBind, Unreserve) have one runner each; their
order and the assume/forget around them live in :mod:`app.framework.bindingcycle`.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.cache.listener import CacheListener
from app.cache.podinfo import PodInfo
from app.client.errors import ApiError
from app.framework.config import ArgsError, ConfigError, SchedulerConfig
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    BindPlugin,
    FilterFailures,
    FilterPlugin,
    NodeBatch,
    NormalizeScorePlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreemptionPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    UnschedulablePlugin,
)
from app.framework.preemption import Candidate, pick_one_node_for_preemption, pod_start_time
from app.framework.registry import Registry
from app.framework.status import SUCCESS, Code, Status
from app.framework.waiting import WaitingPod, WaitingPods

log = logging.getLogger(__name__)

#: A filter plugin's class attribute: True when every Status its ``filter_nodes`` fails a node with already
#: carries the plugin's name (``Status.plugin``), so :meth:`Framework.filter_survivors` merges its failures
#: without attributing them (~10 us per /filter with a few dozen failing nodes).
ATTRIBUTED_STATUSES = "attributed_statuses"


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """Scores of one batch.

    Attributes:
        per_plugin: plugin name -> int64 scores 0..100 (after normalisation), parallel to the batch.
        total: weighted total 0..100 per node (when one plugin scored alone, its very array in ``per_plugin``:
            neither is written to).
    """

    per_plugin: dict[str, npt.NDArray[np.int64]]
    total: npt.NDArray[np.int64]

    def extender_scores(self) -> npt.NDArray[np.int64]:
        """Totals scaled to the extender's 0..MAX_EXTENDER_PRIORITY range (integer division, as Go does)."""
        return self.total * MAX_EXTENDER_PRIORITY // MAX_NODE_SCORE


class Framework:
    """The enabled plugins, grouped by extension point, and the runners of each point.

    Args:
        config: the enabled plugins in order, with weights and args.
        registry: plugin factories by name.
        handle: what the plugins get (snapshot lister, client, waiting pods, clock); the framework
            keeps the same waiting-pods map and rejects a waiting pod whose Pod is deleted
            (upstream ``RejectWaitingPod`` from the scheduler's delete handler).

    Raises (from the constructor):
        ConfigError: a plugin's args are invalid; the path names ``pluginConfig`` and the field.
    """

    def __init__(self, config: SchedulerConfig, registry: Registry, handle: Handle) -> None:
        self.handle = handle
        #: The configuration the framework was built from (``GET /apis/v1/snapshot`` answers it).
        self.config = config
        handle.framework = self
        self.waiting_pods = handle.waiting_pods
        self.plugins: list[Plugin] = []
        self.weights: dict[str, int] = {}
        for spec in config.plugins:
            try:
                plugin = registry.factory(spec.name)(dict(spec.args), handle)
            except ArgsError as exc:
                raise ConfigError(f"pluginConfig[{spec.name}].args.{exc.field}", exc.detail) from None
            self.plugins.append(plugin)
            self.weights[spec.name] = spec.weight
        self.pre_filter_plugins = [p for p in self.plugins if isinstance(p, PreFilterPlugin)]
        self.filter_plugins = [p for p in self.plugins if isinstance(p, FilterPlugin)]
        #: filter plugins whose failing statuses all carry their own name (:data:`ATTRIBUTED_STATUSES`)
        self._self_attributed = {p.name for p in self.filter_plugins if getattr(p, ATTRIBUTED_STATUSES, False)}
        self.pre_score_plugins = [p for p in self.plugins if isinstance(p, PreScorePlugin)]
        self.score_plugins = [p for p in self.plugins if isinstance(p, ScorePlugin)]
        # isinstance on a runtime Protocol walks its attributes (tens of microseconds): decide once
        self._normalizers: dict[str, NormalizeScorePlugin] = {
            p.name: p for p in self.score_plugins if isinstance(p, NormalizeScorePlugin)
        }
        self.reserve_plugins = [p for p in self.plugins if isinstance(p, ReservePlugin)]
        self.permit_plugins = [p for p in self.plugins if isinstance(p, PermitPlugin)]
        self.pre_bind_plugins = [p for p in self.plugins if isinstance(p, PreBindPlugin)]
        self.bind_plugins = [p for p in self.plugins if isinstance(p, BindPlugin)]
        self.post_bind_plugins = [p for p in self.plugins if isinstance(p, PostBindPlugin)]
        self.post_filter_plugins = [p for p in self.plugins if isinstance(p, PostFilterPlugin)]
        self.preemption_plugins = [p for p in self.plugins if isinstance(p, PreemptionPlugin)]
        self.unschedulable_plugins = [p for p in self.plugins if isinstance(p, UnschedulablePlugin)]
        handle.add_listener(_RejectDeletedWaitingPods(self.waiting_pods))

    def plugin(self, name: str) -> Plugin | None:
        """The enabled plugin called ``name``, if any."""
        return next((p for p in self.plugins if p.name == name), None)

    def new_cycle(self) -> CycleState:
        """A fresh cycle state stamped with the handle's clock."""
        return CycleState(self.handle.now())

    # ------------------------------------------------------------------ filter
    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Run every PreFilter; a plugin answering SKIP is recorded in ``state.skip_filter``; the first
        failing status is returned with its plugin set (SUCCESS when none fails)."""
        for plugin in self.pre_filter_plugins:
            status = plugin.pre_filter(state, pod)
            if status.is_success():
                continue
            if status.is_skip():
                state.skip_filter.add(plugin.name)
                continue
            return status.with_plugin(plugin.name)
        return SUCCESS

    def run_filters(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> FilterFailures:
        """Filter ``batch``: a node failing a plugin is not shown to the later ones; plugins whose
        PreFilter skipped the pod are not run.

        Returns the failing positions of ``batch`` with the first failing status (plugin set).
        """
        return self.filter_survivors(state, pod, batch)[0]

    def filter_survivors(
        self, state: CycleState, pod: PodInfo, batch: NodeBatch
    ) -> tuple[FilterFailures, npt.NDArray[np.int64] | None]:
        """:meth:`run_filters`, with the positions of ``batch`` that passed every plugin, ascending (an int64
        array), or None when none failed (all of them passed): the caller need not work them out again
        from the failures.

        The nodes still alive after a plugin that failed some are made into a batch (:meth:`NodeBatch.subset`,
        a list of their names) only when a later plugin runs: for a plain pod the plugins after
        LoadAwareScheduling skip it at PreFilter, and the subset of ~200 names would be built for no one.
        """
        failures: FilterFailures = {}
        sub = batch  # the nodes still alive, as a batch, once ``stale`` is False
        alive: npt.NDArray[np.int64] | None = None  # their positions in ``batch`` (None: all of them)
        stale = False  # ``alive`` moved on since ``sub`` was made (never while ``alive`` is None)
        for plugin in self.filter_plugins:
            if (len(batch) if alive is None else len(alive)) == 0:
                break
            if plugin.name in state.skip_filter:
                continue
            if stale and alive is not None:
                sub = batch.subset(alive)
                stale = False
            failed = plugin.filter_nodes(state, pod, sub)
            if not failed:
                continue
            if plugin.name in self._self_attributed:  # its statuses are attributed already: merged as they are
                if alive is None:
                    failures.update(failed)
                else:
                    failures.update(zip(map(alive.tolist().__getitem__, failed), failed.values(), strict=True))
            else:
                # plugins share one Status per reason: attribute each distinct one once, then map the positions
                # and statuses over with C-level zip/map (the order of ``failed`` kept), not a loop per node
                statuses = failed.values()
                ids = list(map(id, statuses))
                distinct = dict(zip(ids, statuses, strict=True))
                attributed = {k: s.with_plugin(plugin.name) for k, s in distinct.items()}
                where = failed.keys() if alive is None else map(alive.tolist().__getitem__, failed)
                failures.update(zip(where, map(attributed.__getitem__, ids), strict=True))
            keep = np.ones(len(sub), dtype=bool)
            keep[np.fromiter(failed, dtype=np.int64, count=len(failed))] = False
            alive = np.flatnonzero(keep) if alive is None else alive[keep]
            stale = True
        return failures, alive

    def explain_filters(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> dict[str, FilterFailures | None]:
        """Every filter plugin on every node (no short-circuit), for the explain endpoint; None for a
        plugin whose PreFilter skipped the pod."""
        return {
            p.name: (None if p.name in state.skip_filter else p.filter_nodes(state, pod, batch))
            for p in self.filter_plugins
        }

    # ------------------------------------------------------------------ score
    def run_scores(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> ScoreResult:
        """PreScore, then score ``batch`` with every score plugin, normalise, and weight into a 0..100 total.

        A plugin whose PreScore answered SKIP is left out of the scores and of the weight sum, as
        kube-scheduler drops it (``SkipScorePlugins``).

        Raises:
            ScoreError: a PreScore plugin answered a status other than SUCCESS or SKIP.
        """
        for pre in self.pre_score_plugins:
            status = pre.pre_score(state, pod, batch)
            if status.is_skip():
                state.skip_score.add(pre.name)
            elif not status.is_success():
                raise ScoreError(status.with_plugin(pre.name))
        n = len(batch)
        per_plugin: dict[str, npt.NDArray[np.int64]] = {}
        weighted_scores: list[tuple[npt.NDArray[np.int64], int]] = []  # (scores, weight) of each plugin scored
        for plugin in self.score_plugins:
            if plugin.name in state.skip_score:
                continue
            scores = np.asarray(plugin.score_nodes(state, pod, batch), dtype=np.int64)
            normalizer = self._normalizers.get(plugin.name)
            if normalizer is not None:
                scores = np.asarray(normalizer.normalize_scores(state, pod, batch, scores), dtype=np.int64)
            # np.clip builds the dtype's iinfo on every call (~15 us); two ufuncs do the same in ~2
            scores = np.minimum(np.maximum(scores, 0), MAX_NODE_SCORE)
            per_plugin[plugin.name] = scores
            weighted_scores.append((scores, self.weights.get(plugin.name, 1)))
        if len(weighted_scores) == 1 and weighted_scores[0][1] > 0:
            # one plugin scored (a plain pod: the others skip at PreScore): (scores * w) // w is its scores
            total = weighted_scores[0][0]
        else:
            weighted = np.zeros(n, dtype=np.int64)
            weight_sum = 0
            for scores, w in weighted_scores:
                weighted += scores * w
                weight_sum += w
            total = weighted // weight_sum if weight_sum else weighted
        return ScoreResult(per_plugin, total)

    # ------------------------------------------------------------------ binding cycle
    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Reserve on every plugin in order; on failure Unreserve runs, in reverse order, on every
        plugin whose Reserve ran (the failing one included: its Reserve may have half-applied).

        kube-scheduler calls Unreserve on every Reserve plugin; calling it only where Reserve ran
        keeps plugins that never saw the pod out of it. Returns the failure with its plugin set; an
        ERROR reads ``running Reserve plugin "<name>": <message>`` as upstream.
        """
        for i, plugin in enumerate(self.reserve_plugins):
            try:
                status = plugin.reserve(state, pod, node)
            except Exception:  # a plugin bug fails this pod's binding, not the service
                status = _crashed("Reserve", plugin.name)
            if status.is_success() or status.is_skip():
                continue
            self.run_unreserve(state, pod, node, reserved=i + 1)
            return _failed("Reserve", plugin.name, status)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str, reserved: int | None = None) -> None:
        """Unreserve in reverse order on the first ``reserved`` Reserve plugins (all when None: a point
        after Reserve failed); an Unreserve that raises is logged and the others still run."""
        for plugin in reversed(self.reserve_plugins[:reserved]):
            try:
                plugin.unreserve(state, pod, node)
            except Exception:  # keep undoing the others
                log.exception("Unreserve of plugin %s failed", plugin.name)

    def run_permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Permit on every plugin (upstream ``RunPermitPlugins``).

        The first rejection (or error) is returned at once. If no plugin rejects and some answered
        WAIT, the pod is added to :attr:`waiting_pods` with each waiting plugin's timeout (capped at
        15 minutes) and WAIT is returned: await :meth:`wait_on_permit` next.
        """
        waits: dict[str, float] = {}
        for plugin in self.permit_plugins:
            try:
                status, timeout = plugin.permit(state, pod, node)
            except Exception:  # a plugin bug fails this pod's binding, not the service
                status, timeout = _crashed("Permit", plugin.name), 0.0
            if status.is_success() or status.is_skip():
                continue
            if status.is_wait():
                waits[plugin.name] = timeout
                continue
            return _failed("Permit", plugin.name, status)
        if not waits:
            return SUCCESS
        self.waiting_pods.add(WaitingPod(pod, node, waits))
        return Status.wait(f'one or more plugins asked to wait and no plugin rejected pod "{pod.name}"')

    async def wait_on_permit(self, pod: PodInfo) -> Status:
        """Wait until the waiting pod is allowed or rejected (upstream ``WaitOnPermit``); SUCCESS for a
        pod that does not wait. The pod leaves :attr:`waiting_pods` either way."""
        waiting = self.waiting_pods.get(pod.uid)
        if waiting is None:
            return SUCCESS
        try:
            return await waiting.wait()
        finally:
            if self.waiting_pods.get(pod.uid) is waiting:
                self.waiting_pods.remove(pod.uid)

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """PreBind on every plugin in order, each awaited before the next; the first failure is
        returned (an ERROR, or an exception the plugin raised, reads ``running PreBind plugin "<name>": ...``)."""
        for plugin in self.pre_bind_plugins:
            try:
                status = await plugin.pre_bind(state, pod, node)
            except Exception:  # a plugin bug fails this pod's binding, not the service
                status = _crashed("PreBind", plugin.name)
            if not status.is_success() and not status.is_skip():
                return _failed("PreBind", plugin.name, status)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Bind plugins in order until one does not SKIP; when all skip (or none is enabled) the
        default binder creates the pod's ``Binding`` through ``handle.client`` (upstream DefaultBinder).
        A Binding names the pod by namespace, name and uid: no Pod object is decoded for it.

        Returns SUCCESS when bound; an API refusal reads as its message (e.g. ``pods "x" not found``).
        """
        for plugin in self.bind_plugins:
            try:
                status = await plugin.bind(state, pod, node)
            except Exception:  # a plugin bug fails this pod's binding, not the service
                status = _crashed("Bind", plugin.name)
            if status.is_skip():
                continue
            return SUCCESS if status.is_success() else _failed("Bind", plugin.name, status)
        try:
            await self.handle.client.bind(pod.namespace, pod.name, pod.uid, node)
        except ApiError as exc:
            return Status.error(str(exc), plugin=DEFAULT_BINDER)
        return SUCCESS

    def run_post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """PostBind on every plugin (informational: an exception is logged, the pod stays bound)."""
        for plugin in self.post_bind_plugins:
            try:
                plugin.post_bind(state, pod, node)
            except Exception:  # the pod is bound; a plugin bug must not undo that
                log.exception("PostBind plugin %s failed", plugin.name)

    def run_unschedulable(self, state: CycleState, pod: PodInfo) -> None:
        """Tell every :class:`~app.framework.interfaces.UnschedulablePlugin` that ``pod`` found no feasible
        node in this attempt (an exception is logged; the answer stands)."""
        for plugin in self.unschedulable_plugins:
            try:
                plugin.on_unschedulable(state, pod)
            except Exception:  # a plugin bug must not fail the answer
                log.exception("unschedulable hook of plugin %s failed for pod %s", plugin.name, pod.key)

    # ------------------------------------------------------------------ preemption
    def run_select_victims(
        self, state: CycleState, pod: PodInfo, node: str, victims: list[PodInfo]
    ) -> tuple[list[PodInfo], Status]:
        """Let every PostFilter plugin narrow the victims on ``node``; a failure drops the node."""
        for plugin in self.post_filter_plugins:
            victims, status = plugin.select_victims(state, pod, node, victims)
            if not status.is_success():
                return victims, Status(status.code, status.reasons, plugin.name)
        return victims, SUCCESS

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, pod_obj: dict[str, Any], status: Status, nodes: list[str]
    ) -> tuple[PreemptionPlugin, Candidate] | None:
        """Preemption inside the service for a pod PreFilter rejected with ``status`` (upstream
        ``RunPostFilterPlugins`` with each plugin's ``preemption.Evaluator``).

        For each :class:`~app.framework.interfaces.PreemptionPlugin` in order: its candidates among
        ``nodes``, kept when every Filter plugin passes the pod with the victims removed, then one chosen
        by :func:`~app.framework.preemption.pick_one_node_for_preemption` and handed to the plugin's
        ``nominate``. Returns the plugin and the chosen candidate (the caller runs ``prepare_candidate``
        off the request path), or None. A plugin that raises is logged and skipped.
        """
        for plugin in self.preemption_plugins:
            try:
                candidates = plugin.select_candidates(state, pod, pod_obj, status, nodes)
                if not candidates:
                    continue
                names = [c.node for c in candidates]
                rows, _ = self.handle.snapshot.table.rows_of(names)
                batch = NodeBatch(rows, names, [list(c.victims) for c in candidates])
                failures = self.run_filters(state, pod, batch)
                feasible = [c for i, c in enumerate(candidates) if i not in failures]
                best = pick_one_node_for_preemption(
                    feasible, lambda v: pod_start_time(v, self.handle.snapshot.pod_object(v.uid), state.now)
                )
                if best is None:
                    continue
                plugin.nominate(state, pod, best)
                return plugin, best
            except Exception:  # a plugin bug must not fail the filter answer
                log.exception("PostFilter plugin %s failed for pod %s", plugin.name, pod.key)
        return None

    def describe(self) -> list[dict[str, Any]]:
        """Enabled plugins with their weights and extension points, for inspection."""
        points: dict[str, list[Any]] = {
            "PreFilter": self.pre_filter_plugins,
            "Filter": self.filter_plugins,
            "PostFilter": self.post_filter_plugins,
            "PreScore": self.pre_score_plugins,
            "Score": self.score_plugins,
            "Reserve": self.reserve_plugins,
            "Permit": self.permit_plugins,
            "PreBind": self.pre_bind_plugins,
            "Bind": self.bind_plugins,
            "PostBind": self.post_bind_plugins,
        }
        return [
            {
                "name": p.name,
                "weight": self.weights.get(p.name, 1),
                "extensionPoints": [k for k, ps in points.items() if p in ps],
            }
            for p in self.plugins
        ]


class ScoreError(Exception):
    """A PreScore plugin failed for the pod; ``status`` carries the plugin and the message."""

    def __init__(self, status: Status) -> None:
        super().__init__(f"{status.plugin}: {status.message}")
        self.status = status


#: The name failures of the default binder carry (upstream's ``DefaultBinder`` plugin).
DEFAULT_BINDER = "DefaultBinder"


def _crashed(point: str, plugin: str) -> Status:
    """Log the exception ``plugin`` is raising at ``point`` and turn it into an ERROR status carrying its
    message (to be called from an ``except`` block)."""
    exc = sys.exc_info()[1]
    log.exception("%s plugin %s failed", point, plugin)
    return Status.error(str(exc) or type(exc).__name__)


def _failed(point: str, plugin: str, status: Status) -> Status:
    """A failing status of ``plugin`` at ``point``: rejections keep their reasons, errors read
    ``running <point> plugin "<plugin>": <message>`` (upstream's wording)."""
    if status.code == Code.ERROR:
        return Status.error(f'running {point} plugin "{plugin}": {status.message}', plugin=plugin)
    return status.with_plugin(plugin)


class _RejectDeletedWaitingPods(CacheListener):
    """Rejects a pod waiting at Permit once its Pod is deleted (``removed``, as upstream)."""

    def __init__(self, waiting: WaitingPods) -> None:
        self.waiting = waiting

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Reject the waiting pod of a deleted Pod."""
        if new is None and old is not None and len(self.waiting):
            self.waiting.reject(old.uid)
