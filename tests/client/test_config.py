"""Configuration loading (kubernetes' loaders) and what the clients derive from it, against real servers:
contexts, tokens, exec plugins, client certificates over TLS, in-cluster token rotation, bad configuration."""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes.config.incluster_config import InClusterConfigLoader

from app.cli.certs import _key, _pem_key, new_ca, new_serving_cert
from app.client.aio import AsyncClient
from app.client.config import ConfigException, connection_settings, load_configuration
from app.client.errors import ConnectionFailed, Unauthorized
from app.client.sync import Client
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class PKI:
    """A throw-away CA, a serving certificate for 127.0.0.1 and a client certificate (clientAuth)."""

    def __init__(self, tmp: Path) -> None:
        self.ca, ca_key = new_ca("client-test-ca", days=1)
        cert, key = new_serving_cert(self.ca, ca_key, ["localhost"], ["127.0.0.1"], days=1)
        other_ca, _ = new_ca("someone-else", days=1)
        self.ca_pem = self.ca.public_bytes(serialization.Encoding.PEM)
        self.other_ca_pem = other_ca.public_bytes(serialization.Encoding.PEM)
        (tmp / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (tmp / "tls.key").write_bytes(_pem_key(key))
        (tmp / "ca.crt").write_bytes(self.ca_pem)
        ckey = _key()
        now = dt.datetime.now(dt.UTC)
        client = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "system:koordlet")]))
            .issuer_name(self.ca.subject)
            .public_key(ckey.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        self.client_pem = client.public_bytes(serialization.Encoding.PEM)
        self.client_key_pem = _pem_key(ckey)
        self.tmp = tmp

    def server_context(self, require_client_cert: bool) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.tmp / "tls.crt"), str(self.tmp / "tls.key"))
        if require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(str(self.tmp / "ca.crt"))
        return ctx


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    return PKI(tmp_path)


@pytest.fixture
def tls_fake(pki: PKI) -> Iterator[FakeAPIServer]:
    f = FakeAPIServer(tls=pki.server_context(require_client_cert=True))
    yield f
    f.close()


def test_current_context_and_an_explicit_context(fake: FakeAPIServer, kubeconfig: str) -> None:
    cfg = load_configuration(kubeconfig)
    assert cfg.host == fake.url
    with Client(cfg) as client:
        assert client.host == fake.url and client.get("/version")["gitVersion"] == "v1.31.0"
    other = load_configuration(kubeconfig, context="other")
    assert other.host == "http://127.0.0.1:9"
    with pytest.raises(ConfigException):
        load_configuration(kubeconfig, context="no-such-context")


def test_client_certificate_and_ca_data_over_tls(tls_fake: FakeAPIServer, pki: PKI, tmp_path: Path) -> None:
    user = {"client-certificate-data": _b64(pki.client_pem), "client-key-data": _b64(pki.client_key_pem)}
    good = write_kubeconfig(
        tmp_path / "good", tls_fake.url, user=user, **{"certificate-authority-data": _b64(pki.ca_pem)}
    )
    with Client.from_config(good) as client:
        assert client.get("/version")["major"] == "1"
    assert "authorization" not in tls_fake.requests[-1].headers, "certificate authentication sends no token"
    wrong_ca = write_kubeconfig(
        tmp_path / "wrong", tls_fake.url, user=user, **{"certificate-authority-data": _b64(pki.other_ca_pem)}
    )
    with Client.from_config(wrong_ca) as client, pytest.raises(ConnectionFailed, match="CERTIFICATE_VERIFY_FAILED"):
        client.get("/version")
    no_cert = write_kubeconfig(
        tmp_path / "nocert", tls_fake.url, user={"token": TOKEN}, **{"certificate-authority-data": _b64(pki.ca_pem)}
    )
    with Client.from_config(no_cert) as client, pytest.raises(ConnectionFailed):
        client.get("/version")  # the server requires a client certificate


async def test_insecure_skip_verify_and_tls_server_name(pki: PKI, tmp_path: Path) -> None:
    fake = FakeAPIServer(tls=pki.server_context(require_client_cert=False))
    try:
        insecure = write_kubeconfig(tmp_path / "insecure", fake.url, **{"insecure-skip-tls-verify": True})
        async with AsyncClient.from_config(insecure) as client:
            assert (await client.get("/version"))["major"] == "1"
        # The certificate names localhost and 127.0.0.1: dialling "127.0.0.1" while checking a server name the
        # certificate lacks must fail, and checking "localhost" must pass.
        ca = {"certificate-authority-data": _b64(pki.ca_pem)}
        wrong = write_kubeconfig(tmp_path / "wrong", fake.url, **ca, **{"tls-server-name": "kubernetes.default"})
        async with AsyncClient.from_config(wrong) as client:
            with pytest.raises(ConnectionFailed, match=r"CERTIFICATE_VERIFY_FAILED|match"):
                await client.get("/version")
        right = write_kubeconfig(tmp_path / "right", fake.url, **ca, **{"tls-server-name": "localhost"})
        async with AsyncClient.from_config(right) as client:
            assert (await client.get("/version"))["major"] == "1"
    finally:
        fake.close()


def test_exec_credential_plugin(fake: FakeAPIServer, tmp_path: Path) -> None:
    cred = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": TOKEN}}
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", f"print({json.dumps(json.dumps(cred))})"],
            "interactiveMode": "Never",
        }
    }
    with Client.from_config(write_kubeconfig(tmp_path / "kc", fake.url, user=user)) as client:
        assert client.get("/version")["major"] == "1"
    assert fake.requests[-1].headers["authorization"] == f"Bearer {TOKEN}"


async def test_tokens_are_read_per_request_so_refresh_hooks_rotate_them(fake: FakeAPIServer) -> None:
    cfg = kubernetes.client.Configuration()
    cfg.host = fake.url
    tokens = iter(["stale", TOKEN])

    def refresh(conf: Any) -> None:  # what the loaders install: re-read the credential when it expired
        conf.api_key["BearerToken"] = f"Bearer {next(tokens, TOKEN)}"

    cfg.refresh_api_key_hook = refresh
    async with AsyncClient(cfg) as client:
        with pytest.raises(Unauthorized):
            await client.get("/version")
        assert (await client.get("/version"))["major"] == "1"
    assert [r.headers["authorization"] for r in fake.requests] == ["Bearer stale", f"Bearer {TOKEN}"]


async def test_in_cluster_service_account_with_token_rotation(pki: PKI, tmp_path: Path) -> None:
    fake = FakeAPIServer(tls=pki.server_context(require_client_cert=False), tokens={"first", "second"})
    token = tmp_path / "token"
    token.write_text("first")
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(fake.port)}
    loader = InClusterConfigLoader(token_filename=str(token), cert_filename=str(tmp_path / "ca.crt"), environ=environ)
    cfg = kubernetes.client.Configuration()
    loader.load_and_set(cfg)
    try:
        with Client(cfg) as client:
            client.get("/version")
            token.write_text("second")  # the kubelet rotated the projected token
            loader.token_expires_at = dt.datetime.now() - dt.timedelta(seconds=1)  # the loader re-reads it each minute
            client.get("/version")
        assert [r.headers["authorization"] for r in fake.requests] == ["bearer first", "bearer second"]
    finally:
        fake.close()


def test_bad_configuration_is_a_clear_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = kubernetes.client.Configuration()
    cfg.host = "ftp://example"
    with pytest.raises(ConfigException, match="invalid API server URL"):
        connection_settings(cfg)
    cfg.host = "https://127.0.0.1:6443"
    cfg.ssl_ca_cert = str(tmp_path / "missing-ca.crt")
    with pytest.raises(ConfigException, match=r"missing-ca\.crt"):
        Client(cfg)
    (tmp_path / "garbage.crt").write_text("not a certificate")
    cfg.ssl_ca_cert = str(tmp_path / "garbage.crt")
    with pytest.raises(ConfigException, match=r"garbage\.crt"):
        AsyncClient(cfg)
    with pytest.raises(ValueError, match="max_connections"):
        Client(load_configuration(write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")), max_connections=0)


def test_default_location_falls_back_to_in_cluster_only_inside_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigException, match="Invalid kube-config"):
        load_configuration()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigException, match=r"[Ss]ervice token file does not exist"):
        load_configuration()  # the in-cluster loader was tried: its token file is what is missing here
    good = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")
    monkeypatch.setenv("KUBECONFIG", good)
    assert load_configuration().host == "http://127.0.0.1:9"
