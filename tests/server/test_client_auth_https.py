"""Mutual TLS over real HTTPS: with a client CA the extender verbs answer only kube-scheduler's certificate,
the webhooks only the API server's, inspection and metrics any certificate of the CA (embedded mode: no API
server to ask about tokens), health stays open to the kubelet; without one, behaviour is as before.
Certificates come from ``koord certs --client-cn``."""

from __future__ import annotations

import shutil
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from typer.testing import CliRunner

from app.cli.certs import new_ca, new_client_cert
from app.cli.main import cli
from app.server.app import create_app
from app.server.clientauth import ClientAuth, TLSScopeProtocol
from app.server.httpprotocol import ServiceProtocol
from app.server.tls import CertReloader
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, filter_body, free_port, wire


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    result = CliRunner().invoke(
        cli, ["certs", "--out-dir", str(out), "--client-cn", "koord-scheduler", "--client-cn", "kube-apiserver"]
    )
    assert result.exit_code == 0, result.output
    assert "client certificate, CN=koord-scheduler" in result.output
    # a certificate with an allowed name, from a CA the service does not trust
    rogue_ca, rogue_key = new_ca("rogue")
    cert, key = new_client_cert(rogue_ca, rogue_key, "koord-scheduler", 1)
    (out / "rogue.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / "rogue.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return out


class TLSServer:
    """The app under uvicorn with TLS as ``koord scheduler`` sets it up."""

    def __init__(
        self, certs: Path, cluster: Path, client_auth: ClientAuth | None, protocol: type[Any] = ServiceProtocol
    ) -> None:
        ca = certs / "ca.crt" if client_auth is not None else None
        reloader = CertReloader(certs / "tls.crt", certs / "tls.key", client_ca_file=ca)
        app = create_app(FileSource(cluster, poll_interval=0), client_auth=client_auth)
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                http=protocol,
                ssl_context_factory=lambda _cfg, _default: reloader.context,
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.certs = certs

    def client(self, cn: str | None) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        if cn:
            context.load_cert_chain(str(self.certs / f"{cn}.crt"), str(self.certs / f"{cn}.key"))
        return httpx.Client(base_url=f"https://localhost:{self.port}", verify=context, timeout=10)

    def __enter__(self) -> TLSServer:
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                break
            time.sleep(0.02)
        with self.client(None) as c:
            for _ in range(200):
                if c.get("/readyz").status_code == 200:
                    break
                time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    target = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, target)
    return target


@pytest.fixture(params=[ServiceProtocol, TLSScopeProtocol], ids=["service-protocol", "asgi-only"])
def mtls(certs: Path, cluster: Path, request: pytest.FixtureRequest) -> Iterator[TLSServer]:
    """The service with client-certificate rules, under its own protocol (``/filter`` and ``/prioritize``
    answered inline) and under the plain ASGI protocol: the rules must hold the same on both paths."""
    auth = ClientAuth(frozenset({"koord-scheduler"}), frozenset({"kube-apiserver"}))
    with TLSServer(certs, cluster, auth, protocol=request.param) as srv:
        yield srv


def _calls() -> dict[str, dict[str, object]]:
    return {
        "/filter": filter_body(wire("filter.json")["Pod"], ["node-idle"]),
        "/mutate-pod": wire("admissionreview.json"),
    }


@pytest.mark.parametrize(
    ("cn", "filter_code", "webhook_code"),
    [
        ("koord-scheduler", 200, 403),
        ("kube-apiserver", 403, 200),
        (None, 401, 401),
    ],
    ids=["scheduler-cert", "apiserver-cert", "no-cert"],
)
def test_each_caller_reaches_only_its_endpoints(
    mtls: TLSServer, cn: str | None, filter_code: int, webhook_code: int
) -> None:
    calls = _calls()
    with mtls.client(cn) as c:
        r = c.post("/filter", json=calls["/filter"])
        assert r.status_code == filter_code, r.text
        p = c.post("/prioritize", json=calls["/filter"])
        assert (p.status_code, p.json().get("message") if filter_code != 200 else None) == (
            filter_code,
            r.json().get("message") if filter_code != 200 else None,
        ), p.text
        w = c.post("/mutate-pod", json=calls["/mutate-pod"])
        assert w.status_code == webhook_code, w.text
        for answer in (r, w):
            if answer.status_code == 403:
                assert f"client certificate CN {cn!r} may not call the" in answer.json()["message"]
            if answer.status_code == 401:
                assert "require a client certificate signed by the --client-ca-file CA" in answer.json()["message"]
        # probes need no certificate; metrics and inspection need one of the CA (issue 46)
        for path in ("/healthz", "/readyz"):
            assert c.get(path).status_code == 200, path
        for path in ("/metrics", "/apis/v1/nodes/node-idle", "/ui"):
            assert c.get(path).status_code == (200 if cn else 401), path


def test_a_certificate_from_another_ca_is_refused_in_the_handshake(mtls: TLSServer) -> None:
    with mtls.client("rogue") as c, pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
        c.post("/filter", json=_calls()["/filter"])  # no HTTP answer at all: the TLS handshake fails


def test_without_a_client_ca_anyone_may_call(certs: Path, cluster: Path) -> None:
    with TLSServer(certs, cluster, None) as srv, srv.client(None) as c:
        assert c.post("/filter", json=_calls()["/filter"]).status_code == 200
        assert c.post("/mutate-pod", json=_calls()["/mutate-pod"]).status_code == 200


def test_empty_allowed_names_accept_any_certificate_of_the_ca(certs: Path, cluster: Path) -> None:
    with TLSServer(certs, cluster, ClientAuth()) as srv:
        with srv.client("kube-apiserver") as c:
            assert c.post("/filter", json=_calls()["/filter"]).status_code == 200
        with srv.client(None) as c:
            assert c.post("/filter", json=_calls()["/filter"]).status_code == 401


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--client-ca-file", "ca.crt"], "--client-ca-file needs TLS"),
        (["--allowed-client-names", "koord-scheduler"], "need --client-ca-file"),
        (["--allowed-inspection-client-names", "ops"], "need --client-ca-file"),
    ],
)
def test_flags_that_cannot_work_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["scheduler", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def _explain_body() -> dict[str, object]:
    return filter_body(wire("filter.json")["Pod"], ["node-idle"])


@pytest.mark.parametrize(
    ("cn", "code"),
    [("koord-scheduler", 200), ("kube-apiserver", 200), (None, 401)],
    ids=["scheduler-cert", "apiserver-cert", "no-cert"],
)
def test_explain_runs_the_plugins_only_for_a_certificate_of_the_ca(mtls: TLSServer, cn: str | None, code: int) -> None:
    """POST /apis/v1/explain runs the whole filter pipeline: with client authentication it needs a certificate
    (any the CA signed when no --allowed-inspection-client-names), as every inspection call does (issue 46)."""
    with mtls.client(cn) as c:
        r = c.post("/apis/v1/explain", json=_explain_body())
        assert r.status_code == code, r.text
        if code == 401:
            assert r.json()["message"] == (
                "Unauthorized: this call needs a client certificate signed by the --client-ca-file CA"
            )
        else:
            assert "node-idle" in r.json()["nodes"]
        for path in ("/apis/v1/nodes/node-idle", "/apis/v1/__services__", "/apis/v1/plugins"):
            assert c.get(path).status_code == code, path


def test_explain_answers_403_to_a_name_not_allowed(certs: Path, cluster: Path) -> None:
    auth = ClientAuth(frozenset({"koord-scheduler"}), frozenset({"kube-apiserver"}), frozenset({"koord-scheduler"}))
    with TLSServer(certs, cluster, auth) as srv:
        with srv.client("kube-apiserver") as c:
            r = c.post("/apis/v1/explain", json=_explain_body())
            assert r.status_code == 403, r.text
            assert r.json()["message"] == (
                "client certificate CN 'kube-apiserver' may not call the inspection calls (allowed: koord-scheduler)"
            )
        with srv.client("koord-scheduler") as c:
            assert c.post("/apis/v1/explain", json=_explain_body()).status_code == 200


def test_without_a_client_ca_explain_stays_open(certs: Path, cluster: Path) -> None:
    with TLSServer(certs, cluster, None) as srv, srv.client(None) as c:
        assert c.post("/apis/v1/explain", json=_explain_body()).status_code == 200
        for path in ("/apis/v1/nodes/node-idle", "/apis/v1/snapshot", "/metrics", "/ui"):
            assert c.get(path).status_code == 200, path


def test_koord_explain_presents_a_client_certificate(mtls: TLSServer, tmp_path: Path) -> None:
    """``koord explain --client-certificate/--client-key`` reaches explain on a service with client authentication;
    without them the service's 401 is the command's error (exit 2)."""
    import json

    pod_file = tmp_path / "pod.json"
    pod_file.write_text(json.dumps(wire("filter.json")["Pod"]))
    base = [
        "explain",
        "--pod",
        str(pod_file),
        "--nodes",
        "node-idle",
        "--server",
        f"https://localhost:{mtls.port}",
        "--certificate-authority",
        str(mtls.certs / "ca.crt"),
        "-o",
        "json",
    ]
    refused = CliRunner().invoke(cli, base)
    assert refused.exit_code == 2, refused.output
    assert "answered 401" in " ".join(refused.output.split())
    cert = ["--client-certificate", str(mtls.certs / "koord-scheduler.crt")]
    answered = CliRunner().invoke(cli, [*base, *cert, "--client-key", str(mtls.certs / "koord-scheduler.key")])
    assert answered.exit_code == 0, answered.output
    assert "node-idle" in json.loads(answered.output)["nodes"]
    no_cert = CliRunner().invoke(cli, [*base, "--client-key", str(mtls.certs / "koord-scheduler.key")])
    assert no_cert.exit_code == 2 and "--client-key needs --client-certificate" in no_cert.output
