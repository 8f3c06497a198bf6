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
annotation, else ``koordinator-default-quota``), over the ElasticQuotas the context's
:class:`~webhooks.quotaresolver.QuotaResolver` follows (``context.quotas``); the feature gate is
read from ``context.feature_gates``. One difference from upstream's webhook: a pod labelled
with ``koordinator-root-quota`` resolves to the default quota (as the scheduler plugin does), so it
is not refused as a parent-quota pod.
"""

from __future__ import annotations

from typing import Any

from app.api import elasticquota as n
from webhooks.features import SUPPORT_PARENT_QUOTA_SUBMIT_POD
from webhooks.pod.podview import labels_of
from webhooks.webhook import WebhookContext

PREEMPTIBLE_IMMUTABLE = "Preemptible label is forbidden modify now."


def validate_add_pod(pod: dict[str, Any], namespace: str, ctx: WebhookContext) -> str | None:
    """``ValidateAddPod``: the refusal message when the pod's quota is a parent quota, else None.

    ``namespace`` is the pod's namespace (the request's when the object has none); the quota is
    looked up in ``ctx.quotas`` unless ``ctx.feature_gates`` enables ``SupportParentQuotaSubmitPod``.
    """
    if ctx.feature_gates.get(SUPPORT_PARENT_QUOTA_SUBMIT_POD):
        return None
    quota, is_parent = ctx.quotas.quota_of(labels_of(pod), namespace)
    if quota == "" or quota == n.DEFAULT_QUOTA_NAME:
        return None
    if is_parent:
        name = (pod.get("metadata") or {}).get("name") or ""
        return f"pod can not be linked to a parentQuotaGroup,quota:{quota}, pod:{name}"
    return None


def validate_update_pod(old: dict[str, Any], new: dict[str, Any], namespace: str, ctx: WebhookContext) -> str | None:
    """``ValidateUpdatePod``: the ``preemptible`` label is immutable, then :func:`validate_add_pod` on ``new``."""
    if labels_of(old).get(n.LABEL_PREEMPTIBLE, "") != labels_of(new).get(n.LABEL_PREEMPTIBLE, ""):
        return PREEMPTIBLE_IMMUTABLE
    return validate_add_pod(new, namespace, ctx)
