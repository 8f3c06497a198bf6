"""ElasticQuota admission (``/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` and the validating one)."""

from __future__ import annotations

from webhooks.registry import Webhook

#: Filled by the ElasticQuota webhook modules.
WEBHOOKS: list[Webhook] = []
