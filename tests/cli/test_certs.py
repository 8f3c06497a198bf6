"""`koord certs` and the serving-certificate reload, checked with real TLS handshakes."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from cryptography import x509
from typer.testing import CliRunner

from app.cli.certs import dns_names, write_certs
from app.cli.main import cli
from app.server.app import create_app
from app.server.tls import CertReloader, TLSConfigError
from app.sources.files import FileSource
from tests.conftest import fake_nodes_cluster, free_port


def test_certs_command_writes_a_verifiable_chain(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    result = CliRunner().invoke(cli, ["certs", "--out-dir", str(out), "--ip", "10.0.0.7"])
    assert result.exit_code == 0, result.output
    for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
        assert (out / name).is_file()
    assert (out / "tls.key").stat().st_mode & 0o777 == 0o600
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    leaf.verify_directly_issued_by(ca)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    # The default service is the webhooks' (the only Service in manifests/; the extender is dialled on 127.0.0.1).
    assert san.get_values_for_type(x509.DNSName) == dns_names("koord-webhooks", "koordinator-system")
    assert "koord-webhooks.koordinator-system.svc" in san.get_values_for_type(x509.DNSName)
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    # Running it again renews the serving cert with the same CA (caBundles stay valid).
    again = CliRunner().invoke(cli, ["certs", "--out-dir", str(out)])
    assert again.exit_code == 0, again.output
    assert x509.load_pem_x509_certificate((out / "ca.crt").read_bytes()) == ca
    renewed = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert renewed.serial_number != leaf.serial_number
    renewed.verify_directly_issued_by(ca)


@pytest.mark.parametrize(
    ("args", "message"), [(["--ip", "nope"], "--ip"), (["--days", "0"], "--days must be positive")]
)
def test_certs_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["certs", "--out-dir", str(tmp_path), *args])
    assert result.exit_code == 2
    assert message in result.output


def test_certs_unreadable_ca_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("junk")
    (tmp_path / "ca.key").write_text("junk")
    result = CliRunner().invoke(cli, ["certs", "--out-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "not a PEM CA certificate and key" in result.output


def test_reloader_refuses_bad_initial_pair(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("junk")
    (tmp_path / "tls.key").write_text("junk")
    with pytest.raises(TLSConfigError, match="cannot load"):
        CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key")


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path, CertReloader]]:
    certs = tmp_path / "certs"
    write_certs(certs, "koord-scheduler-extender", "koordinator-system", ["127.0.0.1"], 30)
    reloader = CertReloader(certs / "tls.crt", certs / "tls.key", poll_seconds=0.1)
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    app = create_app(FileSource(fake_nodes_cluster(cluster), poll_interval=0), background=[lambda _s: reloader.watch()])
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        ssl_context_factory=lambda _cfg, _default: reloader.context,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield port, certs, reloader
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def served_serial(port: int, ca: Path) -> int:
    """Handshake verifying against the CA and the service DNS name; the served leaf's serial."""
    ctx = ssl.create_default_context(cafile=str(ca))
    name = "koord-scheduler-extender.koordinator-system.svc"
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=name) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert tls.recv(1024).startswith(b"HTTP/1.1 200")
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_renewed_certificate_is_served_without_restart(tls_server: tuple[int, Path, CertReloader]) -> None:
    port, certs, reloader = tls_server
    first = served_serial(port, certs / "ca.crt")
    assert first == x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes()).serial_number
    time.sleep(0.05)
    write_certs(certs, "koord-scheduler-extender", "koordinator-system", ["127.0.0.1"], 30)
    renewed = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes()).serial_number
    deadline = time.monotonic() + 5
    while reloader.reloads == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reloader.reloads == 1
    assert served_serial(port, certs / "ca.crt") == renewed != first


def test_mismatched_pair_keeps_serving_the_old_certificate(tls_server: tuple[int, Path, CertReloader]) -> None:
    port, certs, reloader = tls_server
    first = served_serial(port, certs / "ca.crt")
    other = certs / "other"
    write_certs(other, "x", "y", [], 30)
    (certs / "tls.key").write_bytes((other / "tls.key").read_bytes())  # key of another cert
    deadline = time.monotonic() + 5
    while reloader.failures == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reloader.failures >= 1
    assert served_serial(port, certs / "ca.crt") == first


def test_patch_webhooks_writes_the_ca_into_every_webhook(tmp_path: Path) -> None:
    """--patch-webhooks: one JSON patch per configuration adds clientConfig.caBundle to each webhook;
    a missing configuration is a clear error (exit 1), as is an unreachable API server."""
    import base64

    from tests.client.conftest import TOKEN, write_kubeconfig
    from tests.client.fake_apiserver import FakeAPIServer

    base = "/apis/admissionregistration.k8s.io/v1"
    hooks = [{"name": f"h{i}.koordinator.sh", "clientConfig": {"service": {"name": "x"}}} for i in range(2)]
    fake = FakeAPIServer(tokens={TOKEN})
    try:
        fake.seed(f"{base}/mutatingwebhookconfigurations", {"metadata": {"name": "m"}, "webhooks": hooks})
        fake.seed(f"{base}/validatingwebhookconfigurations", {"metadata": {"name": "v"}, "webhooks": hooks[:1]})
        kubeconfig = write_kubeconfig(tmp_path / "kc", fake.url)
        out = tmp_path / "certs"
        args = ["certs", "--out-dir", str(out), "--patch-webhooks", "--kubeconfig", kubeconfig]
        result = CliRunner().invoke(cli, [*args, "--mutating-configuration", "m", "--validating-configuration", "v"])
        assert result.exit_code == 0, result.output
        assert "patched caBundle of MutatingWebhookConfiguration/m (2 webhooks)" in result.output
        bundle = base64.b64encode((out / "ca.crt").read_bytes()).decode()
        mutating = fake.store[f"{base}/mutatingwebhookconfigurations"]["m"]["webhooks"]
        validating = fake.store[f"{base}/validatingwebhookconfigurations"]["v"]["webhooks"]
        assert [h["clientConfig"]["caBundle"] for h in mutating + validating] == [bundle] * 3
        assert mutating[0]["clientConfig"]["service"] == {"name": "x"}, "only caBundle is added"
        patches = [r for r in fake.requests if r.method == "PATCH"]
        assert {r.headers["content-type"] for r in patches} == {"application/json-patch+json"}
        missing = CliRunner().invoke(cli, [*args, "--mutating-configuration", "nope"])
        assert missing.exit_code == 1
        assert 'MutatingWebhookConfiguration nope: HTTP 404: mutatingwebhookconfigurations "nope" not found' in (
            missing.output
        )
    finally:
        fake.close()
    down = CliRunner().invoke(cli, [*args, "--mutating-configuration", "m"])
    assert down.exit_code == 1 and "nothing was written" in down.output
    # unreachable: checked before anything is written
    fresh = tmp_path / "fresh"
    down = CliRunner().invoke(cli, ["certs", "--out-dir", str(fresh), "--patch-webhooks", "--kubeconfig", kubeconfig])
    assert down.exit_code == 1 and "cannot reach the API server" in down.output and "nothing was written" in down.output
    assert not fresh.exists()


def test_certs_says_whether_the_ca_is_kept_and_what_comes_next(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    first = CliRunner().invoke(cli, ["certs", "--out-dir", str(out), "--namespace", "ns1"])
    assert first.exit_code == 0, first.output
    assert f"wrote a new CA to {out}/ca.crt" in first.output
    assert f"kubectl -n ns1 create secret tls koord-webhooks-tls --cert={out}/tls.crt --key={out}/tls.key" in (
        first.output
    )
    again = CliRunner().invoke(cli, ["certs", "--out-dir", str(out)])
    assert again.exit_code == 0 and f"kept the CA in {out}/ca.crt" in again.output
