"""/mutate-pod and /validate-pod through the real app over HTTP, with real AdmissionReview bodies.

Cases follow upstream's ``pkg/webhook/pod/mutating/cluster_colocation_profile_test.go`` and
``pkg/webhook/pod/validating/cluster_colocation_profile_test.go`` (names and messages).
"""

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
from tests.conftest import EXAMPLE_CLUSTER, LiveServer, wire

PROFILE_LABEL = "koordinator.sh/enable-colocation"


def review(pod: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The captured v1.26 AdmissionReview with ``pod`` as its object."""
    body = wire("admissionreview.json")
    body["request"]["object"] = pod
    body["request"]["operation"] = operation
    body["request"]["namespace"] = pod["metadata"].get("namespace", body["request"]["namespace"])
    if old is not None:
        body["request"]["oldObject"] = old
    return body


def sample_pod(**labels: str) -> dict[str, Any]:
    pod: dict[str, Any] = copy.deepcopy(wire("admissionreview.json")["request"]["object"])
    pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), **labels}
    return pod


def batch_ns_pod() -> dict[str, Any]:
    pod = sample_pod(**{PROFILE_LABEL: "true"})
    pod["metadata"]["namespace"] = "batch"
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "2500m", "memory": "8Gi"},
    }
    return pod


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """The example cluster (which holds the example profile, PriorityClass and namespace)."""
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    for f in EXAMPLE_CLUSTER.iterdir():
        (cluster / f.name).write_text(f.read_text())
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        yield srv


def post(srv: LiveServer, path: str, body: Any) -> dict[str, Any]:
    r = srv.client.post(path, json=body)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == body["request"]["uid"]
    return answer["response"]


def patched_object(body: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(body["request"]["object"], ops)
    return result


# ------------------------------------------------------------------ mutating


def test_wire_sample_as_is_is_allowed_unchanged(server: LiveServer) -> None:
    body = wire("admissionreview.json")
    response = post(server, "/mutate-pod", body)
    assert response == {"uid": body["request"]["uid"], "allowed": True}
    assert post(server, "/validate-pod", body) == {"uid": body["request"]["uid"], "allowed": True}


def test_profile_turns_pod_into_batch_pod(server: LiveServer) -> None:
    body = review(batch_ns_pod())
    pod = patched_object(body, post(server, "/mutate-pod", body))
    labels = pod["metadata"]["labels"]
    assert labels["koordinator.sh/qosClass"] == "BE"
    assert labels["koordinator.sh/priority"] == "1000"
    assert labels["koordinator.sh/mutated"] == "true"
    assert pod["metadata"]["annotations"]["koordinator.sh/intercepted"] == "true"
    assert pod["spec"]["schedulerName"] == "koord-scheduler"
    assert pod["spec"]["priorityClassName"] == "koord-batch"
    assert pod["spec"]["priority"] == 5000
    assert pod["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 30
    assert pod["metadata"]["namespace"] == "batch"
    # cpu becomes integer milli-cores (2 cores -> 2000 = "2k" as Go's DecimalSI prints it on the wire;
    # the inspection API shows it as "2000", app.api.quantity.display_resource).
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"kubernetes.io/batch-cpu": "2k", "kubernetes.io/batch-memory": "4Gi"},
        "limits": {"kubernetes.io/batch-cpu": "2500", "kubernetes.io/batch-memory": "8Gi"},
    }
    spec = json.loads(pod["metadata"]["annotations"]["node.koordinator.sh/extended-resource-spec"])
    assert spec == {
        "containers": {
            "c": {
                "limits": {"kubernetes.io/batch-cpu": "2500", "kubernetes.io/batch-memory": "8Gi"},
                "requests": {"kubernetes.io/batch-cpu": "2k", "kubernetes.io/batch-memory": "4Gi"},
            }
        }
    }
    # The mutated pod passes validation (BE + koord-batch + batch resources).
    assert post(server, "/validate-pod", review(pod))["allowed"] is True


def test_namespace_selector_not_matching_leaves_pod(server: LiveServer, tmp_path: Path) -> None:
    (tmp_path / "cluster" / "ns.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plain", "labels": {"a": "b"}}})
    )
    with LiveServer(FileSource(tmp_path / "cluster", poll_interval=0)) as srv:
        pod = batch_ns_pod()
        pod["metadata"]["namespace"] = "plain"
        assert post(srv, "/mutate-pod", review(pod)) == {
            "uid": wire("admissionreview.json")["request"]["uid"],
            "allowed": True,
        }


def test_pod_selector_not_matching_leaves_pod(server: LiveServer) -> None:
    pod = batch_ns_pod()
    pod["metadata"]["labels"][PROFILE_LABEL] = "false"
    assert "patch" not in post(server, "/mutate-pod", review(pod))


def _with_profile(tmp_path: Path, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> LiveServer:
    cluster = tmp_path / "c2"
    cluster.mkdir(exist_ok=True)
    profile = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": spec,
    }
    pcs = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "koord-batch"},
            "value": 5500,
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "koord-prod"},
            "value": 9000,
        },
    ]
    (cluster / "objs.yaml").write_text(yaml.safe_dump_all([profile, *pcs]))
    return LiveServer(FileSource(cluster, poll_interval=0))


@pytest.mark.parametrize(
    ("name", "spec", "annotations", "expect"),
    [
        (
            "batch profile rewrites resources",
            {"qosClass": "BE", "priorityClassName": "koord-batch"},
            None,
            {"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"}},
        ),
        (
            "skip-update-resources annotation keeps cpu/memory",
            {"qosClass": "BE", "priorityClassName": "koord-batch"},
            {"config.koordinator.sh/skip-update-resources": ""},
            {"requests": {"cpu": "500m", "memory": "1Gi"}},
        ),
        (
            "prod profile keeps cpu/memory",
            {"qosClass": "LS", "priorityClassName": "koord-prod"},
            None,
            {"requests": {"cpu": "500m", "memory": "1Gi"}},
        ),
        (
            "limit only: extended limit copied to the request",
            {"qosClass": "BE", "priorityClassName": "koord-batch"},
            None,
            {
                "limits": {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "2Gi"},
                "requests": {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "2Gi"},
            },
        ),
    ],
)
def test_profile_resource_table(
    tmp_path: Path, name: str, spec: dict[str, Any], annotations: dict[str, str] | None, expect: dict[str, Any]
) -> None:
    pod = sample_pod()
    if name.startswith("limit only"):
        pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "2Gi"}}
    else:
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    body = review(pod)
    with _with_profile(tmp_path, spec, annotations) as srv:
        result = patched_object(body, post(srv, "/mutate-pod", body))
    assert result["spec"]["containers"][0]["resources"] == expect, name


def test_labels_mappings_and_suffixes(tmp_path: Path) -> None:
    spec = {
        "labels": {"team": "x"},
        "labelKeysMapping": {"app": "app-copy"},
        "annotationKeysMapping": {"missing": "copied"},
        "labelSuffixes": {"app": "-be", "absent": "-no"},
    }
    body = review(sample_pod())
    with _with_profile(tmp_path, spec) as srv:
        pod = patched_object(body, post(srv, "/mutate-pod", body))
    assert pod["metadata"]["labels"] == {"app": "small-be", "app-copy": "small", "team": "x"}
    assert pod["metadata"]["annotations"]["copied"] == ""


@pytest.mark.parametrize(("probability", "mutated"), [(0, False), ("0%", False), (100, True), ("100%", True)])
def test_probability(tmp_path: Path, probability: Any, mutated: bool) -> None:
    body = review(sample_pod())
    with _with_profile(tmp_path, {"labels": {"x": "y"}, "probability": probability}) as srv:
        response = post(srv, "/mutate-pod", body)
    assert ("patch" in response) is mutated


def test_profile_errors_answer_500(tmp_path: Path) -> None:
    body = review(sample_pod())
    with _with_profile(tmp_path, {"priorityClassName": "nope"}) as srv:
        response = post(srv, "/mutate-pod", body)
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert response["status"]["message"] == 'priorityclasses.scheduling.k8s.io "nope" not found'
    with _with_profile(tmp_path, {"probability": "half"}) as srv:
        response = post(srv, "/mutate-pod", body)
    assert response["status"] == {
        "code": 500,
        "message": "invalid type: string is not a percentage",
        "reason": "InternalError",
    }


def test_update_and_other_resources_are_not_mutated(server: LiveServer) -> None:
    pod = batch_ns_pod()
    assert "patch" not in post(server, "/mutate-pod", review(pod, "UPDATE", old=pod))
    body = review(pod)
    body["request"]["subResource"] = "status"
    assert post(server, "/mutate-pod", body) == {"uid": body["request"]["uid"], "allowed": True}


def test_malformed_reviews_get_http_400(server: LiveServer) -> None:
    for content in (b"", b"not json", b"[]", b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}'):
        for path in ("/mutate-pod", "/validate-pod"):
            r = server.client.post(path, content=content, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (path, content)
            assert r.json()["message"]
    body = wire("admissionreview.json")
    body["apiVersion"] = "admission.k8s.io/v1beta1"
    assert server.client.post("/mutate-pod", json=body).status_code == 400


def test_malformed_pod_is_denied_400_with_uid(server: LiveServer) -> None:
    body = wire("admissionreview.json")
    body["request"]["object"] = {
        "metadata": {"name": "x"},
        "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]},
    }
    for path in ("/mutate-pod", "/validate-pod"):
        response = post(server, path, body)
        assert response["allowed"] is False
        assert response["status"]["code"] == 400
        assert "lots" in response["status"]["message"]
    # A CREATE without an object is a review we can answer: denied 400, uid echoed.
    body["request"]["object"] = None
    assert post(server, "/mutate-pod", body)["status"]["code"] == 400
    # An object that is not even a JSON object makes the review itself malformed: HTTP 400.
    body["request"]["object"] = "x"
    assert server.client.post("/mutate-pod", json=body).status_code == 400


@pytest.mark.parametrize("annotation", ["{nope", '"x"', "[1]", '{"containers": {"c": 1}}', "1e400"])
def test_bad_extended_resource_spec_annotation_answers_400(server: LiveServer, annotation: str) -> None:
    # upstream's message; upstream's code is 500, but the malformed annotation is the request's: 400
    pod = sample_pod()
    pod["metadata"]["annotations"]["node.koordinator.sh/extended-resource-spec"] = annotation
    response = post(server, "/mutate-pod", review(pod))
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["message"].startswith("failed to get current extended resource spec, err:")


# ------------------------------------------------------------------ validating


def _pod(
    labels: dict[str, str] | None = None, priority: int | None = None, requests: dict[str, str] | None = None
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests or {}}}]},
    }
    if priority is not None:
        pod["spec"]["priority"] = priority
    return pod


QOS = "koordinator.sh/qosClass"


@pytest.mark.parametrize(
    ("name", "old", "new", "reason"),
    [
        ("non-colocation empty pod", None, _pod(), ""),
        (
            "validate immutable QoS",
            _pod({QOS: "LSR"}, 9000, {"cpu": "1"}),
            _pod({QOS: "LS"}, 9000),
            'labels.koordinator.sh/qosClass: Invalid value: "LS": field is immutable',
        ),
        (
            "validate remove QoS",
            _pod({QOS: "LS"}),
            _pod(),
            'labels.koordinator.sh/qosClass: Invalid value: "": field is immutable',
        ),
        (
            "forbidden not defined QoS",
            None,
            _pod(priority=5500, requests={"kubernetes.io/batch-cpu": "1000"}),
            "labels.koordinator.sh/qosClass: Required value: must specify koordinator QoS BE with koordinator "
            "colocation resources",
        ),
        (
            "validate immutable priorityClass",
            _pod(priority=5500),
            _pod(priority=9000),
            'spec.priority: Invalid value: "koord-prod": field is immutable',
        ),
        (
            "validate remove koordinator priority",
            _pod({"koordinator.sh/priority": "8888"}),
            _pod(),
            'labels.koordinator.sh/priority: Invalid value: "": field is immutable',
        ),
        ("allowed QoS and priorityClass combination: BE And NonProd", None, _pod({QOS: "BE"}, 5500), ""),
        ("allowed QoS and priorityClass combination: LSR And Prod", None, _pod({QOS: "LSR"}, 9000, {"cpu": "2"}), ""),
        (
            "forbidden QoS and priorityClass combination: BE And Prod",
            None,
            _pod({QOS: "BE"}, 9000),
            "Pod: Forbidden: koordinator.sh/qosClass=BE and priorityClass=koord-prod cannot be used in combination",
        ),
        (
            "forbidden QoS and priorityClass combination: LSR And Batch",
            None,
            _pod({QOS: "LSR"}, 5500, {"cpu": "1"}),
            "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-batch cannot be used in combination",
        ),
        (
            "forbidden QoS and priorityClass combination: LSR And Mid",
            None,
            _pod({QOS: "LSR"}, 7500, {"cpu": "1"}),
            "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-mid cannot be used in combination",
        ),
        (
            "forbidden QoS and priorityClass combination: LSR And Free",
            None,
            _pod({QOS: "LSR"}, 3500, {"cpu": "1"}),
            "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-free cannot be used in combination",
        ),
        (
            "forbidden resources - LSR And Prod: unset CPUs",
            None,
            _pod({QOS: "LSR"}, 9000),
            "pod.spec.containers[*].resources.requests: Required value: LSR Pod must declare the requested CPUs",
        ),
        (
            "forbidden resources - LSR And Prod: non-integer CPUs",
            None,
            _pod({QOS: "LSR"}, 9000, {"cpu": "100m"}),
            'pod.spec.containers[*].resources.requests: Invalid value: "100m": the requested CPUs of LSR Pod must be '
            "integer",
        ),
        (
            "several errors are aggregated",
            None,
            _pod({QOS: "LSR"}, 5500),
            "[Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-batch cannot be used in combination, "
            "pod.spec.containers[*].resources.requests: Required value: LSR Pod must declare the requested CPUs]",
        ),
    ],
)
def test_validate_table(
    server: LiveServer, name: str, old: dict[str, Any] | None, new: dict[str, Any], reason: str
) -> None:
    body = review(new, "UPDATE" if old is not None else "CREATE", old=old)
    response = post(server, "/validate-pod", body)
    if not reason:
        assert response == {"uid": body["request"]["uid"], "allowed": True}, name
    else:
        assert response["allowed"] is False, name
        assert response["status"]["code"] == 400
        assert response["status"]["message"] == reason, name
