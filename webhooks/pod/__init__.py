"""Pod admission: ClusterColocationProfile mutation and QoS/priority validation (``/mutate-pod``, ``/validate-pod``).

``/validate-pod`` also runs the ElasticQuota pod checks (:mod:`webhooks.pod.quota`: no pods in
parent quotas, immutable ``preemptible`` label).

Upstream: ``pkg/webhook/pod/mutating``, ``pkg/webhook/pod/validating`` and
``pkg/webhook/elasticquota/pod_check.go`` of koordinator-sh/koordinator.
"""

from __future__ import annotations

from webhooks.pod.mutating import mutate_pod
from webhooks.pod.validating import validate
from webhooks.webhook import Webhook

#: The pod webhooks, on upstream's paths.
WEBHOOKS: list[Webhook] = [
    Webhook("/mutate-pod", "mutating", ("Pod",), mutate_pod),
    Webhook("/validate-pod", "validating", ("Pod",), validate),
]

__all__ = ["WEBHOOKS", "mutate_pod", "validate"]
