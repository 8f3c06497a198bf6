"""The ElasticQuota plugin (upstream ``pkg/scheduler/plugins/elasticquota/plugin.go``).

- PreFilter: the pod's quota must hold ``used + request <= runtime`` (max when
  enableRuntimeQuota is false) in every dimension of its limit, the request masked to the quota's
  max names; a non-preemptible pod must also fit ``nonPreemptibleUsed + request <= min``; with
  enableCheckParentQuota every ancestor below the root is checked too. Failures are
  Unschedulable with upstream's messages (``Insufficient quotas, quotaName: ..., runtime: ...,
  used: ..., pod's request: ..., exceedDimensions: [...]``).
- Reserve/Unreserve need no code: the cache's assume/forget delivers the pod bound/unbound to
  the listener, which moves it into/out of ``used``.
- PostFilter (``/preempt``): :mod:`app.plugins.elasticquota.preempt` narrows kube-scheduler's victims.
- PostFilter inside the service (``enablePreemption``, on by default as upstream lists ElasticQuota under
  ``postFilter``): kube-scheduler never calls ``/preempt`` for a pod that fits in-tree and fails only
  our quota check (its dry run runs in-tree filters only and keeps only nodes with victims), so when
  PreFilter rejects a pod for its quota's runtime, ``/filter`` runs upstream's ElasticQuota preemption
  here: victims of the same quota with lower priority (:meth:`ElasticQuota.select_candidates`), evicted
  through ``handle.client.evict`` (the Eviction API; a PodDisruptionBudget's 429 is logged, never
  turned into a delete) and ``status.nominatedNodeName`` set when the client can patch. The filter
  still answers the node failed; the pod is retried and fits once the victims are gone.
- Background: the status writer, and the over-use revoke loop (:mod:`app.plugins.elasticquota.revoke`),
  only with ``monitorAllQuotas: true`` as upstream; evictions go through ``handle.client.evict``
  (recorded, not executed, by the file source), at most :data:`MAX_EVICTIONS_PER_CYCLE` per cycle.
- REST under ``/apis/v1/plugins/ElasticQuota``: ``quotas``, ``quotas/{name}`` (upstream's paths),
  ``quota/{name}``, ``tree``, ``evictions``.

With no ElasticQuota objects in the cluster (other than the reserved root/system/default ones)
the plugin passes every pod and keeps every victim.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from typing import Any, ClassVar

from prometheus_client.core import GaugeMetricFamily

from app.api import elasticquota as n
from app.api.quantity import format_resource, parse
from app.api.timeparse import format_time
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodError, PodInfo
from app.client.errors import ApiError, MethodNotAllowed, NotFound
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import (
    BackgroundPlugin,
    PostFilterPlugin,
    PreemptionPlugin,
    PreFilterPlugin,
    ReservationNominator,
    ServiceProvider,
)
from app.framework.preemption import Candidate
from app.framework.status import SUCCESS, Status
from app.plugins.elasticquota.args import ElasticQuotaArgs, decode_args
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.preempt import (
    PENDING_TIMEOUT,
    PendingPreemption,
    is_terminating,
    not_eligible_reason,
    quota_candidates,
    select_victims,
    still_pending,
)
from app.plugins.elasticquota.reservations import ReservationUsage, usage_key
from app.plugins.elasticquota.resourcelist import add, go_list, less_equal, mask, print_resource_list
from app.plugins.elasticquota.revoke import RevokeController, pods_to_revoke
from app.plugins.elasticquota.statuswriter import STATUS_SYNC_INTERVAL, StatusWriter, same_definition
from app.plugins.elasticquota.summary import quota_summaries, quota_summary, quota_tree

log = logging.getLogger(__name__)

NAME = "ElasticQuota"
#: Evictions sent per revoke cycle at most (the rate limit on top of revokePodInterval).
MAX_EVICTIONS_PER_CYCLE = 10
#: Recent evictions kept for the ``evictions`` REST view.
RECENT_EVICTIONS = 100
#: CycleState key PreFilter writes (the quota's name) when the pod exceeds its own quota's runtime: the
#: one rejection preempting pods of that quota can cure.
STATE_QUOTA_EXCEEDED = f"{NAME}/quotaExceeded"


class ElasticQuota(
    CacheListener, PreFilterPlugin, PostFilterPlugin, PreemptionPlugin, BackgroundPlugin, ServiceProvider
):
    """Quota admission at PreFilter, quota-aware preemption and over-use revoke. See the module docstring."""

    #: Upstream's plugin name (the Go package's ``Name``): the registry key and what ``name`` answers.
    NAME: ClassVar[str] = NAME
    name = NAME

    def __init__(self, args: ElasticQuotaArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.manager = QuotaManager(args)
        self.reservations = ReservationUsage()
        self._nominators: list[ReservationNominator] | None = None
        self.revoker = RevokeController(args.delay_evict_time)
        self.evictions: deque[dict[str, Any]] = deque(maxlen=RECENT_EVICTIONS)
        self._evicted: set[str] = set()
        #: preemptions under way, by preemptor uid (dropped after PENDING_TIMEOUT)
        self.preempting: dict[str, PendingPreemption] = {}
        handle.add_listener(self)

    # ------------------------------------------------------------------ events
    def on_node(self, name: str, node: NodeState | None) -> None:
        """Keep the cluster's allocatable total."""
        self.manager.set_node(name, node.allocatable if node is not None else None)

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Move the pod's request/used between quotas."""
        pod = new if new is not None else old
        if pod is not None:
            self.manager.set_pod(pod.uid or pod.key, new)
            for name in self.reservations.set_pod(pod.uid or pod.key, new):
                self.manager.set_pod(usage_key(name), self.reservations.synthetic(name))
            if self.preempting and (new is None or new.node_name):
                self.preempting.pop(pod.uid, None)  # the preemptor is bound or gone: its preemption is over

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Record an ElasticQuota change (the tree is rebuilt on the next read), or a Reservation's
        (its unallocated remainder is counted against its quota, :mod:`.reservations`).

        Raises:
            PodError: a Reservation's template is malformed (it then counts nothing; the cache logs it).
        """
        if kind == "Reservation":
            try:
                synthetic = self.reservations.set_reservation(key, obj)
            except PodError:
                self.manager.set_pod(usage_key(key), None)
                raise
            self.manager.set_pod(usage_key(key), synthetic)
            return
        if kind != "ElasticQuota":
            return
        name = key.rsplit("/", 1)[-1]
        current = self.manager.objects.get(name)
        if obj is None and current is not None and _key_of(current) != key:
            return  # a same-named quota in another namespace is the live one
        if obj is not None and current is not None and _key_of(current) == key and same_definition(current, obj):
            self.manager.objects[name] = obj  # only the status writer's fields changed: the tree stands
            return
        self.manager.set_quota_object(name, obj)

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Check the pod's quota (and ancestors when enabled); see the module docstring."""
        mgr = self.manager
        if not mgr.active:
            return SUCCESS
        quota_name = mgr.quota_name_of(pod.labels, pod.namespace)
        if self.args.enable_runtime_quota:
            mgr.refresh_runtime(quota_name)
        info = mgr.quotas[quota_name]
        limit = mgr.used_limit(info)
        pod_req = self._request_beyond_reservation(pod, quota_name, mask(pod.requests, info.max))
        ok, exceeded = less_equal(add(pod_req, info.used), limit)
        if not ok:
            state.write(STATE_QUOTA_EXCEEDED, quota_name)
            return Status.unschedulable(
                f"Insufficient quotas, quotaName: {quota_name}, runtime: {print_resource_list(limit)}, "
                f"used: {print_resource_list(info.used)}, pod's request: {print_resource_list(pod_req)}, "
                f"exceedDimensions: {go_list(exceeded)}"
            )
        if n.is_pod_non_preemptible(pod.labels):
            ok, exceeded = less_equal(add(pod_req, info.np_used), info.min)
            if not ok:
                return Status.unschedulable(
                    f"Insufficient non-preemptible quotas, quotaName: {quota_name}, "
                    f"min: {print_resource_list(info.min)}, "
                    f"nonPreemptibleUsed: {print_resource_list(info.np_used)}, "
                    f"pod's request: {print_resource_list(pod_req)}, exceedDimensions: {go_list(exceeded)}"
                )
        if self.args.enable_check_parent_quota:
            return self._check_parents(info.parent, [info.parent, quota_name], pod_req)
        return SUCCESS

    def _request_beyond_reservation(self, pod: PodInfo, quota_name: str, pod_req: dict[str, int]) -> dict[str, int]:
        """``pod_req`` less what a reservation of the same quota already holds for the pod: that part is
        counted in ``used`` through the reservation (:mod:`.reservations`), so it must not count twice. The
        reservation covering the most (summed share of each request) is assumed taken."""
        if not self.reservations.any_active():
            return pod_req
        if self._nominators is None:
            fw = self.handle.framework
            self._nominators = [p for p in fw.plugins if isinstance(p, ReservationNominator)] if fw else []
        best: dict[str, int] = {}
        best_share = 0.0
        for nominator in self._nominators:
            for name, remaining in nominator.reservations_for(pod):
                base = self.reservations.base_pod(name)
                if base is None or self.manager.quota_name_of(base.labels, base.namespace) != quota_name:
                    continue
                covered = {r: min(v, remaining.get(r, 0)) for r, v in pod_req.items() if v > 0}
                share = sum(covered[r] / pod_req[r] for r in covered)
                if share > best_share:
                    best, best_share = covered, share
        return {r: v - best.get(r, 0) for r, v in pod_req.items()} if best else pod_req

    def _check_parents(self, name: str, topo: list[str], pod_req: dict[str, int]) -> Status:
        """``checkQuotaRecursive``: every ancestor below the root must hold ``used + request <= runtime``."""
        seen: set[str] = set()
        while name != n.ROOT_QUOTA_NAME:
            info = self.manager.quotas.get(name)
            if info is None or name in seen:
                return Status.error(f"Could not find the elasticQuota {name}, quotaNameTopo: {go_list(topo)}")
            seen.add(name)
            limit = self.manager.used_limit(info)
            ok, exceeded = less_equal(mask(add(pod_req, info.used), pod_req), limit)
            if not ok:
                return Status.unschedulable(
                    f"Insufficient quotas, quotaNameTopo: {go_list(topo)}, runtime: {print_resource_list(limit)}, "
                    f"used: {print_resource_list(info.used)}, pod's request: {print_resource_list(pod_req)}, "
                    f"exceedDimensions: {go_list(exceeded)}"
                )
            topo = [info.parent, *topo]
            name = info.parent
        return SUCCESS

    # ------------------------------------------------------------------ PostFilter
    def select_victims(
        self, state: CycleState, pod: PodInfo, node: str, victims: list[PodInfo]
    ) -> tuple[list[PodInfo], Status]:
        """Keep only victims quota rules allow and drop nodes where they would not make room.

        Every node is dropped while a preemption of ours for the pod is under way (decided by ``/filter``
        in this scheduling cycle or an earlier one, its victims not gone yet): kube-scheduler's own
        preemption must not evict a second set of victims for it."""
        if not self.manager.active:
            return victims, SUCCESS
        pending = self.preempting.get(pod.uid)
        if pending is not None and still_pending(pending, self.handle.snapshot, state.now):
            return [], Status.unschedulable(f"preemption for pod {pod.name} already under way on node {pending.node}")
        return select_victims(
            self.manager,
            self.handle.snapshot,
            self.args.disable_default_quota_preemption,
            pod,
            node,
            victims,
            state.now,
        )

    # ------------------------------------------------------------------ preemption inside the service
    def select_candidates(
        self, state: CycleState, pod: PodInfo, pod_obj: dict[str, Any], status: Status, nodes: list[str]
    ) -> list[Candidate]:
        """Upstream ElasticQuota PostFilter's candidates (``preemption.Evaluator`` over its
        ``SelectVictimsOnNode``, pkg/scheduler/plugins/elasticquota/preempt.go) among ``nodes``.

        Only for this plugin's own rejection of the pod's quota runtime (not the non-preemptible min
        check, which evicting preemptible pods cannot cure) and with ``enablePreemption``. The pod must be
        eligible (:func:`~app.plugins.elasticquota.preempt.not_eligible_reason`); victims are pods of its
        quota with a lower priority, not labelled ``preemptible: "false"``, and not in the default quota
        when ``disableDefaultQuotaPreemption`` (:func:`~app.plugins.elasticquota.preempt.can_preempt`).
        With ``enableCheckParentQuota`` the ancestors are not re-checked (neither does upstream's reprieve).
        """
        quota_name = state.get(STATE_QUOTA_EXCEEDED)
        if not self.args.enable_preemption or status.plugin != self.name or not isinstance(quota_name, str):
            return []
        now = state.now
        for uid in [u for u, p in self.preempting.items() if now - p.started >= PENDING_TIMEOUT]:
            del self.preempting[uid]
        snapshot = self.handle.snapshot
        why = not_eligible_reason(self.manager, snapshot, pod, pod_obj, self.preempting.get(pod.uid), now)
        if why:
            log.debug("pod %s does not preempt: %s", pod.key, why)
            return []
        return quota_candidates(
            self.manager, snapshot, self.args.disable_default_quota_preemption, pod, quota_name, nodes, now
        )

    def nominate(self, state: CycleState, pod: PodInfo, candidate: Candidate) -> None:
        """Record the preemption as under way (the pod does not preempt again while its victims remain)."""
        self.preempting[pod.uid] = PendingPreemption(candidate.node, tuple(v.uid for v in candidate.victims), state.now)

    async def prepare_candidate(self, pod: PodInfo, candidate: Candidate) -> None:
        """Upstream ``prepareCandidate``: evict each victim (``handle.client.evict``, skipping pods already
        terminating), then patch the preemptor's ``status.nominatedNodeName``. An eviction refused
        (a PodDisruptionBudget's 429, a gone pod, ...) is logged and recorded in the ``evictions`` view,
        never retried as a delete; the node is then not nominated and the preemption record dropped, so
        the pod's next attempt chooses again. A client that cannot patch pods leaves the nomination out.
        Never raises."""
        client = self.handle.client
        quota = self.manager.quota_name_of(pod.labels, pod.namespace)
        reason = f"preempted by {pod.namespace}/{pod.name} on node {candidate.node} (quota {quota})"
        failed = False
        for victim in candidate.victims:
            if is_terminating(self.handle.snapshot.pod_object(victim.uid)):
                continue
            record = {
                "time": format_time(self.handle.now()),
                "quota": quota,
                "namespace": victim.namespace,
                "name": victim.name,
                "uid": victim.uid,
                "reason": reason,
                "error": "",
            }
            try:
                await client.evict(victim.namespace, victim.name, victim.uid, reason)
            except ApiError as exc:
                failed = True
                record["error"] = str(exc)
                log.warning("preemption: could not evict %s/%s: %s", victim.namespace, victim.name, exc)
            self.evictions.append(record)
        if failed:
            self.preempting.pop(pod.uid, None)
            return
        try:
            await client.patch(
                "Pod",
                pod.name,
                {"status": {"nominatedNodeName": candidate.node}},
                namespace=pod.namespace,
                subresource="status",
            )
        except MethodNotAllowed:
            log.info("preemption: the API client cannot patch pods; %s is not nominated", pod.key)
        except ApiError as exc:
            log.warning("preemption: could not nominate %s for %s: %s", candidate.node, pod.key, exc)

    # ------------------------------------------------------------------ revoke
    async def run_background(self) -> None:
        """Two loops for the app's lifetime: every second, write runtime, request and used back to each
        ElasticQuota (:mod:`app.plugins.elasticquota.statuswriter`, as upstream's quota controller); and
        every ``revokePodInterval``, evict pods of quotas over their runtime for longer than
        ``delayEvictTime``, only with ``monitorAllQuotas`` and ``enableRuntimeQuota`` (as upstream).
        Both write only while ``handle.is_leader()`` (a standby replica keeps its cache warm only).
        An exception in either ends both (a task group) and reaches the service's loop supervisor, which logs
        and counts it and runs them again after a backoff (:mod:`app.sources.loops`)."""
        revoke = self.args.monitor_all_quotas and self.args.enable_runtime_quota
        if not revoke:
            log.info("monitorAllQuotas not true: the ElasticQuota over-use revoke loop does not run")
        async with asyncio.TaskGroup() as group:
            group.create_task(self._status_loop())
            if revoke:
                group.create_task(self._revoke_loop())

    async def _status_loop(self) -> None:
        writer = StatusWriter(self.manager)
        while True:
            await asyncio.sleep(STATUS_SYNC_INTERVAL)
            if self.handle.has_synced() and self.handle.is_leader() and self.manager.active:
                await writer.sync_once(self.handle.client)

    async def _revoke_loop(self) -> None:
        interval = max(self.args.revoke_pod_interval, 0.05)
        while True:
            await asyncio.sleep(interval)
            if self.handle.has_synced() and self.handle.is_leader():
                await self.revoke_once()

    async def revoke_once(self) -> list[dict[str, Any]]:
        """One revoke cycle; returns the evictions it attempted (also kept for the REST view).

        Evictions go through ``handle.client.evict`` (the Eviction API; the file source records them)."""
        mgr = self.manager
        now = self.handle.now()
        mgr.refresh_all()
        self.revoker.sync(mgr, now)
        snapshot = self.handle.snapshot
        self._evicted &= set(snapshot.pods)
        done: list[dict[str, Any]] = []
        for quota in self.revoker.due(mgr, now):
            info = mgr.quotas[quota]
            reason = (
                f"quota {quota} over-used: used {print_resource_list(info.used)} > "
                f"runtime {print_resource_list(info.runtime)}"
            )
            for pod in pods_to_revoke(mgr, snapshot, quota, now):
                if pod.uid in self._evicted:
                    continue
                if len(done) >= MAX_EVICTIONS_PER_CYCLE:
                    return done
                record = {
                    "time": format_time(now),
                    "quota": quota,
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "uid": pod.uid,
                    "reason": reason,
                    "error": "",
                }
                try:
                    await self.handle.client.evict(pod.namespace, pod.name, pod.uid, reason)
                    self._evicted.add(pod.uid)
                except ApiError as exc:
                    record["error"] = str(exc)
                    log.warning("failed to revoke pod %s/%s of quota %s: %s", pod.namespace, pod.name, quota, exc)
                self.evictions.append(record)
                done.append(record)
        return done

    # ------------------------------------------------------------------ REST
    def routes(self) -> list[tuple[str, Any]]:
        """REST views (paths relative to ``/apis/v1/plugins/ElasticQuota``)."""
        return [
            ("/quotas", self._get_quotas),
            ("/quotas/{name}", self._get_quota),
            ("/quota/{name}", self._get_quota),
            ("/tree", self._get_tree),
            ("/evictions", self._get_evictions),
        ]

    def collect_metrics(self) -> Iterable[GaugeMetricFamily]:
        """``koord_elasticquota_{min,max,runtime,used}{quota, resource}`` of every quota but the root, runtimes
        refreshed (cpu in cores, memory in bytes, others in their units)."""
        self.manager.refresh_all()
        families = {
            f: GaugeMetricFamily(
                f"koord_elasticquota_{f}", f"ElasticQuota {f} by quota and resource.", labels=["quota", "resource"]
            )
            for f in ("min", "max", "runtime", "used")
        }
        for name, info in sorted(self.manager.quotas.items()):
            if name == n.ROOT_QUOTA_NAME:
                continue
            for field_name, family in families.items():
                for resource, value in sorted(getattr(info, field_name).items()):
                    family.add_metric([name, resource], float(parse(format_resource(resource, value))))
        return list(families.values())

    async def _get_quotas(self) -> dict[str, Any]:
        """Every quota's summary (upstream ``GET /quotas``), by name."""
        return quota_summaries(self.manager)

    async def _get_quota(self, name: str) -> dict[str, Any]:
        """One quota's summary with its pods (``podCache``).

        Raises:
            NotFound: no quota ``name`` (``cannot find quota <name>``; the server answers 404).
        """
        mgr = self.manager
        mgr.ensure()
        info = mgr.quotas.get(name)
        if info is None:
            raise NotFound(f"cannot find quota {name}")
        mgr.refresh_runtime(name)
        return quota_summary(mgr, info, include_pods=True)

    async def _get_tree(self) -> dict[str, Any]:
        """The quota tree from the root with min / max / runtime / used / request per quota."""
        return quota_tree(self.manager)

    async def _get_evictions(self) -> list[dict[str, Any]]:
        """Recent over-use revoke evictions, oldest first."""
        return list(self.evictions)


def _key_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def new_elastic_quota(args: dict[str, Any], handle: Handle) -> ElasticQuota:
    """Build the plugin from its args (upstream defaults applied, validated).

    Raises:
        ArgsError: invalid args (the framework reports them as ``pluginConfig[ElasticQuota].args.<field>``).
    """
    return ElasticQuota(decode_args(args), handle)
