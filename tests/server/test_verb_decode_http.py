"""The verbs' msgspec decode of ExtenderArgs (issue 29): the wire samples decode as the pydantic decode reads
them, every bad body gets the 400 the pydantic decode words, over real HTTP, and a pod reused by its bytes is
reused only for the same bytes."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from app.api.extender import ExtenderArgs
from app.api.jsondepth import MAX_JSON_DEPTH
from app.server import extender as extender_module
from app.server.wire import BadRequest, ExtenderCall, decode, decode_extender_args
from tests.conftest import WIRE, LiveServer, filter_body, wire

BATCH_CPU = "kubernetes.io/batch-cpu"
VERBS = ("/filter", "/prioritize")


def reference(body: bytes) -> ExtenderArgs:
    """What the pydantic decode (the verbs' decode before msgspec) makes of ``body``."""
    return decode(body, ExtenderArgs)


def reference_message(body: bytes) -> str:
    """The 400 message the pydantic decode gives ``body``."""
    with pytest.raises(BadRequest) as err:
        reference(body)
    return str(err.value)


def assert_same(call: ExtenderCall, ref: ExtenderArgs) -> None:
    assert call.Pod == ref.Pod
    assert call.NodeNames == ref.NodeNames
    if ref.Nodes is None:
        assert call.Nodes is None
    else:
        assert call.Nodes is not None
        assert call.Nodes.model_dump() == ref.Nodes.model_dump()


@pytest.mark.parametrize("sample", ["filter.json", "prioritize.json", "filter.nodecache-false.json"])
def test_wire_samples_decode_as_the_pydantic_decode(sample: str) -> None:
    body = (WIRE / sample).read_bytes()
    call = decode_extender_args(body)
    assert_same(call, reference(body))
    assert call.pod_json is not None and orjson.loads(call.pod_json) == reference(body).Pod


def test_230_node_names_and_unknown_keys_decode_as_the_pydantic_decode() -> None:
    doc = wire("filter.json")
    doc["NodeNames"] = [f"node-{i:04d}" for i in range(230)]
    doc["Extra"] = {"ignored": [1, 2]}
    body = orjson.dumps(doc)
    call = decode_extender_args(body)
    assert_same(call, reference(body))
    assert call.pod_json == orjson.dumps(doc["Pod"])  # the pod's own bytes, undecoded


def _pod_bytes() -> bytes:
    return orjson.dumps(wire("filter.json")["Pod"])


def _with_pod(pod: bytes, rest: bytes = b',"Nodes":null,"NodeNames":["node-idle"]') -> bytes:
    return b'{"Pod":' + pod + rest + b"}"


#: Bodies the verbs answer 400; each is checked against the pydantic decode's message.
BAD = {
    "empty": b"",
    "not json": b"not json",
    "an array": b"[]",
    "no Pod": b'{"Nodes":null,"NodeNames":["node-idle"]}',
    "Pod null": _with_pod(b"null"),
    "Pod a string": _with_pod(b'"x"'),
    "Pod an array": _with_pod(b"[1]"),
    "NodeNames not strings": _with_pod(_pod_bytes(), b',"NodeNames":[1]'),
    "NodeNames a string": _with_pod(_pod_bytes(), b',"NodeNames":"node-idle"'),
    "trailing content": _with_pod(_pod_bytes()) + b" x",
    # msgspec only skips over the pod: orjson must still reject what it rejected before
    "invalid UTF-8 in the pod": _with_pod(_pod_bytes().replace(b'"small-1"', b'"small-\xff"', 1)),
    "infinite number in the pod": _with_pod(_pod_bytes()[:-1] + b',"x":1e400}'),
    "lone surrogate in the pod": _with_pod(_pod_bytes()[:-1] + b',"x":"\\ud800"}'),
    "lone surrogate in NodeNames": _with_pod(_pod_bytes(), b',"NodeNames":["\\ud800"]'),
    "nesting past orjson's limit": _with_pod(_pod_bytes()[:-1] + b',"x":' + b"[" * 1100 + b"]" * 1100 + b"}"),
    "Nodes items null": _with_pod(_pod_bytes(), b',"Nodes":{"items":null},"NodeNames":null'),
    "Nodes items not objects": _with_pod(_pod_bytes(), b',"Nodes":{"items":[1]},"NodeNames":null'),
    "infinite number in Nodes": _with_pod(_pod_bytes(), b',"Nodes":{"items":[{"x":1e400}]},"NodeNames":null'),
}


def test_the_fast_decode_raises_the_pydantic_message() -> None:
    for case, body in BAD.items():
        with pytest.raises(BadRequest) as err:
            decode_extender_args(body).Pod  # noqa: B018 (the pod's bytes are decoded on first read)
        assert str(err.value) == reference_message(body), case


@pytest.mark.parametrize("path", VERBS)
def test_every_bad_body_gets_the_same_400_over_http(example_server: LiveServer, path: str) -> None:
    c = example_server.client
    good = _with_pod(_pod_bytes())
    assert c.post(path, content=good).status_code == 200  # the well-formed pod first: nothing of it is reused
    for case, body in BAD.items():
        r = c.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, (case, r.status_code, r.text)
        assert r.json() == {"message": reference_message(body)}, case
    missing = c.post(path, content=BAD["no Pod"]).json()["message"]
    assert missing == "invalid ExtenderArgs: Pod: Field required"
    assert c.post(path, content=b"").json()["message"] == "empty request body: expected a JSON ExtenderArgs"


def test_nesting_msgspec_refuses_is_held_to_the_depth_limit(example_server: LiveServer) -> None:
    """A body msgspec refuses for its nesting goes to decode(), which holds it to MAX_JSON_DEPTH (issue 46: deeply
    nested input is bad input, 400); before, orjson's 1,024 levels let it through."""
    body = _with_pod(_pod_bytes()[:-1] + b',"x":' + b"[" * 990 + b"]" * 990 + b"}")
    with pytest.raises(BadRequest, match=f"nested more than {MAX_JSON_DEPTH} levels"):
        decode_extender_args(body)
    r = example_server.client.post("/filter", content=body)
    assert r.status_code == 400, r.text
    assert r.json()["message"] == f"request body is not valid: JSON nested more than {MAX_JSON_DEPTH} levels deep"


def _counting(monkeypatch: pytest.MonkeyPatch, service: Any) -> list[int]:
    """Count the service's pod decodes-and-parses (:meth:`pod_info` calls)."""
    calls = [0]
    original = service.pod_info

    def pod_info(obj: dict[str, Any]) -> Any:
        calls[0] += 1
        return original(obj)

    monkeypatch.setattr(service, "pod_info", pod_info)
    return calls


def test_prioritize_reuses_the_pod_of_the_filter_by_its_bytes(
    example_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = example_server.client
    calls = _counting(monkeypatch, example_server.app.state.service.extender)
    body = orjson.dumps(filter_body(wire("filter.json")["Pod"], ["node-idle"]))
    assert c.post("/filter", content=body).json()["NodeNames"] == ["node-idle"]
    assert calls[0] == 1
    scores = c.post("/prioritize", content=body).json()
    assert calls[0] == 1  # the same pod bytes: no decode, no parse
    assert [e["Host"] for e in scores] == ["node-idle"]
    # the same pod in other bytes (spacing) is decoded and parsed, and answers alike
    spaced = orjson.dumps(filter_body(wire("filter.json")["Pod"], ["node-idle"]), option=orjson.OPT_INDENT_2)
    assert c.post("/prioritize", content=spaced).json() == scores
    assert calls[0] == 2


def _pod(requests: dict[str, str]) -> dict[str, Any]:
    pod = copy.deepcopy(wire("filter.json")["Pod"])
    pod["spec"]["containers"][0]["resources"]["requests"] = requests
    return pod


@pytest.mark.parametrize("order", ["small first", "big first"])
def test_other_pod_bytes_of_the_same_uid_and_version_are_parsed_again(example_server: LiveServer, order: str) -> None:
    c = example_server.client
    small = orjson.dumps(filter_body(_pod({BATCH_CPU: "1000"}), ["node-idle"]))
    big = orjson.dumps(filter_body(_pod({BATCH_CPU: "100000"}), ["node-idle"]))
    assert len(small) == len(big) - 2
    bodies = [small, big] if order == "small first" else [big, small]
    for _ in range(2):  # again, now that both are known by their bytes
        for body in bodies:
            got = c.post("/filter", content=body).json()
            if body is small:
                assert got["NodeNames"] == ["node-idle"], got
            else:
                assert got["NodeNames"] == []
                assert got["FailedAndUnresolvableNodes"] == {"node-idle": f"Insufficient {BATCH_CPU}"}


def test_the_pods_kept_by_their_bytes_are_bounded(example_server: LiveServer) -> None:
    c = example_server.client
    service = example_server.app.state.service.extender
    first = orjson.dumps(filter_body(_pod({BATCH_CPU: "1000"}), ["node-idle"]))
    assert c.post("/filter", content=first).json()["NodeNames"] == ["node-idle"]
    for i in range(extender_module._BY_JSON_MAX + 5):
        pod = _pod({BATCH_CPU: "1000"})
        pod["metadata"]["uid"] = f"uid-{i}"
        assert c.post("/prioritize", content=orjson.dumps(filter_body(pod, ["node-idle"]))).status_code == 200
    assert len(service._by_json) == extender_module._BY_JSON_MAX
    assert c.post("/filter", content=first).json()["NodeNames"] == ["node-idle"]
