"""Nothing readable without credentials: the guard in front of every call that returns cluster state.

Guarded (:func:`guarded`): everything under ``/apis/v1/`` (the inspection API, ``POST /apis/v1/explain``
included), the page ``/ui`` with its files, and ``/metrics``. Not guarded: ``/healthz`` and ``/readyz`` (the
kubelet's probes present no credentials), the extender verbs and the webhooks (their client-certificate
rules, :mod:`app.server.clientauth`), ``/openapi.json`` (route names only).

The policy (:func:`inspection_access`), as ``koord scheduler`` runs it:

- **against an API server** (``--kubeconfig`` or in-cluster): delegated authentication
  (:mod:`app.server.authn`: a client certificate of ``--client-ca-file`` when given, else a bearer token checked
  by ``TokenReview``) and delegated authorization (:mod:`app.server.authz`: a ``SubjectAccessReview`` of what
  the request asks), as kube-scheduler's and metrics-server's secure ports and kube-rbac-proxy do;
- **embedded** (``--cluster``, no API server) **with** ``--client-ca-file``: a client certificate of that CA
  whose CN is allowed (``--allowed-inspection-client-names``; empty: any the CA signed); there is no API
  server to ask about tokens or permissions;
- **embedded without** ``--client-ca-file``: open, as before (the start-up log says so).

Answers: 401 ``{"message": "Unauthorized: ..."}`` without credentials accepted; 403 for a client certificate
whose CN is not allowed, or with kube-apiserver's forbidden message and the authorizer's reason; 503
(``Retry-After: 1``) when the API server could not be asked (nothing remembered: the next request asks again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from app.client.reviews import AccessDecision, Attributes, TokenDecision, UserInfo
from app.server.authn import (
    TOKEN_CACHE_TTL,
    TOKEN_REVIEW_TIMEOUT,
    AuthenticationUnavailable,
    Authenticator,
    CertificateNotAllowed,
    Unauthenticated,
)
from app.server.authz import ACCESS_REVIEW_TIMEOUT, AuthorizationUnavailable, Authorizer, request_attributes
from app.sources.base import Source
from app.sources.kubernetes import KubernetesSource

log = logging.getLogger(__name__)

#: Exact paths guarded besides the prefixes of :data:`GUARDED_PREFIXES`.
GUARDED_PATHS = frozenset({"/metrics", "/ui", "/apis/v1"})
#: Path prefixes guarded.
GUARDED_PREFIXES = ("/apis/v1/", "/ui/")


def guarded(path: str) -> bool:
    """Whether a request for ``path`` returns cluster state and needs credentials (module docstring)."""
    return path in GUARDED_PATHS or path.startswith(GUARDED_PREFIXES)


@dataclass(frozen=True)
class InspectionAccess:
    """Who may call the guarded paths.

    Attributes:
        authenticator: turns credentials into a user (:class:`~app.server.authn.Authenticator`).
        authorizer: decides what the user may read by SubjectAccessReview; None: every authenticated caller
            may read everything (embedded mode: an allowed client certificate).
        description: what a caller needs, for the start-up log (``a bearer token (TokenReview), authorized by
            ...``).
    """

    authenticator: Authenticator
    authorizer: Authorizer | None
    description: str


def certificate_access(names: frozenset[str]) -> InspectionAccess:
    """Embedded mode with ``--client-ca-file``: a client certificate of the CA with a CN in ``names`` (empty:
    any the CA signed) may read everything; bearer tokens are not accepted (no API server to ask)."""
    allowed = ", ".join(sorted(names)) or "any the CA signed"
    return InspectionAccess(
        Authenticator(None, names),
        None,
        f"a client certificate of the --client-ca-file CA (CN: {allowed})",
    )


def inspection_access(
    source: Source,
    certificate_names: frozenset[str] | None,
    *,
    cache_ttl: float = TOKEN_CACHE_TTL,
    timer: Callable[[], float] = time.monotonic,
) -> InspectionAccess | None:
    """The policy ``koord scheduler`` runs the guarded paths under (module docstring).

    Args:
        source: where the cluster comes from; a :class:`~app.sources.kubernetes.KubernetesSource` asks its API
            server (through its client) about tokens and permissions.
        certificate_names: with ``--client-ca-file``, the CNs of ``--allowed-inspection-client-names`` (empty:
            any the CA signed); None without ``--client-ca-file``.
        cache_ttl: seconds a TokenReview, an allowed and a denied SubjectAccessReview are remembered (10 s, as
            k8s.io/apiserver's delegating authenticator and authorizer).
        timer: the caches' clock in seconds (tests pass their own).

    Returns:
        The policy, or None: open (embedded mode without ``--client-ca-file``).
    """
    if isinstance(source, KubernetesSource):
        client = source.client

        async def review_token(token: str) -> TokenDecision:
            return await client.review_token(token, timeout=TOKEN_REVIEW_TIMEOUT)

        async def review_access(user: UserInfo, attributes: Attributes) -> AccessDecision:
            return await client.review_access(user, attributes, timeout=ACCESS_REVIEW_TIMEOUT)

        certs = " or a client certificate of the --client-ca-file CA" if certificate_names is not None else ""
        return InspectionAccess(
            Authenticator(review_token, certificate_names, cache_ttl=cache_ttl, timer=timer),
            Authorizer(review_access, allow_ttl=cache_ttl, deny_ttl=cache_ttl, timer=timer),
            f"a bearer token (TokenReview){certs}, authorized by SubjectAccessReview against {client.host}",
        )
    if certificate_names is not None:
        return certificate_access(certificate_names)
    return None


class InspectionGuard:
    """ASGI middleware answering 401/403/503 for a guarded path whose caller may not read it; everything else
    passes untouched.

    Args:
        app: the wrapped application.
        access: the policy.
        metrics_only: guard ``/metrics`` only (a process that serves no inspection, ``--role webhooks``: its
            ``/apis/v1/...`` and ``/ui`` answer 404, as any path it does not serve).
    """

    def __init__(self, app: ASGIApp, access: InspectionAccess, metrics_only: bool = False) -> None:
        self.app = app
        self.access = access
        self.metrics_only = metrics_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the caller of a guarded path; pass the request on when it may."""
        path = scope["path"] if scope["type"] == "http" else ""
        if not path or not (path == "/metrics" if self.metrics_only else guarded(path)):
            await self.app(scope, receive, send)
            return
        refusal = await self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        code, message = refusal
        headers = [(b"content-type", b"application/json")]
        if code == 503:
            headers.append((b"retry-after", b"1"))
        body = orjson.dumps({"message": message})
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, message) refusing the request, or None when the caller may."""
        try:
            user = await self.access.authenticator.authenticate(scope)
        except Unauthenticated as exc:
            return 401, str(exc)
        except CertificateNotAllowed as exc:
            return 403, str(exc)
        except AuthenticationUnavailable as exc:
            log.warning("%s %s: %s", scope["method"], scope["path"], exc)
            return 503, str(exc)
        authorizer = self.access.authorizer
        if authorizer is None:
            return None
        attributes = request_attributes(scope["method"], scope["path"])
        try:
            decision = await authorizer.authorize(user, attributes)
        except AuthorizationUnavailable as exc:
            log.warning("%s %s: %s", scope["method"], scope["path"], exc)
            return 503, str(exc)
        if decision.allowed:
            return None
        reason = decision.reason or decision.evaluation_error
        return 403, attributes.forbidden_message(user.username, reason)
