"""Pod admission: ClusterColocationProfile mutation and QoS/priority validation (``/mutate-pod``, ``/validate-pod``).

Upstream: ``pkg/webhook/pod/mutating`` and ``pkg/webhook/pod/validating`` of koordinator-sh/koordinator.
"""

from __future__ import annotations

from webhooks.pod.mutating import mutate_pod
from webhooks.pod.validating import validate
from webhooks.registry import Webhook

#: The pod webhooks, on upstream's paths.
WEBHOOKS: list[Webhook] = [
    Webhook("/mutate-pod", "mutating", ("Pod",), mutate_pod),
    Webhook("/validate-pod", "validating", ("Pod",), validate),
]

__all__ = ["WEBHOOKS", "mutate_pod", "validate"]
