"""The webhooks the service serves: path, type and handler, collected from each webhook module.

Each webhook module (``webhooks.pod``, ``webhooks.elasticquota``, ...) exposes ``WEBHOOKS``, a
list of :class:`Webhook`; :func:`all_webhooks` gathers them for the app, which mounts each on
its path (upstream's paths, e.g. ``/mutate-pod``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from webhooks.admission import AdmissionRequest, AdmissionResponse

if TYPE_CHECKING:
    from app.cache.snapshot import ClusterCache
    from app.sources.base import Source


@dataclass(slots=True)
class WebhookContext:
    """What a handler may read: the snapshot cache (ClusterColocationProfiles, ElasticQuotas,
    pods, nodes, namespaces when watched), the source, and a random generator (profile
    probability; seeded in tests)."""

    cache: ClusterCache
    source: Source | None = None
    rng: random.Random = field(default_factory=random.Random)


#: A handler answers one request. It may raise :class:`AdmissionError`; any other exception is
#: answered ``allowed: false`` with code 500 by the route.
Handler = Callable[[AdmissionRequest, WebhookContext], AdmissionResponse]


class AdmissionError(Exception):
    """The object under review is malformed: answered ``allowed: false`` with ``code`` (400 default)."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Webhook:
    """One served webhook.

    Attributes:
        path: URL path as upstream registers it (``/mutate-pod``).
        type: ``mutating`` or ``validating``.
        kinds: kinds it reviews (``Pod``), for documentation and routing checks.
        handler: the logic.
    """

    path: str
    type: Literal["mutating", "validating"]
    kinds: tuple[str, ...]
    handler: Handler


def all_webhooks() -> list[Webhook]:
    """Every webhook of every module, in a stable order.

    Raises:
        ValueError: two webhooks claim the same path.
    """
    from webhooks import elasticquota, pod

    hooks = [*pod.WEBHOOKS, *elasticquota.WEBHOOKS]
    paths = [h.path for h in hooks]
    dup = {p for p in paths if paths.count(p) > 1}
    if dup:
        raise ValueError(f"webhook paths registered twice: {sorted(dup)}")
    return hooks
