"""The probe that found issue 46, redone on the production shape: ``koord scheduler`` against an API server over
HTTPS with ``--client-ca-file`` (as manifests/overlays/production runs both roles). Without credentials every GET
under ``/apis/v1/``, ``/ui`` and ``/metrics`` answers 401; the webhooks role answers 404 for every inspection path
and serves only the webhooks, health and metrics; a client certificate of the CA is an identity RBAC decides on."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.server.clientauth import ClientAuth
from app.server.tls import CertReloader
from tests.client.fake_apiserver import FakeAPIServer
from tests.conftest import wire
from tests.server.servekit import delegated_service, get_paths


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    names = ["--client-cn", "koord-scheduler", "--client-cn", "kube-apiserver", "--client-cn", "ops"]
    result = CliRunner().invoke(cli, ["certs", "--out-dir", str(out), *names])
    assert result.exit_code == 0, result.output
    return out


@dataclass
class Shape:
    """One process of the production shape: its URL, the certificates, the fake API server and the app."""

    url: str
    certs: Path
    fake: FakeAPIServer
    app: object

    def client(self, cn: str | None = None) -> httpx.Client:
        """An HTTPS client trusting the CA, presenting the client certificate ``cn`` when given."""
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        if cn:
            context.load_cert_chain(str(self.certs / f"{cn}.crt"), str(self.certs / f"{cn}.key"))
        return httpx.Client(base_url=self.url, verify=context, timeout=10)


def _production(tmp_path: Path, certs: Path, role: str) -> Iterator[Shape]:
    """``koord scheduler --role ROLE --tls-cert-file ... --client-ca-file ... --allowed-client-names koord-scheduler
    --allowed-webhook-client-names kube-apiserver`` against the fake API server, wired as the CLI wires it."""
    tmp_path.mkdir()
    client_auth = ClientAuth(frozenset({"koord-scheduler"}), frozenset({"kube-apiserver"}))
    tls = CertReloader(certs / "tls.crt", certs / "tls.key", client_ca_file=certs / "ca.crt").context
    with delegated_service(tmp_path, role=role, tls=tls, client_auth=client_auth) as srv:
        yield Shape(srv.url, certs, srv.fake, srv.app)


@pytest.fixture
def extender(tmp_path: Path, certs: Path) -> Iterator[Shape]:
    yield from _production(tmp_path / "extender", certs, "extender")


@pytest.fixture
def webhooks(tmp_path: Path, certs: Path) -> Iterator[Shape]:
    yield from _production(tmp_path / "webhooks", certs, "webhooks")


def test_every_get_without_credentials_is_401(extender: Shape) -> None:
    paths = get_paths(extender.app)
    assert "/apis/v1/snapshot" in paths and "/apis/v1/pods/x/x" in paths and "/ui" in paths and "/metrics" in paths
    assert any(p.startswith("/apis/v1/plugins/ElasticQuota/") for p in paths)
    with extender.client() as c:
        codes = {path: c.get(path).status_code for path in paths}
        assert codes == dict.fromkeys(paths, 401)
        assert c.post("/apis/v1/explain", json=wire("filter.json")).status_code == 401
        for path in ("/healthz", "/readyz"):
            assert c.get(path).status_code == 200
    assert extender.fake.reviews("tokenreviews") == []


def test_the_webhooks_role_serves_no_inspection(extender: Shape, webhooks: Shape) -> None:
    inspection = [p for p in get_paths(extender.app) if p != "/metrics"]
    token = {"Authorization": "Bearer anything"}
    with webhooks.client() as c, webhooks.client("ops") as with_cert:
        for path in inspection:
            assert c.get(path).status_code == 404, path
            assert c.get(path, headers=token).status_code == 404, path
            assert with_cert.get(path).status_code == 404, path
        assert c.post("/apis/v1/explain", json=wire("filter.json")).status_code == 404
        assert c.get("/metrics").status_code == 401
        assert c.get("/healthz").status_code == 200
    with webhooks.client("kube-apiserver") as api:  # the webhooks keep their client-certificate rule
        assert api.post("/mutate-pod", json=wire("admissionreview.json")).status_code == 200
    with webhooks.client("ops") as ops:
        assert ops.post("/mutate-pod", json=wire("admissionreview.json")).status_code == 403


def test_a_client_certificate_is_an_identity_that_rbac_decides_on(extender: Shape) -> None:
    with extender.client("ops") as ops:
        denied = ops.get("/apis/v1/pods/team-a/web")
        assert denied.status_code == 403
        assert denied.json()["message"].startswith('pods "web" is forbidden: User "ops" cannot get resource "pods"')
        extender.fake.grant("ops", verb="get", resource="pods", namespace="team-a")
        assert ops.get("/apis/v1/pods/team-b/db").status_code == 403
        assert extender.fake.reviews("tokenreviews") == []  # a certificate needs no TokenReview
        extender.fake.grant("ops", verb="get", path="/metrics")
        assert ops.get("/metrics").status_code == 200
    with extender.client("koord-scheduler") as scheduler:  # the extender verbs' certificate is an identity too
        assert scheduler.post("/filter", json=wire("filter.json")).status_code == 200
        assert scheduler.get("/apis/v1/snapshot").status_code == 403
