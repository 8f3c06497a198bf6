"""Who is calling: delegated authentication of the inspection calls, as Kubernetes components do it.

A request is authenticated by the first of (k8s.io/apiserver's union authenticator, in the order a
delegating component builds it, ``pkg/authentication/authenticatorfactory/delegating.go``):

1. a **client certificate** the TLS handshake verified against ``--client-ca-file``: the user is its subject
   common name, its groups the subject's organizations (``pkg/authentication/request/x509``'s
   ``CommonNameUserConversion``);
2. a **bearer token** (``Authorization: Bearer ...``) the API server vouches for in a ``TokenReview``
   (``plugin/pkg/authenticator/token/webhook``), remembered for :data:`TOKEN_CACHE_TTL` seconds whether it was
   accepted or refused, as the delegating authenticator's cache does (``--authentication-token-webhook-cache-ttl``,
   10 s). A review that got no answer, or an error answer, is not remembered (no cache poisoning): the
   request is answered 503 and the next one asks again. Concurrent requests with one token not yet
   remembered share one TokenReview (:mod:`app.server.singleflight`), as the apiserver's cache does.

No credentials accepted: :class:`Unauthenticated` (401). A certificate whose CN is not among the allowed names
(``--allowed-inspection-client-names``): :class:`CertificateNotAllowed` (403, as the extender verbs and the
webhooks answer a CN they do not allow, :mod:`app.server.clientauth`).
The token is kept only as its SHA-256 digest.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from cachetools import TTLCache

from app.client.errors import ApiError
from app.client.reviews import TokenDecision, UserInfo
from app.server.singleflight import SingleFlight

#: Seconds a TokenReview's answer is remembered (k8s.io/apiserver DelegatingAuthenticationOptions.CacheTTL).
TOKEN_CACHE_TTL = 10.0
#: Seconds to wait for a TokenReview (DelegatingAuthenticationOptions.TokenRequestTimeout).
TOKEN_REVIEW_TIMEOUT = 10.0
#: Most tokens remembered at once; the least recently asked goes first beyond it.
TOKEN_CACHE_SIZE = 4096

#: Asks the API server about one bearer token (:meth:`app.client.aio.AsyncClient.review_token`).
TokenReviewer = Callable[[str], Awaitable[TokenDecision]]


class Unauthenticated(Exception):
    """The request carries no credentials this service accepts; the message says which it needs (HTTP 401)."""


class CertificateNotAllowed(Exception):
    """The client certificate is the CA's, but its CN is not among the allowed names (HTTP 403)."""


class AuthenticationUnavailable(Exception):
    """The API server could not be asked whether a bearer token is valid (HTTP 503); nothing was remembered."""


class Authenticator:
    """Turns a request's client certificate or bearer token into a :class:`~app.client.reviews.UserInfo`.

    Args:
        review_token: asks the API server about a bearer token; None: bearer tokens are not accepted (embedded
            mode has no API server to ask).
        certificate_names: the client certificate CNs accepted (``--allowed-inspection-client-names``); empty
            accepts any certificate the CA signed; None: certificates are not accepted (no ``--client-ca-file``).
        cache_ttl: seconds a token's review is remembered.
        timer: the clock of the cache, seconds (tests pass their own).
    """

    def __init__(
        self,
        review_token: TokenReviewer | None,
        certificate_names: frozenset[str] | None,
        *,
        cache_ttl: float = TOKEN_CACHE_TTL,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.review_token = review_token
        self.certificate_names = certificate_names
        self._tokens: TTLCache[bytes, TokenDecision] = TTLCache(TOKEN_CACHE_SIZE, cache_ttl, timer=timer)
        self._flights: SingleFlight[TokenDecision] = SingleFlight()

    def accepts(self) -> str:
        """What the 401 asks for: ``a bearer token or a client certificate ...``."""
        kinds = []
        if self.review_token is not None:
            kinds.append("a bearer token (Authorization: Bearer ...)")
        if self.certificate_names is not None:
            kinds.append("a client certificate signed by the --client-ca-file CA")
        return " or ".join(kinds) or "nothing: no credentials can be checked"

    async def authenticate(self, scope: MutableMapping[str, Any]) -> UserInfo:
        """The user of the ASGI request ``scope`` (module docstring for the order).

        Raises:
            Unauthenticated: no credentials, or a token the API server refused.
            CertificateNotAllowed: a client certificate whose CN is not allowed.
            AuthenticationUnavailable: the TokenReview failed (no answer, or an error status).
        """
        tls = (scope.get("extensions") or {}).get("tls") or {}
        if self.certificate_names is not None and tls.get("client_cert_chain"):
            cn = tls.get("client_cert_cn") or ""
            if self.certificate_names and cn not in self.certificate_names:
                allowed = ", ".join(sorted(self.certificate_names))
                raise CertificateNotAllowed(
                    f"client certificate CN {cn!r} may not call the inspection calls (allowed: {allowed})"
                )
            return UserInfo(cn, groups=tuple(tls.get("client_cert_organizations") or ()))
        token = _bearer_token(scope)
        if token is None or self.review_token is None:
            raise Unauthenticated(f"Unauthorized: this call needs {self.accepts()}")
        decision = await self._review(token)
        if not decision.authenticated or decision.user is None:
            why = f" ({decision.error})" if decision.error else ""
            raise Unauthenticated(f"Unauthorized: the API server did not accept the bearer token{why}")
        return decision.user

    async def _review(self, token: str) -> TokenDecision:
        """The TokenReview of ``token``, from the cache when asked within the TTL.

        Raises:
            AuthenticationUnavailable: the review failed; nothing is remembered.
        """
        key = hashlib.sha256(token.encode()).digest()
        cached = self._tokens.get(key)
        if cached is not None:
            return cached
        assert self.review_token is not None
        review = self.review_token
        try:
            decision = await self._flights.do(key, lambda: review(token))
        except ApiError as exc:
            raise AuthenticationUnavailable(
                f"cannot authenticate the request: the TokenReview to the API server failed ({exc}); "
                "nothing was cached, try again"
            ) from exc
        self._tokens[key] = decision
        return decision


def _bearer_token(scope: MutableMapping[str, Any]) -> str | None:
    """The token of the request's ``Authorization: Bearer <token>`` header, or None (no header, another scheme,
    an empty token)."""
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None
