"""May they: delegated authorization of the inspection calls, by a ``SubjectAccessReview`` of what each asks.

What a request asks (:func:`request_attributes`), so that the caller's existing RBAC decides:

- ``GET /apis/v1/pods/{namespace}/{name}``: ``get pods`` of that name in that namespace (a user who may not
  read a pod through the API server does not read it through us either);
- ``GET /apis/v1/nodes/{name}``: ``get nodes`` of that name;
- ``GET /apis/v1/nodeslos/{name}``: ``get nodeslos.slo.koordinator.sh`` of that name;
- everything else (``/apis/v1/snapshot``, ``/apis/v1/overview``, ``POST /apis/v1/explain``, the plugins' views
  under ``/apis/v1/plugins/``, ``/apis/v1/__services__``, ``/apis/v1/plugins``, ``/ui``, ``/metrics``): the
  non-resource URL, with the lower-case HTTP method as verb (``get``, ``post``), as kube-apiserver's
  ``RequestInfoFactory`` names non-resource requests. ``manifests/base/rbac.yaml``'s ClusterRoles
  ``koord-inspector`` and ``koord-metrics-reader`` grant them.

Decisions are remembered for :data:`ALLOW_CACHE_TTL` / :data:`DENY_CACHE_TTL` seconds per user and attributes,
as k8s.io/apiserver's delegating authorizer does (``--authorization-webhook-cache-authorized-ttl`` and
``-unauthorized-ttl``, both 10 s). A review that failed is not remembered: :class:`AuthorizationUnavailable`
(HTTP 503), and the next request asks again. Concurrent requests asking the same share one review
(:mod:`app.server.singleflight`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from cachetools import TLRUCache

from app.client.errors import ApiError
from app.client.reviews import AccessDecision, Attributes, UserInfo
from app.server.singleflight import SingleFlight

#: Seconds an allowed decision is remembered (DelegatingAuthorizationOptions.AllowCacheTTL).
ALLOW_CACHE_TTL = 10.0
#: Seconds a denied decision is remembered (DelegatingAuthorizationOptions.DenyCacheTTL).
DENY_CACHE_TTL = 10.0
#: Seconds to wait for a SubjectAccessReview (the webhook authorizer's default timeout).
ACCESS_REVIEW_TIMEOUT = 10.0
#: Most decisions remembered at once.
DECISION_CACHE_SIZE = 4096

#: Asks the API server whether a user may do something (:meth:`app.client.aio.AsyncClient.review_access`).
AccessReviewer = Callable[[UserInfo, Attributes], Awaitable[AccessDecision]]

#: The paths that name one Kubernetes object: their second segment after ``/apis/v1/`` -> (group, resource,
#: namespaced).
_OBJECT_PATHS: dict[str, tuple[str, str, bool]] = {
    "pods": ("", "pods", True),
    "nodes": ("", "nodes", False),
    "nodeslos": ("slo.koordinator.sh", "nodeslos", False),
}


def request_attributes(method: str, path: str) -> Attributes:
    """What a request of ``method`` on ``path`` asks to do (module docstring)."""
    parts = path.split("/")
    # "", "apis", "v1", kind, then namespace and name or name
    if method == "GET" and len(parts) >= 5 and parts[1:3] == ["apis", "v1"] and parts[3] in _OBJECT_PATHS:
        group, resource, namespaced = _OBJECT_PATHS[parts[3]]
        names = parts[4:]
        if namespaced and len(names) == 2 and all(names):
            return Attributes("get", resource=resource, group=group, namespace=names[0], name=names[1])
        if not namespaced and len(names) == 1 and names[0]:
            return Attributes("get", resource=resource, group=group, name=names[0])
    return Attributes(method.lower(), path=path)


class AuthorizationUnavailable(Exception):
    """The API server could not be asked whether the user may (HTTP 503); nothing was remembered."""


class Authorizer:
    """Decides by ``SubjectAccessReview`` whether a user may do what a request asks, remembering decisions.

    Args:
        review_access: asks the API server (:meth:`app.client.aio.AsyncClient.review_access`).
        allow_ttl, deny_ttl: seconds an allowed / denied decision is remembered.
        timer: the clock of the cache, seconds (tests pass their own).
    """

    def __init__(
        self,
        review_access: AccessReviewer,
        *,
        allow_ttl: float = ALLOW_CACHE_TTL,
        deny_ttl: float = DENY_CACHE_TTL,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.review_access = review_access

        def expires(_key: Any, decision: AccessDecision, now: float) -> float:
            return now + (allow_ttl if decision.allowed else deny_ttl)

        self._decisions: TLRUCache[tuple[UserInfo, Attributes], AccessDecision] = TLRUCache(
            DECISION_CACHE_SIZE, expires, timer=timer
        )
        self._flights: SingleFlight[AccessDecision] = SingleFlight()

    async def authorize(self, user: UserInfo, attributes: Attributes) -> AccessDecision:
        """The decision on ``user`` doing ``attributes``, from the cache when asked within its TTL.

        Raises:
            AuthorizationUnavailable: the review failed (no answer, or an error status); nothing is remembered.
        """
        key = (user, attributes)
        cached = self._decisions.get(key)
        if cached is not None:
            return cached
        review = self.review_access
        try:
            decision = await self._flights.do(key, lambda: review(user, attributes))
        except ApiError as exc:
            raise AuthorizationUnavailable(
                f"cannot authorize the request: the SubjectAccessReview to the API server failed ({exc}); "
                "nothing was cached, try again"
            ) from exc
        self._decisions[key] = decision
        return decision
