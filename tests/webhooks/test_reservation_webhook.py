"""Reservation validation through the real app over HTTP: field errors as apimachinery words them."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.sources.files import FileSource
from tests.conftest import LiveServer, wire
from tests.plugins.reservation.fixtures import node, reservation, write_cluster

VALIDATE = "/validate-scheduling-koordinator-sh-v1alpha1-reservation?timeout=5s"


def review(obj: dict[str, Any] | None, operation: str = "CREATE", sub: str = "") -> dict[str, Any]:
    """The captured AdmissionReview envelope carrying a Reservation."""
    body = copy.deepcopy(wire("admissionreview.json"))
    req = body["request"]
    gvk = {"group": "scheduling.koordinator.sh", "version": "v1alpha1", "kind": "Reservation"}
    gvr = {"group": "scheduling.koordinator.sh", "version": "v1alpha1", "resource": "reservations"}
    req.update(kind=gvk, requestKind=gvk, resource=gvr, requestResource=gvr, operation=operation)
    req["name"] = (obj or {}).get("metadata", {}).get("name", "")
    req.pop("namespace", None)
    req["subResource"] = sub
    req["object"] = obj
    req["oldObject"] = obj if operation == "UPDATE" else None
    return body


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(FileSource(write_cluster(tmp_path / "c", [node("n1")]), poll_interval=0)) as srv:
        yield srv


def _answer(srv: LiveServer, body: dict[str, Any]) -> dict[str, Any]:
    r = srv.client.post(VALIDATE, json=body)
    assert r.status_code == 200, r.text
    resp: dict[str, Any] = r.json()["response"]
    return resp


def test_valid_reservation_is_allowed(server: LiveServer) -> None:
    assert _answer(server, review(reservation("ok", ttl="1h")))["allowed"] is True


def test_missing_template_and_owners_are_required(server: LiveServer) -> None:
    obj = reservation("bad", owners=[])
    del obj["spec"]["template"]
    resp = _answer(server, review(obj))
    assert resp["allowed"] is False and resp["status"]["code"] == 400
    assert resp["status"]["message"] == (
        "[spec.template: Required value: the reservation misses the template spec, "
        "spec.owners: Required value: the reservation misses the owner spec]"
    )


def test_ttl_and_expires_not_both(server: LiveServer) -> None:
    obj = reservation("both", ttl="1h", expires="2030-01-01T00:00:00Z")
    resp = _answer(server, review(obj))
    assert resp["status"]["message"] == "spec.expires: Forbidden: ttl and expires cannot be set at the same time"


def test_resources_must_be_positive(server: LiveServer) -> None:
    zero = reservation("zero", cpu="0", memory="0")
    assert _answer(server, review(zero))["status"]["message"] == (
        "spec.template.spec.containers[*].resources.requests: Required value: "
        "the reservation must reserve a positive amount of some resource"
    )
    negative = reservation("neg", cpu="-1")
    message = _answer(server, review(negative, "UPDATE"))["status"]["message"]
    assert message == (
        'spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0"
    )


def test_bad_owner_selector_policy_and_ttl(server: LiveServer) -> None:
    obj = reservation("sel", owners=[{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}])
    obj["spec"]["allocatePolicy"] = "Greedy"
    obj["spec"]["ttl"] = "soon"
    message = _answer(server, review(obj))["status"]["message"]
    assert 'spec.owners[0].labelSelector: Invalid value: "Near" is not a valid label selector operator' in message
    assert "spec.ttl: Invalid value: invalid duration 'soon'" in message
    assert 'spec.allocatePolicy: Unsupported value: "Greedy": supported values: "Aligned", "Restricted"' in message


def test_status_updates_and_deletes_pass(server: LiveServer) -> None:
    obj = reservation("s", owners=[])
    assert _answer(server, review(obj, "UPDATE", sub="status"))["allowed"] is True
    assert _answer(server, review(obj, "DELETE"))["allowed"] is True
    assert _answer(server, review(None, "CREATE"))["allowed"] is False
