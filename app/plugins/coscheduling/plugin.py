"""The Coscheduling plugin: gang scheduling through a stock kube-scheduler (upstream
``pkg/scheduler/plugins/coscheduling/coscheduling.go`` and ``core/core.go``).

- PreFilter (``/filter``, and the binding cycle's re-check in ``/bind``), for a pod naming a gang, what
  upstream's PreEnqueue/BeforePreFilter check, UnschedulableAndUnresolvable with upstream's wording:
  ``can't find gang, gangName: <ns/gang>, podName: <ns/pod>``; ``gang has not init, gangName: ...``;
  a group already once satisfied under ``once-satisfied`` passes; otherwise every gang of the group must
  exist, be initialised and have at least minMember children (``gangGroup [..] basic check: memberGangs
  [..] child pod not collect enough, current gang: .., podName: ..``). Then two checks of our own: a gang
  whose wait at Permit is not shorter than the bind extender's ``httpTimeout`` (args ``bindHTTPTimeout``)
  is refused, and the fail-fast capacity check (:mod:`app.plugins.coscheduling.capacity`).
- Permit (``/bind``): the member joins the gang's waiting set; when every gang of the group satisfies its
  match policy, every waiting member of the group is allowed (their ``/bind`` requests go on together)
  and the binding members are recorded; otherwise Wait with the gang's wait time (capped at 15 minutes by
  the framework). A pod whose gang is gone: ``Gang not found``.
- Unreserve (timeout, rejection, a later failure): the member is pending again; in Strict mode, unless
  the group is once satisfied under ``once-satisfied``, every still-waiting member of the group is
  rejected (``Gang "<id>" gets rejected due to Pod "<name>" in Unreserve``, attributed to upstream's
  ``JobRejectPlugin``); NonStrict leaves the others waiting.
- Unschedulable (upstream's AfterPostFilter): a Strict member that finds no feasible node (every candidate
  of ``/filter`` failed, or the bind's re-check refused it) rejects the group's waiting members the same
  way (``gets rejected due to member pod "<ns/name>" is unschedulable``), so they stop holding resources
  the gang cannot complete with.
- PreBind: members allowed together (more than one) get ``internal.scheduling.koordinator.sh/
  bind-gang-group-id`` and ``bind-gang-member-count`` (and the deprecated ``scheduling.koordinator.sh/``
  twins), written through ``handle.client``; a pod bound alone has them removed if it carries them.
- PostBind: the member is bound; its group is once resource satisfied.
- Background (leader only): the PodGroup status controller (:mod:`app.plugins.coscheduling.status`), and
  the retry of members refused while their gang was incomplete, once it is complete: a merge patch of
  ``gang.scheduling.koordinator.sh/gang-state`` on each, which moves it from kube-scheduler's
  unschedulable queue back to its active queue (:mod:`app.plugins.coscheduling.retry`).
- REST under ``/apis/v1/plugins/Coscheduling``: ``gangs`` and ``gang/{namespace}/{name}`` (upstream's).

What a stock kube-scheduler cannot give an extender is not built: PreEnqueue's representative pod and the
serialised gang scheduling context (NextPod), gang preemption and network topology. Nothing here holds
a thread: a waiting member is one open request and one timer, and allowing or rejecting a group touches
only its undecided members.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from app.api import coscheduling as n
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo
from app.client.errors import ApiError, NotFound
from app.framework.cyclestate import CycleState
from app.framework.duration import format_duration
from app.framework.handle import Handle
from app.framework.interfaces import (
    BackgroundPlugin,
    PermitPlugin,
    PodVerdictPlugin,
    PostBindPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    ReservePlugin,
    ServiceProvider,
    UnschedulablePlugin,
)
from app.framework.status import SUCCESS, Status
from app.framework.waiting import MAX_TIMEOUT
from app.plugins.coscheduling.args import CoschedulingArgs, decode_args
from app.plugins.coscheduling.cache import GangCache
from app.plugins.coscheduling.capacity import ClusterFree, members_to_place, needed_requests, shortfall_message
from app.plugins.coscheduling.gang import Gang
from app.plugins.coscheduling.retry import RETRY_BURST, RETRY_QPS, GangRetry, TokenBucket
from app.plugins.coscheduling.status import STATUS_SYNC_INTERVAL, StatusController
from app.plugins.coscheduling.summary import gang_summary

log = logging.getLogger(__name__)

NAME = "Coscheduling"
#: Seconds between two looks for refused members whose gang became complete.
RETRY_INTERVAL = 0.1
#: Upstream's ``frameworkext.JobRejectPlugin``: the plugin a group rejection is attributed to.
JOB_REJECT_PLUGIN = "JobRejectPlugin"

_BIND_ANNOTATIONS = (
    n.ANNOTATION_BIND_GANG_GROUP_ID,
    n.ANNOTATION_BIND_GANG_MEMBER_COUNT,
    n.DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID,
    n.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT,
)


class _NodeEvents(CacheListener):
    """Keeps the fail-fast check's free capacity in step: a node event invalidates it, a pod event
    touches the node(s) the pod was and is on."""

    def __init__(self, free: ClusterFree) -> None:
        self.free = free

    def on_node(self, name: str, node: NodeState | None) -> None:
        """Any node change: the rows are rebuilt on the next check."""
        self.free.invalidate()

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """The nodes whose requested the change may have moved are re-read on the next check."""
        if old is not None and old.node_name:
            self.free.touch(old.node_name)
        if new is not None and new.node_name:
            self.free.touch(new.node_name)


class Coscheduling(
    PreFilterPlugin,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    PostBindPlugin,
    BackgroundPlugin,
    ServiceProvider,
    PodVerdictPlugin,
    UnschedulablePlugin,
):
    """Gang scheduling; see the module docstring."""

    #: Upstream's plugin name: the registry key and what ``name`` answers.
    NAME: ClassVar[str] = NAME
    name = NAME

    def __init__(self, args: CoschedulingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.cache = GangCache(args, handle.snapshot, handle.now)
        self.free = ClusterFree(handle.snapshot)
        self.retry = GangRetry(self.cache, handle.now)
        self.retry_bucket = TokenBucket(RETRY_QPS, RETRY_BURST)
        handle.add_listener(self.cache)
        handle.add_listener(self.retry)  # after the gang cache: it reads the gangs each event left
        handle.add_listener(_NodeEvents(self.free))

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Gang checks of a member (see the module docstring); SUCCESS for a pod without a gang. A member
        refused because its gang is not complete yet is recorded for a retry once it is
        (:mod:`app.plugins.coscheduling.retry`)."""
        status, incomplete = self._verdict(pod)
        if incomplete:
            name = n.gang_name(pod.labels, pod.annotations)
            self.retry.record(n.gang_id(pod.namespace, name), pod)
        return SUCCESS if status is None else status

    def verdict(self, pod: PodInfo) -> Status | None:
        """The PreFilter verdict of ``pod``: None when it names no gang, else SUCCESS or the failure."""
        return self._verdict(pod)[0]

    def _verdict(self, pod: PodInfo) -> tuple[Status | None, bool]:
        """:meth:`verdict`, and whether the failure is the gang's incompleteness (gang missing, not
        initialised, or its group lacking children): what a later Pod or PodGroup event can cure."""
        name = n.gang_name(pod.labels, pod.annotations)
        if not name:
            return None, False
        gang_id = n.gang_id(pod.namespace, name)
        gang = self.cache.get(gang_id)
        if gang is None:
            return Status.unresolvable(f"can't find gang, gangName: {gang_id}, podName: {pod.key}"), True
        if not gang.has_init:
            return Status.unresolvable(f"gang has not init, gangName: {gang.name}, podName: {pod.key}"), True
        if gang.match_policy == n.MATCH_POLICY_ONCE_SATISFIED and gang.once_satisfied:
            return SUCCESS, False
        message = self._basic_check(gang, pod)
        if message:
            return Status.unresolvable(message), True
        return self._capacity_verdict(gang), False

    def _capacity_verdict(self, gang: Gang) -> Status:
        """The checks of our own after the basic check: the gang's wait against ``bindHTTPTimeout``, then
        the fail-fast capacity check."""
        wait = min(gang.wait_time, MAX_TIMEOUT)
        if wait >= self.args.bind_http_timeout:
            return Status.unresolvable(
                f"gang {gang.name} waits up to {format_duration(wait)} at Permit, not less than the bind "
                f"extender's httpTimeout {format_duration(self.args.bind_http_timeout)} (Coscheduling args "
                "bindHTTPTimeout): kube-scheduler would abandon the bind first; shorten the gang's waiting time"
            )
        count, needed = needed_requests(self.cache.group_gangs(gang))
        if count:
            short = shortfall_message(gang.gang_group, count, needed, self.free.free(sorted(needed)))
            if short:
                return Status.unresolvable(short)
        return SUCCESS

    def explain_pod(self, pod: PodInfo) -> dict[str, Any] | None:
        """The gang verdict of a member for ``koord explain``: None for a pod without a gang, else the gang,
        its counts, the PreFilter verdict (``status``, ``reason``) and what Permit would do now (``permit``).
        """
        name = n.gang_name(pod.labels, pod.annotations)
        if not name:
            return None
        gang_id = n.gang_id(pod.namespace, name)
        status = self.verdict(pod) or SUCCESS
        out: dict[str, Any] = {
            "gang": gang_id,
            "status": status.code.label,
            "reason": status.message,
        }
        gang = self.cache.get(gang_id)
        if gang is None:
            return out
        out.update(
            gangGroup=list(gang.gang_group),
            mode=gang.mode,
            matchPolicy=gang.match_policy,
            minMember=gang.min_required,
            children=len(gang.children),
            pending=len(gang.pending),
            waiting=len(gang.waiting),
            bound=len(gang.bound),
            onceSatisfied=gang.once_satisfied,
            waitSeconds=min(gang.wait_time, MAX_TIMEOUT),
        )
        if status.is_success():
            joins = pod.key not in gang.waiting
            lacking = {m.name: members_to_place(m) - int(joins and m is gang) for m in self.cache.group_gangs(gang)}
            lacking = {k: v for k, v in lacking.items() if v > 0}
            out["permit"] = (
                "Allow: the gang group is satisfied, its waiting members would bind together"
                if not lacking
                else "Wait: " + ", ".join(f"{k} lacks {v} waiting member(s)" for k, v in sorted(lacking.items()))
            )
        return out

    def _basic_check(self, gang: Gang, pod: PodInfo) -> str:
        """Upstream ``basicGangRequirementsCheck``: "" when every gang of the group exists, is initialised
        and has collected minMember children, else the failure message.

        ``pod`` counts as a child of ``gang`` even before its own watch event reached the cache: upstream
        checks a pod its informer already holds, while kube-scheduler may send ``/filter`` for the member
        that completes the gang before the extender's watch delivers it."""
        missing: list[str] = []
        not_init: list[str] = []
        short = False
        for member_id in gang.gang_group:
            member = self.cache.get(member_id)
            if member is None:
                missing.append(member_id)
            elif not member.has_init:
                not_init.append(member_id)
            elif len(member.children) + (member is gang and pod.key not in member.children) < member.min_required:
                short = True
        parts = []
        if missing:
            parts.append(f"memberGangs [{' '.join(missing)}] doesn't exists")
        if not_init:
            parts.append(f"memberGangs [{' '.join(not_init)}] has not init")
        if short:
            parts.append(f"memberGangs [{' '.join(gang.gang_group)}] child pod not collect enough")
        if not parts:
            return ""
        return (
            f"gangGroup [{' '.join(gang.gang_group)}] basic check: {', '.join(parts)}, "
            f"current gang: {gang.name}, podName: {pod.key}"
        )

    # ------------------------------------------------------------------ Reserve / Permit
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Nothing to reserve (upstream's Reserve is empty); the point exists for Unreserve."""
        return SUCCESS

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """Wait for the gang group, or allow the whole group now (see the module docstring)."""
        name = n.gang_name(pod.labels, pod.annotations)
        if not name:
            return SUCCESS, 0.0
        gang = self.cache.get(n.gang_id(pod.namespace, name))
        if gang is None:
            return Status.unschedulable("Gang not found"), 0.0
        self.cache.dirty.add(gang.name)
        gang.add_assumed(pod)
        members = [self.cache.get(i) for i in gang.gang_group]
        if all(m is not None and m.valid_for_permit() for m in members):
            self._allow_group(gang)
            return SUCCESS, 0.0
        if gang.group_info is not None:
            gang.group_info.add_waiting_gang()
        gang.undecided.add(pod.uid)
        gang.waiting_since[pod.uid] = self.handle.now()
        return Status.wait(), gang.wait_time

    def _allow_group(self, gang: Gang) -> None:
        """Upstream ``AllowGangGroup``: record the binding members once, allow every undecided member."""
        gangs = self.cache.group_gangs(gang)
        info = gang.group_info
        if info is not None and not info.binding_members:
            info.binding_members = {p.uid for g in gangs for p in g.waiting.values()}
        waiting = self.handle.waiting_pods
        for member in gangs:
            for uid in member.undecided:
                waiting.allow(uid, NAME)
            member.undecided.clear()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """The member is pending again; Strict mode rejects the group's waiting members (see the module docstring)."""
        gang = self.cache.gang_of(pod)
        if gang is None:
            return
        self.cache.dirty.add(gang.name)
        gang.del_assumed(pod)
        if gang.mode != n.MODE_STRICT:
            return
        if gang.match_policy == n.MATCH_POLICY_ONCE_SATISFIED and gang.once_satisfied:
            return
        self.reject_group(gang, f'Gang "{gang.name}" gets rejected due to Pod "{pod.name}" in Unreserve')

    def on_unschedulable(self, state: CycleState, pod: PodInfo) -> None:
        """A member found no feasible node: in Strict mode, unless the group is once satisfied under
        ``once-satisfied``, every waiting member of its group is rejected (upstream ``AfterPostFilter``:
        ``gets rejected due to member pod "<ns/name>" is unschedulable``), releasing what they hold."""
        gang = self.cache.gang_of(pod)
        if gang is None or gang.mode != n.MODE_STRICT:
            return
        if gang.match_policy == n.MATCH_POLICY_ONCE_SATISFIED and gang.once_satisfied:
            return
        if gang.group_info is not None:
            gang.group_info.waiting_gang_ids.clear()
            gang.group_info.binding_members = set()
        self.reject_group(gang, f'gets rejected due to member pod "{pod.key}" is unschedulable')

    def reject_group(self, gang: Gang, message: str) -> int:
        """Reject every undecided waiting member of ``gang``'s group with ``message``; returns how many."""
        waiting = self.handle.waiting_pods
        rejected = 0
        for member in self.cache.group_gangs(gang):
            for uid in member.undecided:
                rejected += waiting.reject(uid, JOB_REJECT_PLUGIN, message)
            member.undecided.clear()
        return rejected

    # ------------------------------------------------------------------ PreBind / PostBind
    def binding_info(self, pod: PodInfo) -> tuple[str, int] | None:
        """(gang group id, member count) PreBind writes for ``pod``, or None when it was not allowed
        together with other members (upstream ``GetGangBindingInfo``)."""
        gang = self.cache.gang_of(pod)
        if gang is None or gang.group_info is None:
            return None
        members = gang.group_info.binding_members
        if len(members) <= 1 or pod.uid not in members:
            return None
        return gang.group_id, len(members)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Write (or clear) the bind-gang annotations through ``handle.client``; a refused write is an ERROR."""
        if not n.gang_name(pod.labels, pod.annotations):
            return SUCCESS
        info = self.binding_info(pod)
        want: dict[str, str | None]
        if info is None:
            want = {k: None for k in _BIND_ANNOTATIONS if k in pod.annotations}
        else:
            group_id, count = info
            want = {
                n.ANNOTATION_BIND_GANG_GROUP_ID: group_id,
                n.ANNOTATION_BIND_GANG_MEMBER_COUNT: str(count),
                n.DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID: group_id,
                n.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT: str(count),
            }
            want = {k: v for k, v in want.items() if pod.annotations.get(k) != v}
        if not want:
            return SUCCESS
        try:
            await self.handle.client.patch(
                "Pod", pod.name, {"metadata": {"annotations": want}}, namespace=pod.namespace
            )
        except NotFound:
            return SUCCESS  # embedded mode: a pod no file holds enters the source at bind
        except ApiError as exc:
            return Status.error(str(exc))
        return SUCCESS

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """The member is bound (upstream ``PostBind`` -> ``addBoundPod``)."""
        gang = self.cache.gang_of(pod)
        if gang is not None:
            self.cache.dirty.add(gang.name)
            gang.add_bound(pod)

    # ------------------------------------------------------------------ background
    async def run_background(self) -> None:
        """While leading: the PodGroup status controller, every :data:`STATUS_SYNC_INTERVAL` seconds, and the
        retries of refused members whose gang is complete, every :data:`RETRY_INTERVAL` seconds. Both run in one
        task group: a failed round ends both, and the service's loop supervisor logs, counts and restarts them
        (:mod:`app.sources.loops`), so no orphaned twin survives a restart."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._status_loop())
            group.create_task(self._retry_loop())

    async def _status_loop(self) -> None:
        controller = StatusController(self.cache, self.handle)
        while True:
            await asyncio.sleep(STATUS_SYNC_INTERVAL)
            if self.handle.has_synced() and self.handle.is_leader():
                await controller.sync_once()

    async def _retry_loop(self) -> None:
        """Send the due retries (:meth:`GangRetry.send_due`) on the leader; a standby forgets them (only
        the leader's extender is called, so its own refusals are the ones kube-scheduler holds)."""
        while True:
            await asyncio.sleep(RETRY_INTERVAL)
            if not self.retry.due or not self.handle.has_synced():
                continue
            if not self.handle.is_leader():
                self.retry.due.clear()
                continue
            await self.retry.send_due(self.handle.client, self.retry_bucket)

    # ------------------------------------------------------------------ REST
    def routes(self) -> list[tuple[str, Any]]:
        """REST views (paths relative to ``/apis/v1/plugins/Coscheduling``), upstream's paths."""
        return [("/gangs", self._get_gangs), ("/gang/{namespace}/{name}", self._get_gang)]

    async def _get_gangs(self) -> dict[str, Any]:
        """Every gang's summary by gang id (upstream ``GET /gangs``)."""
        now = self.handle.now()
        return {gid: gang_summary(g, now) for gid, g in sorted(self.cache.gangs.items())}

    async def _get_gang(self, namespace: str, name: str) -> dict[str, Any]:
        """One gang's summary.

        Raises:
            NotFound: no such gang (``cannot find gang <ns>/<name>``, answered 404).
        """
        gang = self.cache.get(n.gang_id(namespace, name))
        if gang is None:
            raise NotFound(f"cannot find gang {namespace}/{name}")
        return gang_summary(gang, self.handle.now())


def new_coscheduling(args: dict[str, Any], handle: Handle) -> Coscheduling:
    """Build the plugin from its args (upstream defaults applied, validated); warns when the default gang
    wait is not shorter than ``bindHTTPTimeout``.

    Raises:
        ArgsError: invalid args (reported as ``pluginConfig[Coscheduling].args.<field>``).
    """
    decoded = decode_args(args)
    wait = min(decoded.default_timeout, MAX_TIMEOUT)
    if wait >= decoded.bind_http_timeout:
        log.warning(
            "Coscheduling: gangs wait up to %s at Permit by default (defaultTimeout), not less than the bind "
            "extender's httpTimeout %s (bindHTTPTimeout): their members will be refused; raise the bind "
            "entry's httpTimeout in the kube-scheduler config or lower defaultTimeout",
            format_duration(wait),
            format_duration(decoded.bind_http_timeout),
        )
    return Coscheduling(decoded, handle)
