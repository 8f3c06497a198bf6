"""``koord quota | gang | reservation | explain | snapshot --server`` send the kubeconfig's credentials (issue 46):
a bearer token, an exec plugin's token or a client certificate, loaded by the ``kubernetes`` package as kubectl
would, so the service's delegated authorization decides with the operator's own RBAC. Real commands against a
real service (over HTTP and HTTPS) that asks the fake API server."""

from __future__ import annotations

import json
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.server.clientauth import ClientAuth
from app.server.tls import CertReloader
from tests.client.conftest import write_kubeconfig
from tests.conftest import wire
from tests.server.servekit import DelegatedService, delegated_service

QUOTAS = "/apis/v1/plugins/ElasticQuota/quotas"


@pytest.fixture(autouse=True)
def _no_ambient_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No kubeconfig of the machine running the tests is read."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[DelegatedService]:
    with delegated_service(tmp_path) as srv:
        yield srv


def _kubeconfig(tmp_path: Path, user: dict[str, object], name: str = "user-kc") -> str:
    # the API server of the kubeconfig is never called by these commands: only its user's credentials are used
    return write_kubeconfig(tmp_path / name, "https://127.0.0.1:9", user)


def _koord(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, " ".join(result.output.split())


def test_the_token_of_the_kubeconfig_is_sent_and_rbac_decides(service: DelegatedService, tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path, {"token": "alice-token"})
    code, out = _koord("quota", "list", "--server", service.url, "--kubeconfig", kc)
    assert code == 2
    assert f'answered 403: forbidden: User "alice" cannot get path "{QUOTAS}"' in out
    service.fake.grant("devs", verb="get", path="/apis/v1/*")
    service.advance(11)
    code, out = _koord("quota", "list", "--server", service.url, "--kubeconfig", kc, "-o", "json")
    assert code == 0, out
    assert [r.body["spec"]["token"] for r in service.fake.reviews("tokenreviews")] == ["alice-token"] * 2


def test_without_credentials_the_service_answers_401(service: DelegatedService) -> None:
    code, out = _koord("gang", "list", "--server", service.url)
    assert code == 2
    assert "answered 401: Unauthorized: this call needs a bearer token" in out


def test_the_kubeconfig_kubectl_finds_is_used(
    service: DelegatedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path, {"token": "alice-token"}))
    service.fake.grant("alice", verb="get", path="/apis/v1/*")
    code, out = _koord("reservation", "list", "--server", service.url)
    assert code == 0, out


def test_an_exec_plugin_gives_the_token(service: DelegatedService, tmp_path: Path) -> None:
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "alice-token"},
    }
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    service.fake.grant("alice", verb="get", path="/apis/v1/*")
    code, out = _koord("gang", "list", "--server", service.url, "--kubeconfig", _kubeconfig(tmp_path, user))
    assert code == 0, out
    assert service.fake.reviews("tokenreviews")[-1].body["spec"]["token"] == "alice-token"


def test_explain_and_snapshot_send_the_token(service: DelegatedService, tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path, {"token": "alice-token"})
    service.fake.grant("alice", verb="get", path="/apis/v1/snapshot")
    service.fake.grant("alice", verb="post", path="/apis/v1/explain")
    out_dir = tmp_path / "snap"
    code, out = _koord("snapshot", "--server", service.url, "--kubeconfig", kc, "-o", str(out_dir))
    assert code == 0, out
    assert any(out_dir.iterdir())
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(wire("filter.json")["Pod"]))
    code, out = _koord("explain", "--pod", str(pod), "--server", service.url, "--kubeconfig", kc, "-o", "json")
    assert code == 0, out
    asked = [r.body["spec"]["nonResourceAttributes"] for r in service.fake.reviews("subjectaccessreviews")]
    assert asked == [{"path": "/apis/v1/snapshot", "verb": "get"}, {"path": "/apis/v1/explain", "verb": "post"}]


def test_the_client_certificate_of_the_kubeconfig_is_presented(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    code, out = _koord("certs", "--out-dir", str(certs), "--client-cn", "ops")
    assert code == 0, out
    tls = CertReloader(certs / "tls.crt", certs / "tls.key", client_ca_file=certs / "ca.crt").context
    assert isinstance(tls, ssl.SSLContext)
    user = {"client-certificate": str(certs / "ops.crt"), "client-key": str(certs / "ops.key")}
    kc = _kubeconfig(tmp_path, user)
    with delegated_service(tmp_path, tls=tls, client_auth=ClientAuth()) as srv:
        srv.fake.grant("ops", verb="get", path="/apis/v1/*")
        base = ["--server", srv.url, "--certificate-authority", str(certs / "ca.crt")]
        code, out = _koord("quota", "list", *base, "--kubeconfig", kc)
        assert code == 0, out
        assert srv.fake.reviews("tokenreviews") == []  # the certificate was the identity
        code, out = _koord("quota", "list", *base)
        assert code == 2 and "answered 401" in out


def test_credentials_never_go_in_clear_text_over_the_network(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path, {"token": "alice-token"})
    code, out = _koord("quota", "list", "--server", "http://10.0.0.1:9876", "--kubeconfig", kc)
    assert code == 2
    assert "is plain HTTP and not loopback: credentials are sent only over HTTPS" in out


def test_a_named_kubeconfig_that_cannot_be_loaded_is_an_error(tmp_path: Path) -> None:
    code, out = _koord("quota", "list", "--server", "http://127.0.0.1:9", "--kubeconfig", str(tmp_path / "nope"))
    assert code == 2 and "no usable kubeconfig" in out
