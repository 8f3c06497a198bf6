"""Who may call us: client certificates (mutual TLS) checked per kind of endpoint.

With ``--client-ca-file`` the TLS server asks every client for a certificate and verifies any it
is given against that CA (``CERT_OPTIONAL``: the kubelet's probes come without one and still reach
``/healthz`` and ``/readyz``). The calls that act on the cluster need a verified certificate whose subject
common name is allowed:

- the extender verbs (``/filter``, ``/prioritize``, ``/preempt``, ``/bind``): ``--allowed-client-names``,
  the CN of kube-scheduler's ``tlsConfig.certFile``;
- the admission webhooks: ``--allowed-webhook-client-names``, the CN of the certificate the API
  server presents to webhooks (its AdmissionConfiguration ``kubeConfigFile``).

The calls that read the cluster's state (``/apis/v1/...``, ``/ui``, ``/metrics``) have their own guard,
:mod:`app.server.inspectauth` (delegated authentication and authorization; in embedded mode a certificate
whose CN is in ``--allowed-inspection-client-names``).

An empty list allows every certificate the CA signed, as kube-apiserver's
``--requestheader-allowed-names`` does. No certificate is answered 401, a CN not allowed 403, both
with ``{"message": ...}``.

The client certificate reaches the app as the ASGI TLS extension (``scope["extensions"]["tls"]``,
https://asgi.readthedocs.io/en/latest/specs/tls.html), which uvicorn does not fill in: the
:class:`TLSScopeProtocol` below (uvicorn's httptools protocol) adds it from the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.server.wire import error_response


def peer_tls_extension(transport: asyncio.BaseTransport) -> dict[str, Any] | None:
    """The ASGI TLS extension for a connection: ``client_cert_chain`` (PEM, leaf only),
    ``client_cert_name`` (RFC 4514 subject), ``client_cert_cn`` (its common name) and
    ``client_cert_organizations`` (its organizations: a Kubernetes user's groups) (the last two our additions);
    None for a plain-HTTP connection. A client that sent no certificate gets an empty chain."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    extension: dict[str, Any] = {
        "server_cert": None,
        "client_cert_chain": [],
        "client_cert_name": None,
        "client_cert_cn": None,
        "client_cert_organizations": [],
        "client_cert_error": None,
        "tls_version": None,
        "cipher_suite": None,
    }
    if der:
        cert = x509.load_der_x509_certificate(der)
        common_names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        extension["client_cert_chain"] = [cert.public_bytes(Encoding.PEM).decode()]
        extension["client_cert_name"] = cert.subject.rfc4514_string()
        extension["client_cert_cn"] = str(common_names[0].value) if common_names else None
        organizations = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        extension["client_cert_organizations"] = [str(o.value) for o in organizations]
    return extension


class TLSScopeProtocol(HttpToolsProtocol):
    """uvicorn's httptools HTTP protocol, adding the ASGI TLS extension to every request's scope.

    Pass the class as uvicorn's ``http``. The peer certificate is read once per connection (the
    handshake is complete when the connection is made).
    """

    _tls: dict[str, Any] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Remember the connection's TLS details, then set up the connection as uvicorn does."""
        self._tls = peer_tls_extension(transport)
        super().connection_made(transport)

    def on_message_begin(self) -> None:
        """Start a request's scope as uvicorn does and add ``extensions.tls``."""
        super().on_message_begin()
        if self._tls is not None:
            extensions: dict[str, Any] = dict(self.scope.get("extensions") or {})
            extensions["tls"] = self._tls
            self.scope["extensions"] = extensions


@dataclass(frozen=True)
class ClientRule:
    """Which certificate names may call a set of paths.

    Attributes:
        what: a name for the callers' role in messages (``extender verbs``, ``webhooks``).
        paths: exact request paths covered.
        allowed_names: allowed subject common names; empty allows any certificate the CA signed.
    """

    what: str
    paths: frozenset[str]
    allowed_names: frozenset[str]


@dataclass(frozen=True)
class ClientAuth:
    """The service's client-certificate policy (``--allowed-client-names``, ``--allowed-webhook-client-names``).

    Attributes:
        extender_names: CNs allowed to call the extender verbs; empty: any certificate the CA signed.
        webhook_names: CNs allowed to call the admission webhooks; empty: any certificate the CA signed.
        inspection_names: CNs whose certificates identify a caller of inspection (``/apis/v1/...``, ``/ui``,
            ``/metrics``; :mod:`app.server.inspectauth`); empty: any certificate the CA signed.
    """

    extender_names: frozenset[str] = frozenset()
    webhook_names: frozenset[str] = frozenset()
    inspection_names: frozenset[str] = frozenset()

    def rules(self, extender_paths: Iterable[str], webhook_paths: Iterable[str]) -> list[ClientRule]:
        """The :class:`ClientRule` s for the service's extender and webhook paths (inspection has its own guard,
        :mod:`app.server.inspectauth`, which takes :attr:`inspection_names`)."""
        return [
            ClientRule("extender verbs", frozenset(extender_paths), self.extender_names),
            ClientRule("webhooks", frozenset(webhook_paths), self.webhook_names),
        ]


class ClientAuthMiddleware:
    """ASGI middleware enforcing :class:`ClientRule` s on the client certificate of each request.

    Paths no rule covers pass. A covered path without a verified client certificate is answered
    401, with one whose CN is not allowed 403 (``{"message": ...}``). The TLS context must verify
    presented certificates (``CERT_OPTIONAL`` or ``CERT_REQUIRED`` with the client CA loaded).

    Args:
        app: the wrapped application.
        rules: the rules; a path in two rules takes the first.
    """

    def __init__(self, app: ASGIApp, rules: Iterable[ClientRule]) -> None:
        self.app = app
        self._by_path = rules_by_path(rules)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401/403 for a covered path whose caller is not allowed; pass everything else on."""
        if scope["type"] == "http":
            rule = self._by_path.get(scope["path"])
            if rule is not None:
                refusal = client_refusal(rule, (scope.get("extensions") or {}).get("tls"))
                if refusal is not None:
                    await error_response(*refusal)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def rules_by_path(rules: Iterable[ClientRule]) -> dict[str, ClientRule]:
    """Request path -> the rule covering it; a path in two rules takes the first."""
    by_path: dict[str, ClientRule] = {}
    for rule in rules:
        for path in rule.paths:
            by_path.setdefault(path, rule)
    return by_path


def client_refusal(rule: ClientRule, tls: dict[str, Any] | None) -> tuple[str, int] | None:
    """(message, 401 or 403) when the client certificate of ``tls`` (the ASGI TLS extension; None or without a
    chain: no verified certificate) may not call ``rule``'s paths; None when it may."""
    if not tls or not tls.get("client_cert_chain"):
        return (f"the {rule.what} require a client certificate signed by the --client-ca-file CA", 401)
    cn = tls.get("client_cert_cn")
    if rule.allowed_names and cn not in rule.allowed_names:
        allowed = ", ".join(sorted(rule.allowed_names))
        return (f"client certificate CN {cn!r} may not call the {rule.what} (allowed: {allowed})", 403)
    return None


def parse_names(text: str) -> frozenset[str]:
    """``"a, b,,c"`` -> ``{"a", "b", "c"}`` (comma-separated, blanks dropped)."""
    return frozenset(part.strip() for part in text.split(",") if part.strip())
