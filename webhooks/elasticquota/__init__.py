"""ElasticQuota admission (``/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` and the validating one)."""

from __future__ import annotations

from webhooks.elasticquota import mutating, validating
from webhooks.webhook import Webhook

#: The mutating (CREATE) and validating (CREATE/UPDATE/DELETE) ElasticQuota webhooks, on upstream's paths.
WEBHOOKS: list[Webhook] = [
    Webhook(mutating.PATH, "mutating", ("ElasticQuota",), mutating.mutate),
    Webhook(validating.PATH, "validating", ("ElasticQuota",), validating.validate),
]
