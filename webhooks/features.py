"""The feature gates the webhooks read, with upstream's defaults (``pkg/features/features.go``).

Upstream keeps them in a process-wide ``DefaultFeatureGate``; here each
:class:`~webhooks.webhook.WebhookContext` carries its own copy (``feature_gates``), so a test or a
second app can switch a gate without touching the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: ``SupportParentQuotaSubmitPod``: allow pods in parent quotas (upstream default off).
SUPPORT_PARENT_QUOTA_SUBMIT_POD = "SupportParentQuotaSubmitPod"

#: Every gate the webhooks read, with upstream's default (read-only).
DEFAULT_FEATURE_GATES: Mapping[str, bool] = MappingProxyType({SUPPORT_PARENT_QUOTA_SUBMIT_POD: False})


def default_feature_gates() -> dict[str, bool]:
    """A new, mutable copy of :data:`DEFAULT_FEATURE_GATES` (gate name -> enabled)."""
    return dict(DEFAULT_FEATURE_GATES)
