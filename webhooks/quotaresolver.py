"""Which ElasticQuota a pod belongs to, for the pod webhooks (upstream ``QuotaMetaChecker``'s quota lookup).

Follows ``pkg/webhook/elasticquota/pod_check.go``, which resolves a pod's quota from the quota
tree the webhook keeps from ElasticQuota events. One :class:`QuotaResolver` listens on the
service's snapshot cache; the app creates it with the :class:`~webhooks.webhook.WebhookContext`.
"""

from __future__ import annotations

from typing import Any

from app.api.kinds import object_key
from app.cache.listener import CacheListener
from app.cache.snapshot import ClusterCache
from app.plugins.elasticquota.args import ElasticQuotaArgs
from app.plugins.elasticquota.manager import QuotaManager


class QuotaResolver(CacheListener):
    """A :class:`QuotaManager` fed with the cache's ElasticQuota events, used only to resolve a pod's
    quota (no pods or nodes are accounted). Rebuilt lazily after a quota change.

    The pod's quota follows the ElasticQuota plugin's rule
    (:meth:`app.plugins.elasticquota.manager.QuotaManager.quota_name_of`).
    """

    def __init__(self) -> None:
        self.manager = QuotaManager(ElasticQuotaArgs())

    @classmethod
    def listening_on(cls, cache: ClusterCache) -> QuotaResolver:
        """A resolver registered on ``cache`` (the cache replays its current ElasticQuotas into it)."""
        resolver = cls()
        cache.add_listener(resolver)
        return resolver

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Record an ElasticQuota change, keyed by name as the plugin does; a deletion of a
        same-named quota in another namespace than the stored one is ignored."""
        if kind != "ElasticQuota":
            return
        name = key.rsplit("/", 1)[-1]
        current = self.manager.objects.get(name)
        if obj is None and current is not None and object_key(current) != key:
            return
        self.manager.set_quota_object(name, obj)

    def quota_of(self, labels: dict[str, str], namespace: str) -> tuple[str, bool]:
        """(the pod's quota name, whether that quota is a parent quota)."""
        name = self.manager.quota_name_of(labels, namespace)
        info = self.manager.quotas.get(name)
        return name, bool(info is not None and info.is_parent)
