"""Bad input over real HTTP: every verb and inspection path answers a malformed pod as /filter does (400 with a
message naming the field), never 500; a reused uid+resourceVersion with other content is parsed again."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import LiveServer, filter_body, wire

BATCH_CPU = "kubernetes.io/batch-cpu"


def _pod(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    pod = copy.deepcopy(wire("filter.json")["Pod"])
    change(pod)
    return pod


def _requests(values: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    return lambda p: p["spec"]["containers"][0]["resources"].__setitem__("requests", values)


MALFORMED = {
    "invalid quantity": (_requests({"cpu": "lots"}), "spec.containers[0].resources.requests.cpu"),
    "quantity beyond int64": (_requests({"cpu": "1e400"}), "out of the int64 range"),
    "containers not a list": (lambda p: p["spec"].__setitem__("containers", "x"), "spec.containers"),
    "no name": (lambda p: p["metadata"].pop("name"), "metadata.name"),
    "label not a string": (lambda p: p["metadata"].__setitem__("labels", {"a": 1}), "metadata.labels.a"),
    "priority not an int": (lambda p: p["spec"].__setitem__("priority", "high"), "spec.priority"),
    # found by the POST probe: a list here was a 500 (TypeError in the QoS lookup)
    "qosClass not a string": (lambda p: p.setdefault("status", {}).__setitem__("qosClass", ["x"]), "status.qosClass"),
    "uid not a string": (lambda p: p["metadata"].__setitem__("uid", {"a": 1}), "metadata.uid"),
}


def _bodies(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    victims = {"node-idle": {"Pods": [{"UID": "x"}], "NumPDBViolations": 0}}
    return {
        "/filter": filter_body(pod, ["node-idle"]),
        "/prioritize": filter_body(pod, ["node-idle"]),
        "/preempt": {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": victims},
        "/apis/v1/explain": filter_body(pod, ["node-idle"]),
    }


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_every_verb_answers_a_malformed_pod_with_400(example_server: LiveServer, case: str) -> None:
    change, field = MALFORMED[case]
    # the well-formed pod of the same uid and resourceVersion is parsed first: its parse must not be reused
    good = wire("filter.json")["Pod"]
    assert example_server.client.post("/filter", json=filter_body(good, ["node-idle"])).status_code == 200
    for path, body in _bodies(_pod(change)).items():
        r = example_server.client.post(path, json=body)
        assert r.status_code == 400, (path, r.status_code, r.text)
        assert field in r.json()["message"], (path, r.json())


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/filter", {"Pod": {}, "Nodes": {"items": [{"metadata": "x"}]}, "NodeNames": None}, "Nodes.items[0].metadata"),
        ("/filter", {"Pod": {}, "Nodes": {"items": [{"metadata": {"name": 5}}]}}, "Nodes.items[0].metadata.name"),
        (
            "/preempt",
            {"Pod": {}, "NodeNameToVictims": {"n": {"Pods": [{"metadata": "x"}]}}},
            "NodeNameToVictims.n.Pods[0].metadata",
        ),
        ("/filter", {"Pod": "x"}, "Pod"),
        ("/bind", {"PodName": 1}, "PodName"),
    ],
)
def test_malformed_args_get_400_naming_the_field(
    example_server: LiveServer, path: str, body: dict[str, Any], field: str
) -> None:
    if body.get("Pod") == {}:
        body["Pod"] = wire("filter.json")["Pod"]
    r = example_server.client.post(path, json=body)
    assert r.status_code == 400, r.text
    assert field in r.json()["message"]


def test_a_reused_uid_and_resource_version_with_other_content_is_parsed_again(example_server: LiveServer) -> None:
    c = example_server.client
    small = _pod(_requests({BATCH_CPU: "1000"}))
    big = _pod(_requests({BATCH_CPU: "100000"}))  # same uid and resourceVersion, other requests
    assert small["metadata"]["uid"] == big["metadata"]["uid"]
    assert c.post("/filter", json=filter_body(small, ["node-idle"])).json()["NodeNames"] == ["node-idle"]
    body = c.post("/filter", json=filter_body(big, ["node-idle"])).json()
    assert body["NodeNames"] == []
    assert body["FailedAndUnresolvableNodes"] == {"node-idle": f"Insufficient {BATCH_CPU}"}


@pytest.mark.parametrize("hook", ["/mutate-pod", "/validate-pod"])
@pytest.mark.parametrize(
    "change",
    [
        _requests({"cpu": "1e400"}),
        lambda p: p["metadata"].__setitem__("labels", {"koordinator.sh/qosClass": 5}),
        lambda p: p["spec"].__setitem__("containers", "x"),
    ],
)
def test_webhooks_answer_a_malformed_pod_allowed_false_400(
    example_server: LiveServer, hook: str, change: Callable[[dict[str, Any]], None]
) -> None:
    review = wire("admissionreview.json")
    change(review["request"]["object"])
    r = example_server.client.post(hook, json=review)
    assert r.status_code == 200
    response = r.json()["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is False and response["status"]["code"] == 400, response
