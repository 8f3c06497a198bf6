"""Typed admission input over real HTTP: an object or old object with a field of the wrong JSON type
is answered ``allowed: false`` with code 400 and ``field.Error``-worded messages on every webhook,
before any rule runs; real kube-apiserver reviews still pass unchanged."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer, wire

MUTATE_POD = "/mutate-pod?timeout=5s"
VALIDATE_POD = "/validate-pod?timeout=5s"
MUTATE_QUOTA = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota?timeout=5s"
VALIDATE_QUOTA = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota?timeout=5s"
VALIDATE_RESERVATION = "/validate-scheduling-koordinator-sh-v1alpha1-reservation?timeout=5s"

QUOTA_GVR = ("scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota", "elasticquotas")
RESERVATION_GVR = ("scheduling.koordinator.sh", "v1alpha1", "Reservation", "reservations")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    cluster = tmp_path_factory.mktemp("cluster")
    for f in EXAMPLE_CLUSTER.iterdir():
        (cluster / f.name).write_text(f.read_text())
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        yield srv


def pod_review(operation: str = "CREATE") -> dict[str, Any]:
    """The captured kube-apiserver review of a pod CREATE (UPDATE: the same pod as old object)."""
    body = wire("admissionreview.json")
    body["request"]["operation"] = operation
    if operation == "UPDATE":
        body["request"]["oldObject"] = copy.deepcopy(body["request"]["object"])
    return body


def crd_review(
    gvr: tuple[str, str, str, str], obj: dict[str, Any] | None, operation: str = "CREATE", old: Any = None
) -> dict[str, Any]:
    """The captured envelope carrying a custom resource (ElasticQuota, Reservation)."""
    body = wire("admissionreview.json")
    req = body["request"]
    group, version, kind, resource = gvr
    gvk = {"group": group, "version": version, "kind": kind}
    res = {"group": group, "version": version, "resource": resource}
    req.update(kind=gvk, requestKind=gvk, resource=res, requestResource=res, operation=operation)
    req["name"] = "q"
    req["object"] = obj
    req["oldObject"] = old
    return body


def quota(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": "default", **meta},
        "spec": {"max": {"cpu": "10", "memory": "10Gi"}, "min": {"cpu": "1", "memory": "1Gi"}},
    }


def reservation(containers: list[Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "r"},
        "spec": {
            "ttl": "1h",
            "owners": [{"object": {"name": "p", "namespace": "default"}}],
            "template": {"metadata": {"namespace": "default"}, "spec": {"containers": containers}},
        },
    }


def answer(srv: LiveServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = srv.client.post(path, json=body)
    assert r.status_code == 200, r.text
    review = r.json()
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    resp: dict[str, Any] = review["response"]
    assert resp["uid"] == body["request"]["uid"]
    return resp


def refused_400(resp: dict[str, Any]) -> str:
    assert resp["allowed"] is False, resp
    assert resp["status"]["code"] == 400 and resp["status"]["reason"] == "BadRequest", resp
    assert "patch" not in resp
    message: str = resp["status"]["message"]
    return message


# ---------------------------------------------------------------- the cases


@pytest.mark.parametrize("path", [MUTATE_POD, VALIDATE_POD])
def test_metadata_array_is_refused_400_by_both_pod_webhooks(server: LiveServer, path: str) -> None:
    body = pod_review()
    body["request"]["object"]["metadata"] = []
    assert refused_400(answer(server, path, body)) == "metadata: Invalid value: []: must be an object"


def test_quota_labels_string_on_update_is_refused_400(server: LiveServer) -> None:
    body = crd_review(QUOTA_GVR, quota(labels="x"), "UPDATE", old=quota())
    assert refused_400(answer(server, VALIDATE_QUOTA, body)) == 'metadata.labels: Invalid value: "x": must be an object'


def test_reservation_container_resources_string_is_refused_400(server: LiveServer) -> None:
    body = crd_review(RESERVATION_GVR, reservation([{"name": "c", "resources": "x"}]))
    assert refused_400(answer(server, VALIDATE_RESERVATION, body)) == (
        'spec.template.spec.containers[0].resources: Invalid value: "x": must be an object'
    )


# ---------------------------------------------------------------- more wrong types, each named by its field


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    for p in parents:
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    obj[last] = value  # type: ignore[index]


QUANTITY = "must be a quantity (a string or a number)"
C0 = "spec.containers[0].resources"
POD_CASES = [
    ("metadata/labels", {"a": 5}, "metadata.labels[a]: Invalid value: 5: must be a string"),
    ("metadata/annotations", [], "metadata.annotations: Invalid value: []: must be an object"),
    ("metadata/name", 7, "metadata.name: Invalid value: 7: must be a string"),
    (
        "metadata/ownerReferences",
        [{"controller": "yes"}],
        'metadata.ownerReferences[0].controller: Invalid value: "yes": must be a boolean',
    ),
    ("spec/priority", "high", 'spec.priority: Invalid value: "high": must be an integer'),
    ("spec/priority", 2**31, "spec.priority: Invalid value: 2147483648: must be a 32-bit integer"),
    ("spec/priority", 1.5, "spec.priority: Invalid value: 1.5: must be an integer"),
    ("spec/priority", True, "spec.priority: Invalid value: true: must be an integer"),
    ("spec/containers", {"name": "c"}, 'spec.containers: Invalid value: {"name":"c"}: must be an array'),
    ("spec/containers/0/resources/requests", "x", f'{C0}.requests: Invalid value: "x": must be an object'),
    ("spec/containers/0/resources/requests/cpu", [1], f"{C0}.requests[cpu]: Invalid value: [1]: {QUANTITY}"),
    ("spec/containers/0/resources/limits", {"cpu": False}, f"{C0}.limits[cpu]: Invalid value: false: {QUANTITY}"),
    ("spec/nodeName", {"n": 1}, 'spec.nodeName: Invalid value: {"n":1}: must be a string'),
    (
        "spec/tolerations",
        [{"tolerationSeconds": 2**63}],
        "spec.tolerations[0].tolerationSeconds: Invalid value: 9223372036854775808: must be a 64-bit integer",
    ),
    ("metadata/labels", {"a\x00b": "é\x00"}, None),  # NUL and unicode in strings are not wrong types
]


@pytest.mark.parametrize("path", [MUTATE_POD, VALIDATE_POD])
@pytest.mark.parametrize(("field", "value", "message"), POD_CASES, ids=[f"{c[0]}={c[1]!r}" for c in POD_CASES])
def test_a_wrong_type_in_a_pod_is_named_by_its_field(
    server: LiveServer, path: str, field: str, value: Any, message: str | None
) -> None:
    body = pod_review()
    _set(body["request"]["object"], field, value)
    resp = answer(server, path, body)
    if message is None:
        assert resp.get("status", {}).get("code", 200) != 500, resp
    else:
        assert refused_400(resp) == message


def test_a_wrong_type_in_the_old_object_is_refused_with_its_prefix(server: LiveServer) -> None:
    body = pod_review("UPDATE")
    body["request"]["oldObject"]["metadata"]["labels"] = {"koordinator.sh/qosClass": 5}
    assert refused_400(answer(server, VALIDATE_POD, body)) == (
        "oldObject.metadata.labels[koordinator.sh/qosClass]: Invalid value: 5: must be a string"
    )
    body = crd_review(QUOTA_GVR, None, "DELETE", old=quota(annotations={"x": None, "y": 1}))
    assert refused_400(answer(server, VALIDATE_QUOTA, body)) == (
        "[oldObject.metadata.annotations[x]: Invalid value: null: must be a string, "
        "oldObject.metadata.annotations[y]: Invalid value: 1: must be a string]"
    )


def test_several_wrong_types_are_all_listed_as_an_aggregate(server: LiveServer) -> None:
    body = pod_review()
    obj = body["request"]["object"]
    obj["metadata"]["labels"] = "x"
    obj["spec"]["priority"] = "1"
    assert refused_400(answer(server, MUTATE_POD, body)) == (
        '[metadata.labels: Invalid value: "x": must be an object, '
        'spec.priority: Invalid value: "1": must be an integer]'
    )


def test_hundreds_of_wrong_types_are_cut_to_twenty_and_counted(server: LiveServer) -> None:
    body = pod_review()
    body["request"]["object"]["metadata"]["labels"] = {f"l{i:03d}": i for i in range(300)}
    message = refused_400(answer(server, VALIDATE_POD, body))
    assert message.startswith("[metadata.labels[l000]: Invalid value: 0: must be a string, ")
    assert message.endswith("metadata.labels[l019]: Invalid value: 19: must be a string] (and 280 more errors)")


def test_the_quota_mutating_webhook_patches_nothing_for_a_wrong_type(server: LiveServer) -> None:
    body = crd_review(QUOTA_GVR, {**quota(), "spec": {"max": {"cpu": {"v": 1}}}})
    assert refused_400(answer(server, MUTATE_QUOTA, body)) == (
        'spec.max[cpu]: Invalid value: {"v":1}: must be a quantity (a string or a number)'
    )


def test_a_reservation_with_wrong_owner_and_ttl_types_lists_both(server: LiveServer) -> None:
    obj = reservation([{"name": "c", "resources": {"requests": {"cpu": "1"}}}])
    obj["spec"]["owners"] = [{"labelSelector": {"matchLabels": {"app": ["a"]}}}]
    obj["spec"]["ttl"] = 3600
    assert refused_400(answer(server, VALIDATE_RESERVATION, crd_review(RESERVATION_GVR, obj))) == (
        '[spec.owners[0].labelSelector.matchLabels[app]: Invalid value: ["a"]: must be a string, '
        "spec.ttl: Invalid value: 3600: must be a string]"
    )


# ---------------------------------------------------------------- what still passes


def test_the_captured_apiserver_review_still_passes_both_pod_webhooks(server: LiveServer) -> None:
    for path in (MUTATE_POD, VALIDATE_POD):
        resp = answer(server, path, pod_review())
        assert resp["allowed"] is True, (path, resp)
    resp = answer(server, VALIDATE_POD, pod_review("UPDATE"))
    assert resp["allowed"] is True, resp


def test_unknown_fields_and_nulls_pass_unchecked(server: LiveServer) -> None:
    body = pod_review()
    obj = body["request"]["object"]
    obj["metadata"]["managedFields"].append({"anything": [1, {"x": None}]})
    obj["metadata"]["someFutureField"] = [1, 2, 3]
    obj["spec"]["futureSpec"] = {"a": "b"}
    obj["spec"]["containers"][0]["futureContainerField"] = 5
    obj["spec"]["priority"] = None
    obj["metadata"]["annotations"] = None
    obj["status"] = None
    assert answer(server, VALIDATE_POD, body)["allowed"] is True


def test_a_subresource_is_not_held_to_the_kind_shape(server: LiveServer) -> None:
    body = pod_review()
    body["request"]["subResource"] = "binding"
    body["request"]["object"] = {"kind": "Binding", "metadata": {"name": "small-1"}, "target": {"name": "n"}}
    for path in (MUTATE_POD, VALIDATE_POD):
        assert answer(server, path, body)["allowed"] is True
