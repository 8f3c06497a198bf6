"""``koord certs``: a self-signed CA and a serving certificate for the webhooks and the extender.

For development and small clusters (production: cert-manager). Writes ``ca.crt``, ``ca.key``,
``tls.crt``, ``tls.key`` (PEM, keys mode 0600) into ``--out-dir``. An existing CA in that directory
is reused, so renewing the serving certificate keeps every ``caBundle`` valid; the running service
picks the new certificate up without restart (:mod:`app.server.tls`). With ``--patch-webhooks``
(Kubernetes mode) the CA is written into ``clientConfig.caBundle`` of every webhook of the
Mutating/ValidatingWebhookConfigurations named, as upstream's manager does
(``pkg/webhook/util/controller``).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

if TYPE_CHECKING:
    from app.client.sync import Client

#: Upstream's webhook configuration names (``config/webhook/manifests.yaml`` of koord-manager).
MUTATING_CONFIGURATION = "koord-mutating-webhook-configuration"
VALIDATING_CONFIGURATION = "koord-validating-webhook-configuration"


class CertError(Exception):
    """Certificates cannot be written or the webhook configurations cannot be patched; the message says why."""


def dns_names(service: str, namespace: str) -> list[str]:
    """The serving certificate's DNS SANs: every name the API server and kube-scheduler may dial."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
    ]


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def new_ca(
    common_name: str = "koordinator-py-ca", days: int = 3650
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate (basicConstraints CA:true, keyCertSign) and its key."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def new_serving_cert(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, dns: list[str], ips: list[str], days: int
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A serving certificate (serverAuth) for ``dns`` and ``ips`` signed by ``ca``."""
    key = _key()
    now = dt.datetime.now(dt.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def new_client_cert(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, common_name: str, days: int
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A client certificate (clientAuth) with subject ``CN=common_name`` signed by ``ca``: what
    kube-scheduler (``tlsConfig.certFile``) or the API server (webhook kubeConfigFile) presents to a
    service started with ``--client-ca-file``."""
    key = _key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _write(path: Path, data: bytes, private: bool) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    if private:
        os.chmod(tmp, 0o600)
    os.replace(tmp, path)  # atomic: a reloading server never reads half a file


def load_or_create_ca(out: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, bool]:
    """The CA in ``out`` (``ca.crt``/``ca.key``) or a new one; the flag says whether it was created.

    Raises:
        CertError: the files exist but cannot be parsed.
    """
    crt, key = out / "ca.crt", out / "ca.key"
    if crt.exists() and key.exists():
        try:
            ca = x509.load_pem_x509_certificate(crt.read_bytes())
            ca_key = serialization.load_pem_private_key(key.read_bytes(), None)
        except (ValueError, TypeError) as exc:
            raise CertError(f"{crt} / {key}: not a PEM CA certificate and key: {exc}") from None
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise CertError(f"{key}: expected an EC private key")
        return ca, ca_key, False
    ca, ca_key = new_ca()
    return ca, ca_key, True


def write_certs(
    out: Path, service: str, namespace: str, ips: list[str], days: int, clients: list[str] | None = None
) -> bytes:
    """Write ``ca.crt``, ``ca.key`` (if new), ``tls.crt`` and ``tls.key``, and for each CN of ``clients`` a
    client certificate ``<cn>.crt`` / ``<cn>.key`` signed by the same CA; return the CA PEM.

    Raises:
        CertError: ``out`` cannot be written or holds an unreadable CA.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        ca, ca_key, created = load_or_create_ca(out)
        ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        if created:
            _write(out / "ca.key", _pem_key(ca_key), True)
            _write(out / "ca.crt", ca_pem, False)
        cert, key = new_serving_cert(ca, ca_key, dns_names(service, namespace), ips, days)
        # Key first: a watcher that sees the new cert with the old key refuses the pair and retries.
        _write(out / "tls.key", _pem_key(key), True)
        _write(out / "tls.crt", cert.public_bytes(serialization.Encoding.PEM), False)
        for cn in clients or []:
            client_cert, client_key = new_client_cert(ca, ca_key, cn, days)
            _write(out / f"{cn}.key", _pem_key(client_key), True)
            _write(out / f"{cn}.crt", client_cert.public_bytes(serialization.Encoding.PEM), False)
    except OSError as exc:
        raise CertError(f"cannot write certificates to {out}: {exc.strerror or exc}") from None
    return ca_pem


#: The admissionregistration.k8s.io/v1 collections of the two webhook configuration kinds.
_WEBHOOK_CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1"


def patch_ca_bundles(client: Client, ca_pem: bytes, mutating: str, validating: str) -> list[str]:
    """Set ``clientConfig.caBundle`` of every webhook of both configurations (one JSON patch each); return
    what was patched.

    Args:
        client: an API client (:class:`app.client.sync.Client`).
        ca_pem: the CA certificate, PEM.
        mutating, validating: names of the Mutating/ValidatingWebhookConfiguration.

    Raises:
        CertError: a configuration is missing, the API refused the patch, or no answer came.
    """
    from app.client.errors import ApiError
    from app.client.wire import JSON_PATCH

    bundle = base64.b64encode(ca_pem).decode()
    done = []
    for kind, name, plural in (
        ("MutatingWebhookConfiguration", mutating, "mutatingwebhookconfigurations"),
        ("ValidatingWebhookConfiguration", validating, "validatingwebhookconfigurations"),
    ):
        path = f"{_WEBHOOK_CONFIGURATIONS}/{plural}/{name}"
        try:
            webhooks = client.get(path).get("webhooks")
            count = len(webhooks) if isinstance(webhooks, list) else 0
            ops = [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle} for i in range(count)]
            if ops:
                client.request("PATCH", path, body=ops, content_type=JSON_PATCH)
        except ApiError as exc:
            code = f"HTTP {exc.status}: " if exc.status else ""  # ConnectionFailed has none
            raise CertError(f"{kind} {name}: {code}{exc}") from None
        done.append(f"{kind}/{name} ({len(ops)} webhooks)")
    return done


def certs(
    out_dir: Annotated[Path, typer.Option(help="Directory for ca.crt, ca.key, tls.crt, tls.key.")] = Path("certs"),
    service: Annotated[
        str, typer.Option(help="Service name the certificate is for (the webhooks' Service by default).")
    ] = "koord-webhooks",
    namespace: Annotated[str, typer.Option(help="Namespace of the service.")] = "koordinator-system",
    ip: Annotated[list[str] | None, typer.Option(help="IP SAN (repeatable).")] = None,
    days: Annotated[int, typer.Option(help="Validity of the serving certificate, days.")] = 365,
    client_cn: Annotated[
        list[str] | None,
        typer.Option(help="Also write a client certificate <CN>.crt/.key for --client-ca-file (repeatable)."),
    ] = None,
    patch_webhooks: Annotated[
        bool, typer.Option(help="Write the CA into the webhook configurations' caBundle (Kubernetes mode).")
    ] = False,
    kubeconfig: Annotated[
        Path | None, typer.Option(help="kubeconfig for --patch-webhooks (default: in-cluster/~/.kube).")
    ] = None,
    mutating_configuration: Annotated[
        str, typer.Option(help="MutatingWebhookConfiguration name.")
    ] = MUTATING_CONFIGURATION,
    validating_configuration: Annotated[
        str, typer.Option(help="ValidatingWebhookConfiguration name.")
    ] = VALIDATING_CONFIGURATION,
) -> None:
    """Write a self-signed CA and serving certificate; optionally patch the webhook configurations' caBundle."""
    ips = ip if ip is not None else ["127.0.0.1"]
    if days <= 0:
        typer.echo("error: --days must be positive", err=True)
        raise typer.Exit(2)
    try:
        for value in ips:
            ipaddress.ip_address(value)
    except ValueError as exc:
        typer.echo(f"error: --ip: {exc}", err=True)
        raise typer.Exit(2) from None
    for cn in client_cn or []:
        if not cn or "/" in cn or cn.startswith("."):
            typer.echo(f"error: --client-cn: {cn!r} cannot name a file", err=True)
            raise typer.Exit(2)
    client = _webhook_client(kubeconfig, mutating_configuration, validating_configuration) if patch_webhooks else None
    kept = (out_dir / "ca.crt").exists() and (out_dir / "ca.key").exists()
    try:
        ca_pem = write_certs(out_dir, service, namespace, ips, days, client_cn)
        if kept:
            typer.echo(f"kept the CA in {out_dir}/ca.crt and ca.key (remove both for a new CA)")
        else:
            typer.echo(f"wrote a new CA to {out_dir}/ca.crt and ca.key")
        typer.echo(f"wrote {out_dir}/tls.crt and tls.key for {', '.join(dns_names(service, namespace)[:3])}, ...")
        for cn in client_cn or []:
            typer.echo(f"wrote {out_dir}/{cn}.crt and {cn}.key (client certificate, CN={cn})")
        if client is not None:
            with client:
                for line in patch_ca_bundles(client, ca_pem, mutating_configuration, validating_configuration):
                    typer.echo(f"patched caBundle of {line}")
    except CertError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo("next: store the serving certificate where the service reads it:")
    typer.echo(
        f"  kubectl -n {namespace} create secret tls {service}-tls --cert={out_dir}/tls.crt --key={out_dir}/tls.key"
    )
    if not patch_webhooks:
        typer.echo("  and trust the CA in the webhook configurations: rerun with --patch-webhooks")


def _webhook_client(kubeconfig: Path | None, mutating: str, validating: str) -> Client:
    """An API client that has read both webhook configurations: ``--patch-webhooks`` checks the cluster
    before anything is written, so an unreachable API server or a missing configuration changes nothing.

    Raises:
        typer.Exit: no usable kubeconfig, no answer, or a configuration missing (code 1).
    """
    from app.client.errors import ApiError
    from app.client.sync import Client

    try:
        client = Client.from_config(str(kubeconfig) if kubeconfig else None)
    except Exception as exc:  # ConfigException, OSError: kubeconfig problems
        typer.echo(f"error: cannot reach the API server: {exc}; nothing was written", err=True)
        raise typer.Exit(1) from None
    for kind, name, plural in (
        ("MutatingWebhookConfiguration", mutating, "mutatingwebhookconfigurations"),
        ("ValidatingWebhookConfiguration", validating, "validatingwebhookconfigurations"),
    ):
        try:
            client.get(f"{_WEBHOOK_CONFIGURATIONS}/{plural}/{name}")
        except ApiError as exc:
            client.close()
            code = f"HTTP {exc.status}: " if exc.status else "cannot reach the API server: "
            typer.echo(f"error: {kind} {name}: {code}{exc}; nothing was written", err=True)
            raise typer.Exit(1) from None
    return client
