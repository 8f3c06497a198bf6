"""The ElasticQuota part of ``/validate-pod``: no pods in parent quotas, immutable ``preemptible`` label.

Follows upstream's ``pkg/webhook/elasticquota/pod_check.go`` (``ValidateAddPod`` /
``ValidateUpdatePod``, called by ``QuotaMetaChecker.ValidatePod`` from the pod validating handler
after the ClusterColocationProfile checks), worded exactly as upstream:

- CREATE and UPDATE: a pod whose quota has ``quota.scheduling.koordinator.sh/is-parent: "true"`` is
  refused with ``pod can not be linked to a parentQuotaGroup,quota:<quota>, pod:<pod name>``,
  unless the feature gate ``SupportParentQuotaSubmitPod`` is on (default off, as upstream);
- UPDATE: changing label ``quota.scheduling.koordinator.sh/preemptible`` (adding, removing or
  changing its value) is refused with ``Preemptible label is forbidden modify now.``, checked
  before the parent rule.

Both are answered as upstream's ``admission.Errored(400, err)``. The pod's quota is resolved by the
ElasticQuota plugin's own rule (:meth:`app.plugins.elasticquota.manager.QuotaManager.quota_name_of`:
label ``quota.scheduling.koordinator.sh/name`` if that quota exists, else a quota named like the
pod's namespace in that namespace, else the quota listing the namespace in its ``namespaces``
annotation, else ``koordinator-default-quota``), over the ElasticQuotas of
``context.cache.objects["ElasticQuota"]``. One difference from upstream's webhook: a pod labelled
with ``koordinator-root-quota`` resolves to the default quota (as the scheduler plugin does), so it
is not refused as a parent-quota pod.
"""

from __future__ import annotations

import weakref
from typing import Any

from app.api import elasticquota as n
from app.api.kinds import object_key
from app.cache.listener import CacheListener
from app.cache.snapshot import ClusterCache
from app.plugins.elasticquota.args import ElasticQuotaArgs
from app.plugins.elasticquota.manager import QuotaManager
from webhooks.pod.podview import labels_of

#: Upstream feature gates this check reads (``pkg/features/features.go``), with upstream's defaults.
#: ``SupportParentQuotaSubmitPod``: allow pods in parent quotas. Set at start (or in tests).
FEATURE_GATES: dict[str, bool] = {"SupportParentQuotaSubmitPod": False}

PREEMPTIBLE_IMMUTABLE = "Preemptible label is forbidden modify now."


class QuotaResolver(CacheListener):
    """A :class:`QuotaManager` fed with the cache's ElasticQuota events, used only to resolve a pod's
    quota (no pods or nodes are accounted). Rebuilt lazily after a quota change."""

    def __init__(self) -> None:
        self.manager = QuotaManager(ElasticQuotaArgs())

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


_RESOLVERS: weakref.WeakKeyDictionary[ClusterCache, QuotaResolver] = weakref.WeakKeyDictionary()


def resolver_for(cache: ClusterCache) -> QuotaResolver:
    """The :class:`QuotaResolver` listening on ``cache`` (registered on first use, replaying its state)."""
    resolver = _RESOLVERS.get(cache)
    if resolver is None:
        resolver = QuotaResolver()
        cache.add_listener(resolver)
        _RESOLVERS[cache] = resolver
    return resolver


def validate_add_pod(pod: dict[str, Any], namespace: str, cache: ClusterCache) -> str | None:
    """``ValidateAddPod``: the refusal message when the pod's quota is a parent quota, else None.

    ``namespace`` is the pod's namespace (the request's when the object has none).
    """
    if FEATURE_GATES.get("SupportParentQuotaSubmitPod"):
        return None
    quota, is_parent = resolver_for(cache).quota_of(labels_of(pod), namespace)
    if quota == "" or quota == n.DEFAULT_QUOTA_NAME:
        return None
    if is_parent:
        name = (pod.get("metadata") or {}).get("name") or ""
        return f"pod can not be linked to a parentQuotaGroup,quota:{quota}, pod:{name}"
    return None


def validate_update_pod(old: dict[str, Any], new: dict[str, Any], namespace: str, cache: ClusterCache) -> str | None:
    """``ValidateUpdatePod``: the ``preemptible`` label is immutable, then :func:`validate_add_pod` on ``new``."""
    if labels_of(old).get(n.LABEL_PREEMPTIBLE, "") != labels_of(new).get(n.LABEL_PREEMPTIBLE, ""):
        return PREEMPTIBLE_IMMUTABLE
    return validate_add_pod(new, namespace, cache)
