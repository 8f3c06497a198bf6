"""Webhook serving over real HTTP: AdmissionReview in, AdmissionReview out, whatever the handler does."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.server.webhook_routes import install_webhooks
from app.sources.files import FileSource
from tests.conftest import LiveServer, fake_nodes_cluster, wire
from webhooks.admission import AdmissionRequest, AdmissionResponse, deny, patched
from webhooks.registry import all_webhooks
from webhooks.webhook import AdmissionError, Webhook, WebhookContext


def _label(req: AdmissionRequest, _: WebhookContext) -> AdmissionResponse:
    return patched(req.uid, [{"op": "add", "path": "/metadata/labels/e2e-mutated", "value": "true"}])


def _refuse(req: AdmissionRequest, _: WebhookContext) -> AdmissionResponse:
    return deny(req.uid, "pods with label x are forbidden")


def _bad_object(req: AdmissionRequest, _: WebhookContext) -> AdmissionResponse:
    raise AdmissionError("spec.containers[0].resources: invalid quantity")


def _bug(req: AdmissionRequest, _: WebhookContext) -> AdmissionResponse:
    raise RuntimeError("boom")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    srv = LiveServer(FileSource(fake_nodes_cluster(tmp_path), poll_interval=0))
    hooks = [
        Webhook("/test-label", "mutating", ("Pod",), _label),
        Webhook("/test-refuse", "validating", ("Pod",), _refuse),
        Webhook("/test-bad-object", "validating", ("Pod",), _bad_object),
        Webhook("/test-bug", "validating", ("Pod",), _bug),
    ]
    install_webhooks(srv.app, hooks, WebhookContext(srv.service.cache))
    with srv:
        yield srv


def test_wire_sample_gets_the_accepted_answer_shape(server: LiveServer) -> None:
    review = wire("admissionreview.json")
    resp = server.client.post("/test-label?timeout=5s", json=review)
    assert resp.status_code == 200
    expected = wire("admissionreview.response.json")
    got = resp.json()
    patch = got["response"].pop("patch")
    want = copy.deepcopy(expected["response"])
    want["response"].pop("patch")
    assert got == want  # same envelope, keys and values as the answer the real apiserver accepted
    assert json.loads(base64.b64decode(patch)) == expected["decoded_patch"]  # same patch (JSON spacing aside)


def test_denial_carries_status_code_and_message(server: LiveServer) -> None:
    review = wire("admissionreview.json")
    answer = server.client.post("/test-refuse", json=review).json()["response"]
    assert answer == {
        "uid": review["request"]["uid"],
        "allowed": False,
        "status": {"code": 403, "message": "pods with label x are forbidden", "reason": "Forbidden"},
    }


@pytest.mark.parametrize(
    ("path", "code", "message"), [("/test-bad-object", 400, "invalid quantity"), ("/test-bug", 500, "boom")]
)
def test_handler_errors_still_answer_the_review(server: LiveServer, path: str, code: int, message: str) -> None:
    review = wire("admissionreview.json")
    resp = server.client.post(path, json=review)
    assert resp.status_code == 200
    answer = resp.json()["response"]
    assert answer["uid"] == review["request"]["uid"] and answer["allowed"] is False
    assert answer["status"]["code"] == code and message in answer["status"]["message"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"", "empty request body"),
        (b"{not json", "not valid JSON"),
        (b"[]", "expected a JSON object"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).encode(), "apiVersion"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(), "request"),
    ],
    ids=["empty", "bad-json", "not-object", "v1beta1", "no-request"],
)
def test_malformed_reviews_get_400(server: LiveServer, body: bytes, needle: str) -> None:
    resp = server.client.post("/test-label", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400
    assert needle in resp.json()["message"]


def test_review_without_uid_or_with_unknown_operation_gets_400(server: LiveServer) -> None:
    review = copy.deepcopy(wire("admissionreview.json"))
    review["request"]["uid"] = ""
    assert server.client.post("/test-label", json=review).status_code == 400
    review = copy.deepcopy(wire("admissionreview.json"))
    review["request"]["operation"] = "PATCH"
    assert "request.operation" in server.client.post("/test-label", json=review).json()["message"]


def test_webhook_requests_are_counted_in_metrics(server: LiveServer) -> None:
    server.client.post("/test-label", json=wire("admissionreview.json"))
    assert 'verb="webhook:/test-label"' in server.client.get("/metrics").text


def test_registered_paths_are_unique_and_upstream_style() -> None:
    paths = [h.path for h in all_webhooks()]
    assert len(paths) == len(set(paths))
    assert all(p.startswith(("/mutate-", "/validate-")) for p in paths)
