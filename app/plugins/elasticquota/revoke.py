"""Over-use revoke: take back what a quota borrowed when its lenders need their min
(upstream ``quota_overuse_revoke.go``).

A quota whose ``used`` exceeds its ``runtime`` continuously for longer than ``delayEvictTime``
triggers: its assigned pods, least important first (lowest priority, most recently started), are
tentatively removed (non-preemptible ones skipped) until ``used <= runtime``; then, from the most
important of those, pods are added back while they still fit; the rest are evicted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.api import elasticquota as n
from app.cache.podinfo import PodInfo
from app.framework.handle import SnapshotLister
from app.plugins.elasticquota.importance import importance_key
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.resourcelist import add, less_equal, mask, subtract


@dataclass(slots=True)
class OverUseMonitor:
    """``QuotaOverUsedGroupMonitor``: when the quota was last seen within its runtime (epoch s)."""

    quota: str
    last_under_used: float


@dataclass(slots=True)
class RevokeController:
    """Monitors of every quota but the system and root ones (``QuotaOverUsedRevokeController``).

    Attributes:
        delay: seconds of continuous over-use before a revoke (``delayEvictTime``).
        monitors: quota name -> monitor.
    """

    delay: float
    monitors: dict[str, OverUseMonitor] = field(default_factory=dict)

    def sync(self, manager: QuotaManager, now: float) -> None:
        """Add monitors for new quotas and drop those of deleted ones (``syncQuota``)."""
        names = {q for q in manager.quotas if q not in (n.SYSTEM_QUOTA_NAME, n.ROOT_QUOTA_NAME)}
        for name in names - set(self.monitors):
            self.monitors[name] = OverUseMonitor(name, now)
        for name in set(self.monitors) - names:
            del self.monitors[name]

    def due(self, manager: QuotaManager, now: float) -> list[str]:
        """Quotas over their runtime for longer than the delay (their clock restarts), sorted.

        Runtimes must have been refreshed by the caller.
        """
        out = []
        for name, monitor in sorted(self.monitors.items()):
            info = manager.quotas.get(name)
            if info is None:
                continue
            within, _ = less_equal(info.used, info.runtime)
            if within:
                monitor.last_under_used = now
                continue
            if now - monitor.last_under_used > self.delay:
                monitor.last_under_used = now
                out.append(name)
        return out


def pods_to_revoke(manager: QuotaManager, snapshot: SnapshotLister, quota: str, now: float) -> list[PodInfo]:
    """``getToRevokePodList``: the pods of ``quota`` to evict so that ``used <= runtime``.

    Pod requests are masked to the quota's max names. Returns the pods in eviction order.
    """
    info = manager.quotas.get(quota)
    if info is None:
        return []
    runtime = info.runtime
    used = dict(info.used)
    assigned = [snapshot.pods[uid] for uid, e in info.pods.items() if e.assigned and uid in snapshot.pods]
    assigned.sort(key=lambda p: importance_key(p, snapshot.pod_object(p.uid), now), reverse=True)
    tried: list[PodInfo] = []
    for pod in assigned:
        if less_equal(used, runtime)[0]:
            break
        if n.is_pod_non_preemptible(pod.labels):
            continue
        req = mask(pod.requests, info.max)
        used = mask(subtract(used, req), req)
        tried.append(pod)
    if not less_equal(used, runtime)[0]:
        return tried
    revoke: list[PodInfo] = []
    for pod in reversed(tried):
        req = mask(pod.requests, info.max)
        used = mask(add(used, req), req)
        if not less_equal(used, runtime)[0]:
            used = subtract(used, req)
            revoke.append(pod)
    return revoke
