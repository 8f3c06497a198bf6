"""What a webhook is: its path, type and handler, the context handlers read, and their error.

The shape of controller-runtime's ``webhook.Admission`` registrations in upstream's
``pkg/webhook/server.go``: each webhook package (``webhooks.pod``, ``webhooks.elasticquota``)
lists its :class:`Webhook` s; :mod:`webhooks.registry` gathers them for the app.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from app.cache.snapshot import ClusterCache
from webhooks.admission import AdmissionRequest, AdmissionResponse
from webhooks.features import default_feature_gates
from webhooks.quotaresolver import QuotaResolver

if TYPE_CHECKING:
    from app.sources.base import Source


@dataclass(slots=True)
class WebhookContext:
    """Everything a handler may read, built once by the app (``app.server.app.create_app``).

    Attributes:
        cache: the snapshot cache (ClusterColocationProfiles, ElasticQuotas, pods, nodes,
            namespaces when watched).
        source: the service's source (None in tests that need none).
        rng: the random generator of profile probabilities (seeded in tests).
        feature_gates: gate name -> enabled, upstream's defaults (:mod:`webhooks.features`).
        quotas: the pods' ElasticQuota lookup, listening on ``cache`` from construction on.
    """

    cache: ClusterCache
    source: Source | None = None
    rng: random.Random = field(default_factory=random.Random)
    feature_gates: dict[str, bool] = field(default_factory=default_feature_gates)
    quotas: QuotaResolver = field(init=False)

    def __post_init__(self) -> None:
        self.quotas = QuotaResolver.listening_on(self.cache)


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
