"""Pod admission: ClusterColocationProfile mutation and QoS/priority validation (``/mutate-pod``, ``/validate-pod``)."""

from __future__ import annotations

from webhooks.registry import Webhook

#: Filled by the pod webhook modules.
WEBHOOKS: list[Webhook] = []
