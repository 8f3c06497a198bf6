"""The binding cycle behind ``/bind``: kube-scheduler's ``bindingCycle`` for a pod it already placed.

kube-scheduler calls our bind verb from its own binding goroutine, one per pod, and keeps the pod
assumed in its cache until we answer. Here that call runs the binding half of a scheduling
framework, exactly as plugins of a patched kube-scheduler would see it
(k8s.io/kubernetes/pkg/scheduler/schedule_one.go ``schedulingCycle`` tail and ``bindingCycle``):

0. (The extender, before the cycle) Identity: the pod is the cached pod that the source reported, matched by
   uid, namespace and name (:meth:`app.server.extender.ExtenderService.bind_target`); anything else is
   refused before anything is assumed or written.
1. Re-check: PreFilter and Filter on the chosen node against the current cache, assumed pods
   included. The node may have filled up since this pod's filter call (other binds ran in
   between); without this, concurrent binds over-commit a node. Nothing awaits between this
   check and the assumption, so two binds can never both take the last room. A refusal here is
   an unschedulable attempt: the framework's unschedulable hook runs (upstream's PostFilter moment).
2. Assume: the pod is accounted on the node (refused when it is already assumed or bound).
3. Reserve, every plugin in order; a failure unreserves the plugins whose Reserve ran.
4. Permit; on WAIT the request stays open in :meth:`Framework.wait_on_permit` until the pod is
   allowed, rejected or times out.
5. PreBind, every plugin in order, awaited (plugins write through ``handle.client`` themselves).
6. Bind: Bind plugins, else the default binder creates the ``Binding`` through ``handle.client``.
7. PostBind, and the assumed pod's expiry clock starts (until a watch event confirms it).

On a failure after step 3, Unreserve runs on every Reserve plugin in reverse order and the
assumption is forgotten (only this binding's own assumption); the answer carries the reason,
which the extender returns in ``ExtenderBindingResult.Error`` so kube-scheduler forgets its
assumption and requeues the pod.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from app.cache.podinfo import PodInfo
from app.cache.snapshot import AssumeError, ClusterCache
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.framework.runtime import Framework
from app.framework.status import SUCCESS, Code, Status

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BindingOutcome:
    """How one binding cycle ended.

    Attributes:
        status: SUCCESS, or the failure with the plugin that caused it.
        point: the step that failed (``Filter``, ``Assume``, ``Reserve``, ``Permit``, ``PreBind``,
            ``Bind``), "" on success.
    """

    status: Status
    point: str = ""

    @property
    def error(self) -> str:
        """The ``ExtenderBindingResult.Error`` text: "" on success; for a rejection
        ``<plugin>: <reasons>``; for an error its message (``running PreBind plugin "X": ...``)."""
        status = self.status
        if status.is_success():
            return ""
        if status.code == Code.ERROR or not status.plugin:
            return status.message
        return f"{status.plugin}: {status.message}"


class BindingCycle:
    """Runs binding cycles over one cache and framework (see the module docstring).

    Args:
        cache: the snapshot cache (assume / forget / finish_binding).
        framework: the enabled plugins.
    """

    def __init__(self, cache: ClusterCache, framework: Framework) -> None:
        self.cache = cache
        self.framework = framework

    def recheck(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """PreFilter and Filter of ``pod`` on ``node`` against the cache as it is now, in ``state``
        (the binding cycle's state, which Reserve and later points then read).

        Returns SUCCESS, or the first failing status with its plugin set.
        """
        fw = self.framework
        status = fw.run_pre_filter(state, pod)
        if not status.is_success():
            return status
        row = self.cache.table.row(node)
        if row is None:
            return Status.unschedulable(f"node {node} not found")
        failures = fw.run_filters(state, pod, NodeBatch(np.array([row], dtype=np.int64), [node]))
        return failures.get(0, SUCCESS)

    async def run(
        self,
        pod: PodInfo,
        node: str,
        caller_gone: Callable[[], Awaitable[None]] | None = None,
    ) -> BindingOutcome:
        """Bind ``pod`` (the cache's view of a pod the source reported) to ``node`` through every step;
        never raises for a plugin or API failure (they become the outcome's status).

        ``caller_gone`` returns an awaitable that completes when the caller stopped waiting for the
        answer (kube-scheduler's request timed out and its connection closed); a pod waiting at
        Permit is then rejected (``bind request closed by the caller``) instead of being bound
        behind kube-scheduler's back after it requeued the pod.
        """
        fw = self.framework
        state = fw.new_cycle()
        cache = self.cache
        if node not in cache.nodes:
            return BindingOutcome(Status.unschedulable(f"node {node} not found"), "Assume")
        current = cache.pods.get(pod.uid) if pod.uid else None
        if current is not None:
            pod = current
        entry = cache.assumed.get(pod.uid) if pod.uid else None
        if entry is not None and entry.deadline is None:
            # a binding of this pod is in flight: refuse before re-checking (its own request counts already)
            message = f"pod {pod.key} is already assumed on node {entry.node!r}: its binding is in flight"
            return BindingOutcome(Status.unschedulable(message), "Assume")
        if not pod.node_name:
            status = self.recheck(state, pod, node)
            if not status.is_success():
                fw.run_unschedulable(state, pod)
                return BindingOutcome(status, "Filter")
        try:
            assumed = cache.assume(pod, node)
        except AssumeError as exc:
            return BindingOutcome(Status.unschedulable(str(exc)), "Assume")
        assumption = cache.assumed[assumed.uid]

        status = fw.run_reserve(state, assumed, node)
        if not status.is_success():
            cache.forget(assumed.uid, assumption)
            return BindingOutcome(status, "Reserve")
        point = "Permit"
        try:
            status = fw.run_permit(state, assumed, node)
            if status.is_wait():
                status = await self._wait(assumed, caller_gone)
            if status.is_success():
                point = "PreBind"
                status = await fw.run_pre_bind(state, assumed, node)
            if status.is_success():
                point = "Bind"
                status = await fw.run_bind(state, assumed, node)
        except BaseException:  # cancelled (the server stops): undo before letting it through
            fw.waiting_pods.reject(assumed.uid, "", "bind request cancelled")
            fw.run_unreserve(state, assumed, node)
            cache.forget(assumed.uid, assumption)
            raise
        if not status.is_success():
            log.info("binding pod %s to %s failed at %s: %s", assumed.key, node, point, status.message)
            fw.run_unreserve(state, assumed, node)
            cache.forget(assumed.uid, assumption)
            return BindingOutcome(status, point)
        cache.finish_binding(assumed.uid)
        fw.run_post_bind(state, assumed, node)
        return BindingOutcome(SUCCESS)

    async def _wait(self, pod: PodInfo, caller_gone: Callable[[], Awaitable[None]] | None) -> Status:
        """Wait at Permit; reject the pod if the caller goes away first."""
        fw = self.framework
        if caller_gone is None:
            return await fw.wait_on_permit(pod)
        waiter = asyncio.ensure_future(fw.wait_on_permit(pod))
        gone = asyncio.ensure_future(caller_gone())
        try:
            done, _ = await asyncio.wait({waiter, gone}, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                log.info("pod %s: the bind request was closed while the pod waited at Permit", pod.key)
                fw.waiting_pods.reject(pod.uid, "", "bind request closed by the caller")
            return await waiter
        finally:
            gone.cancel()
            if not waiter.done():
                waiter.cancel()
