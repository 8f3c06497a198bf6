"""ElasticQuota admission through the real app over HTTP, with AdmissionReview bodies shaped as
kube-apiserver v1.26 sends them. Cases and messages follow upstream's
``pkg/webhook/elasticquota/quota_topology_test.go`` and ``mutating``/``validating`` handlers."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from app.sources.files import FileSource
from tests.conftest import LiveServer, wire
from tests.plugins.elasticquota.fixtures import node, pod, quota

MUTATE = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota?timeout=5s"
VALIDATE = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota?timeout=5s"
MAX = {"cpu": "20", "memory": "40Gi"}


def review(obj: dict[str, Any] | None, operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The captured AdmissionReview envelope carrying an ElasticQuota."""
    body = copy.deepcopy(wire("admissionreview.json"))
    req = body["request"]
    gvk = {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "kind": "ElasticQuota"}
    gvr = {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "resource": "elasticquotas"}
    req.update(kind=gvk, requestKind=gvk, resource=gvr, requestResource=gvr, operation=operation)
    target = obj if obj is not None else old
    assert target is not None
    req["name"] = target["metadata"]["name"]
    req["namespace"] = target["metadata"]["namespace"]
    req["object"] = obj
    req["oldObject"] = old
    return body


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    objs = [
        node("n1", "100"),
        quota("dept", {"cpu": "10"}, MAX, is_parent=True),
        quota("team-x", {"cpu": "6"}, MAX, parent="dept"),
        quota("plain", {"cpu": "1"}, MAX, namespaces=["ns-plain"]),
        pod("p1", "1", namespace="team-x", quota_name="team-x"),
    ]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(objs))
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        yield srv


def _answer(srv: LiveServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = srv.client.post(path, json=body)
    assert r.status_code == 200, r.text
    resp: dict[str, Any] = r.json()["response"]
    assert resp["uid"] == body["request"]["uid"]
    return resp


def test_mutating_fills_parent_and_shared_weight(server: LiveServer) -> None:
    q = quota("new", {"cpu": "1"}, MAX)
    q["metadata"]["labels"] = {}
    del q["metadata"]["annotations"]
    resp = _answer(server, MUTATE, review(q))
    assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(q, json.loads(base64.b64decode(resp["patch"])))
    assert patched["metadata"]["labels"] == {"quota.scheduling.koordinator.sh/parent": "koordinator-root-quota"}
    assert patched["metadata"]["annotations"] == {
        "quota.scheduling.koordinator.sh/shared-weight": '{"cpu":"20","memory":"40Gi"}'
    }


def test_mutating_fixes_shared_weight_keys_and_rejects_unknown_parent(server: LiveServer) -> None:
    q = quota("new", {}, MAX, weight={"cpu": "5", "gpu": "1"})
    resp = _answer(server, MUTATE, review(q))
    patched = jsonpatch.apply_patch(q, json.loads(base64.b64decode(resp["patch"])))
    weight = json.loads(patched["metadata"]["annotations"]["quota.scheduling.koordinator.sh/shared-weight"])
    assert weight == {"cpu": "5", "memory": "40Gi"}
    orphan = quota("orphan", {}, MAX, parent="ghost")
    resp = _answer(server, MUTATE, review(orphan))
    assert resp["allowed"] is False and resp["status"]["code"] == 400
    assert resp["status"]["message"] == "fill quota orphan failed, parent not exist"
    assert _answer(server, MUTATE, review(orphan, "UPDATE", orphan))["allowed"] is True  # CREATE only


VALIDATE_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "min-greater-than-max",
        quota("q1", {"cpu": "30"}, MAX),
        "resourceKey cpu of quota q1 min 30 > max 20",
    ),
    (
        "min-key-not-in-max",
        quota("q1", {"nvidia.com/gpu": "1"}, MAX),
        "resourceKey nvidia.com/gpu of quota q1 is included in min, which is not included in max",
    ),
    ("negative-max", quota("q1", {}, {"cpu": "-1"}), "q1 quota.Spec.Max's value < 0, in dimensions :[cpu]"),
    (
        "parent-not-found",
        quota("q1", {}, MAX, parent="ghost"),
        "q1 has parentName ghost but not find parentInfo in quotaInfoMap",
    ),
    (
        "parent-not-a-parent",
        quota("q1", {}, MAX, parent="plain"),
        "q1 has parentName plain but the parentQuotaInfo's IsParent is false",
    ),
    (
        "siblings-min-over-parent-min",
        quota("q1", {"cpu": "5"}, MAX, parent="dept"),
        "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: dept",
    ),
    (
        "max-keys-differ-from-parent",
        quota("q1", {}, {"cpu": "20"}, parent="dept"),
        "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
        "dept's max keys are not the same with q1's",
    ),
    ("already-exists", quota("plain", {}, MAX), "AddQuota quota already exist:plain"),
    (
        "namespace-bound-elsewhere",
        quota("q1", {}, MAX, namespaces=["ns-plain"]),
        "AddQuota quota q1's annotation namespace ns-plain is already bound to quota plain",
    ),
]


@pytest.mark.parametrize(("obj", "message"), [c[1:] for c in VALIDATE_CASES], ids=[c[0] for c in VALIDATE_CASES])
def test_validating_create_rejects(server: LiveServer, obj: dict[str, Any], message: str) -> None:
    resp = _answer(server, VALIDATE, review(obj))
    assert resp["allowed"] is False
    assert resp["status"] == {"code": 400, "message": message, "reason": "BadRequest"}


def test_validating_create_accepts_a_valid_child(server: LiveServer) -> None:
    resp = _answer(server, VALIDATE, review(quota("q1", {"cpu": "4"}, MAX, parent="dept")))
    assert resp == {"uid": resp["uid"], "allowed": True}


def test_validating_update_and_delete(server: LiveServer) -> None:
    c = server.client
    dept = quota("dept", {"cpu": "10"}, MAX, is_parent=True)
    cycle = quota("dept", {"cpu": "10"}, MAX, is_parent=True, parent="team-x")
    resp = _answer(server, VALIDATE, review(cycle, "UPDATE", dept))
    assert resp["allowed"] is False
    assert resp["status"]["message"] == "dept parent chain forms a cycle: [dept team-x dept]"
    flip = quota("dept", {"cpu": "10"}, MAX)
    resp = _answer(server, VALIDATE, review(flip, "UPDATE", dept))
    assert resp["status"]["message"] == "quota has children, isParent is forbidden to modify as false, quotaName:dept"
    shrink = quota("dept", {"cpu": "5"}, MAX, is_parent=True)
    resp = _answer(server, VALIDATE, review(shrink, "UPDATE", dept))
    assert resp["status"]["message"] == "checkMinQuotaSum all children's MinQuota > current MinQuota, current: dept"
    root = quota("koordinator-root-quota", {}, MAX)
    resp = _answer(server, VALIDATE, review(root, "UPDATE", quota("koordinator-root-quota", {}, {})))
    assert resp["status"]["message"] == "invalid quota koordinator-root-quota"
    assert _answer(server, VALIDATE, review(dept, "UPDATE", dept))["allowed"] is True  # unchanged fields
    resp = _answer(server, VALIDATE, review(None, "DELETE", dept))
    assert resp["status"]["message"] == "delete quota failed, quota dept has 1 child quotas"
    resp = _answer(server, VALIDATE, review(None, "DELETE", quota("team-x", {}, MAX, parent="dept")))
    assert resp["status"]["message"] == "delete quota failed, quota team-x has 1 child pods: p1"
    resp = _answer(server, VALIDATE, review(None, "DELETE", quota("koordinator-default-quota", {}, MAX)))
    assert resp["status"]["message"] == "can not delete quotaGroup :koordinator-default-quota"
    assert _answer(server, VALIDATE, review(None, "DELETE", quota("plain", {}, MAX)))["allowed"] is True
    assert c.get("/healthz").status_code == 200


def test_malformed_reviews_get_400(server: LiveServer) -> None:
    c = server.client
    assert c.post(VALIDATE, content=b"{nope").status_code == 400
    no_uid = review(quota("q1", {}, MAX))
    del no_uid["request"]["uid"]
    r = c.post(VALIDATE, json=no_uid)
    assert r.status_code == 400 and "uid" in r.json()["message"]
    bad_quantity = quota("q1", {}, {"cpu": "lots"})
    resp = _answer(server, VALIDATE, review(bad_quantity))
    assert resp["allowed"] is False and resp["status"]["code"] == 400
    assert "spec.max.cpu" in resp["status"]["message"]
    resp = _answer(server, MUTATE, review(bad_quantity))
    assert resp["allowed"] is False and resp["status"]["code"] == 400


def test_other_resources_pass(server: LiveServer) -> None:
    body = review(quota("q1", {"cpu": "30"}, MAX))
    body["request"]["subResource"] = "status"
    assert _answer(server, VALIDATE, body)["allowed"] is True
