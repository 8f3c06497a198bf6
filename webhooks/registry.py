"""The webhooks the service serves, gathered from each webhook package.

Each webhook package (``webhooks.pod``, ``webhooks.elasticquota``) exposes ``WEBHOOKS``, a list
of :class:`~webhooks.webhook.Webhook`; :func:`all_webhooks` gathers them for the app, which mounts
each on its path (upstream's paths, e.g. ``/mutate-pod``). The packages import
:mod:`webhooks.webhook`, never this module, so the gathering runs one way.
"""

from __future__ import annotations

from webhooks import elasticquota, pod, reservation
from webhooks.webhook import Webhook


def all_webhooks() -> list[Webhook]:
    """Every webhook of every package, in a stable order (pod first, then ElasticQuota, then Reservation).

    Raises:
        ValueError: two webhooks claim the same path.
    """
    hooks = [*pod.WEBHOOKS, *elasticquota.WEBHOOKS, *reservation.WEBHOOKS]
    paths = [h.path for h in hooks]
    dup = {p for p in paths if paths.count(p) > 1}
    if dup:
        raise ValueError(f"webhook paths registered twice: {sorted(dup)}")
    return hooks
