"""Pods held at Permit: kube-scheduler's ``waitingPod`` and ``waitingPodsMap``.

A Permit plugin that answers Wait(timeout) leaves the pod here, assumed on its node, while its
``/bind`` request stays open (kube-scheduler's binding goroutine waits for our answer, exactly
as it waits in ``WaitOnPermit``). Each waiting plugin gets a timer; the pod goes on once every
waiting plugin allowed it, and fails as soon as one rejects it or its timer fires:

- ``allow(plugin)``: the plugin no longer holds the pod; when no plugin holds it, it is allowed;
- ``reject(plugin, message)``: the pod fails Unschedulable with ``message``, attributed to ``plugin``;
- timeout: ``rejected due to timeout after waiting <d> at plugin <name>`` (``<d>`` as Go prints a
  ``time.Duration``).

Timeouts are capped at :data:`MAX_TIMEOUT` (15 minutes, upstream's ``maxTimeout``). A plugin such
as Coscheduling allows or rejects a whole gang through :class:`WaitingPods` by uid.

Mirrors k8s.io/kubernetes/pkg/scheduler/framework/runtime/waiting_pods_map.go. Everything runs on
the event loop thread; timers are ``loop.call_later`` handles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from app.cache.podinfo import PodInfo
from app.framework.duration import format_duration
from app.framework.status import SUCCESS, Status

#: Upstream's ``maxTimeout``: the longest a pod may wait at Permit (seconds).
MAX_TIMEOUT = 15 * 60.0


class WaitingPod:
    """One pod waiting at Permit on ``node``.

    Args:
        pod: the assumed pod.
        node: the node it is assumed on.
        plugin_timeouts: waiting plugin name -> timeout in seconds (each capped at :data:`MAX_TIMEOUT`).

    Must be created on the running event loop (its timers start at once).
    """

    def __init__(self, pod: PodInfo, node: str, plugin_timeouts: dict[str, float]) -> None:
        self.pod = pod
        self.node = node
        loop = asyncio.get_running_loop()
        self._result: asyncio.Future[Status] = loop.create_future()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        for plugin, timeout in plugin_timeouts.items():
            wait = min(max(timeout, 0.0), MAX_TIMEOUT)
            message = f"rejected due to timeout after waiting {format_duration(wait)} at plugin {plugin}"
            self._timers[plugin] = loop.call_later(wait, self.reject, plugin, message)

    @property
    def uid(self) -> str:
        """The pod's uid."""
        return self.pod.uid

    def pending_plugins(self) -> list[str]:
        """Plugins still holding the pod (upstream ``GetPendingPlugins``)."""
        return list(self._timers)

    def done(self) -> bool:
        """True once the pod was allowed or rejected."""
        return self._result.done()

    def allow(self, plugin: str) -> None:
        """``plugin`` lets the pod go; once no plugin holds it, it is allowed. No-op when already decided."""
        timer = self._timers.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        if self._timers or self._result.done():
            return
        self._result.set_result(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        """Fail the pod Unschedulable with ``message`` attributed to ``plugin``. No-op when already decided."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not self._result.done():
            self._result.set_result(Status.unschedulable(message, plugin=plugin))

    async def wait(self) -> Status:
        """Wait until the pod is allowed (SUCCESS) or rejected (UNSCHEDULABLE, with the plugin set).

        If the awaiting task is cancelled the pod counts as rejected (``bind request cancelled``),
        so its timers stop and nothing can allow it afterwards.
        """
        try:
            return await asyncio.shield(self._result)
        except asyncio.CancelledError:
            self.reject("", "bind request cancelled")
            raise


class WaitingPods:
    """The waiting pods by uid (upstream ``waitingPodsMap``), shared by the framework and the Handle."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, pod: WaitingPod) -> None:
        """Keep ``pod`` (by uid), replacing any entry of the same uid."""
        self._pods[pod.uid] = pod

    def remove(self, uid: str) -> None:
        """Forget the entry of ``uid`` (absent: no-op)."""
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        """The waiting pod of ``uid``, or None (upstream ``GetWaitingPod``)."""
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        """Every waiting pod (upstream ``IterateOverWaitingPods``); a snapshot, safe to allow/reject while iterating."""
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def allow(self, uid: str, plugin: str) -> bool:
        """``plugin`` allows the waiting pod ``uid``; False when no such pod waits."""
        pod = self._pods.get(uid)
        if pod is None:
            return False
        pod.allow(plugin)
        return True

    def reject(self, uid: str, plugin: str = "", message: str = "removed") -> bool:
        """Reject the waiting pod ``uid`` (upstream ``RejectWaitingPod``: plugin "" and message ``removed``
        by default); False when no such pod waits."""
        pod = self._pods.get(uid)
        if pod is None:
            return False
        pod.reject(plugin, message)
        return True
