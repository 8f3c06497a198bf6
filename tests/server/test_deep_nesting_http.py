"""Deeply nested JSON is bad input (issue 46): every admission webhook and every extender verb answers 400 with a
short message, at 1,000 levels (past the decoder's depth limit, under orjson's) and at 100,000 (past orjson's),
and the service keeps serving. Before the limit at decoding the webhooks answered 500 at 1,000 levels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.api.jsondepth import MAX_JSON_DEPTH
from tests.conftest import LiveServer, filter_body, wire
from webhooks.registry import all_webhooks

DEPTHS = (1_000, 100_000)
MARKER = '"__NESTED__"'


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _with_nested(body: dict[str, Any], depth: int) -> bytes:
    text = json.dumps(body)
    assert MARKER in text
    return text.replace(MARKER, _nested(depth)).encode()


def _review_with_nested_labels(depth: int) -> bytes:
    review = wire("admissionreview.json")
    review["request"]["object"]["metadata"]["labels"] = MARKER.strip('"')
    return _with_nested(review, depth)


def _verb_bodies(depth: int) -> dict[str, bytes]:
    pod = wire("filter.json")["Pod"]
    labelled = json.loads(json.dumps(pod))
    labelled["metadata"]["labels"] = MARKER.strip('"')
    return {
        "/filter": _with_nested(filter_body(labelled, ["node-idle"]), depth),
        "/prioritize": _with_nested(filter_body(labelled, ["node-idle"]), depth),
        "/preempt": _with_nested({"Pod": labelled, "NodeNameToVictims": {}, "NodeNameToMetaVictims": None}, depth),
        "/bind": _with_nested(
            {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": MARKER.strip('"')}, depth
        ),
        "/apis/v1/explain": _with_nested(filter_body(labelled, ["node-idle"]), depth),
    }


def _short_400(answer: Any) -> str:
    assert answer.status_code == 400, answer.text[:300]
    message = answer.json()["message"]
    assert len(message) < 200, message
    return str(message)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("path", [hook.path for hook in all_webhooks()])
def test_every_webhook_answers_deep_labels_with_400(example_server: LiveServer, path: str, depth: int) -> None:
    answer = example_server.client.post(
        path, content=_review_with_nested_labels(depth), headers={"Content-Type": "application/json"}
    )
    message = _short_400(answer)
    assert "nested more than" in message or "depth limit exceeded" in message, message
    assert example_server.client.get("/healthz").status_code == 200


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/preempt", "/bind", "/apis/v1/explain"])
def test_every_verb_answers_deep_nesting_with_400(example_server: LiveServer, path: str, depth: int) -> None:
    answer = example_server.client.post(
        path, content=_verb_bodies(depth)[path], headers={"Content-Type": "application/json"}
    )
    _short_400(answer)
    assert example_server.client.get("/healthz").status_code == 200


def test_the_limit_is_named_and_a_body_at_the_limit_is_not_refused_for_depth(example_server: LiveServer) -> None:
    review = wire("admissionreview.json")
    levels = 4  # the review, request, object and metadata objects hold the nested annotations
    review["request"]["object"]["metadata"]["annotations"] = MARKER.strip('"')
    at_limit = _with_nested(review, MAX_JSON_DEPTH - levels)
    answer = example_server.client.post("/validate-pod", content=at_limit)
    assert "nested more than" not in answer.text
    over = _with_nested(review, MAX_JSON_DEPTH - levels + 1)
    answer = example_server.client.post("/validate-pod", content=over)
    assert _short_400(answer) == f"request body is not valid: JSON nested more than {MAX_JSON_DEPTH} levels deep"
