"""The extender's pod parse reuses the cache's parse of the same pod version (issue 29): kube-scheduler's
``/filter`` sends the pod its informer holds, the same version the watch already brought to the cache,
with managedFields and without TypeMeta. Any other difference must be parsed from the request."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.server.app import create_app
from app.server.wire import ExtenderCall, decode_extender_args
from app.sources.events import Event, EventType
from app.sources.files import FileSource
from tests.conftest import fake_nodes_cluster, wire


@pytest.fixture
def service(tmp_path: Path) -> Any:
    app = create_app(FileSource(fake_nodes_cluster(tmp_path), poll_interval=0))
    return app.state.service


def request_pod() -> dict[str, Any]:
    """The pod of a real /filter request: managedFields in, no kind / apiVersion."""
    pod = wire("filter.json")["Pod"]
    assert "managedFields" in pod["metadata"] and "kind" not in pod
    return pod


def watched(pod: dict[str, Any], *, type_meta: str = "head") -> dict[str, Any]:
    """``pod`` as the Kubernetes source hands it to the cache: managedFields dropped, TypeMeta first
    (a watch event) or last (a list item, filled in by the source)."""
    body = copy.deepcopy(pod)
    body["metadata"].pop("managedFields")
    if type_meta == "head":
        return {"kind": "Pod", "apiVersion": "v1", **body}
    return {**body, "kind": "Pod", "apiVersion": "v1"}


@pytest.mark.parametrize("type_meta", ["head", "tail"])
def test_filter_reuses_the_cached_parse_of_the_same_version(service: Any, type_meta: str) -> None:
    pod = request_pod()
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod, type_meta=type_meta)))
    cached = service.cache.pods[pod["metadata"]["uid"]]
    assert service.extender.pod_info(pod) is cached


def test_same_version_with_other_content_is_parsed_from_the_request(service: Any) -> None:
    pod = request_pod()
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod)))
    cached = service.cache.pods[pod["metadata"]["uid"]]
    changed = copy.deepcopy(pod)
    changed["metadata"]["labels"]["koordinator.sh/qosClass"] = "BE"
    changed["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    got = service.extender.pod_info(changed)
    assert got is not cached
    assert got.labels["koordinator.sh/qosClass"] == "BE"
    assert got.requests["cpu"] == 3000
    assert cached.requests["cpu"] == 100


def test_another_version_is_parsed_from_the_request(service: Any) -> None:
    pod = request_pod()
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod)))
    newer = copy.deepcopy(pod)
    newer["metadata"]["resourceVersion"] = "999999"
    got = service.extender.pod_info(newer)
    assert got is not service.cache.pods[pod["metadata"]["uid"]]
    assert got.resource_version == "999999"


def test_an_assumed_pod_is_not_reused(service: Any) -> None:
    pod = request_pod()
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod)))
    uid = pod["metadata"]["uid"]
    node = "node-a"
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    node_obj = {"metadata": {"name": node}, "status": {"allocatable": allocatable}}
    service.cache.apply(Event("Node", EventType.ADDED, node_obj))
    service.cache.assume(service.cache.pods[uid], node)
    got = service.extender.pod_info(pod)
    assert service.cache.pods[uid].node_name == node
    assert got.node_name == ""  # what the request says, not the binding's assumption


def test_a_packed_cached_object_is_compared_too(service: Any) -> None:
    pod = request_pod()
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod)))
    service.cache.pod_objects.pack_young()
    assert service.extender.pod_info(pod) is service.cache.pods[pod["metadata"]["uid"]]


# ---------------------------------------------------------------- from the request's bytes (the HTTP verbs)
def _call(pod: dict[str, Any], **dumps: Any) -> ExtenderCall:
    """The ExtenderCall of a /filter body carrying ``pod``, as the HTTP verbs decode it."""
    return decode_extender_args(b'{"Pod":' + orjson.dumps(pod, **dumps) + b',"NodeNames":["node-a"]}')


def _no_decode(service: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make decoding the request's pod, or parsing it, fail the test."""

    def refuse(*_: Any) -> None:
        raise AssertionError("the pod was decoded or parsed")

    monkeypatch.setattr(service.extender, "pod_info", refuse)
    monkeypatch.setattr(ExtenderCall, "Pod", property(refuse))


@pytest.mark.parametrize("type_meta", ["head", "tail"])
@pytest.mark.parametrize("where", ["as sent", "first", "last"])
def test_the_request_bytes_match_the_cached_version_without_a_decode(
    service: Any, monkeypatch: pytest.MonkeyPatch, type_meta: str, where: str
) -> None:
    pod = request_pod()
    meta = dict(pod["metadata"])
    fields = meta.pop("managedFields")
    if where == "first":
        pod["metadata"] = {"managedFields": fields, **meta}
    elif where == "last":
        pod["metadata"] = {**meta, "managedFields": fields}
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod, type_meta=type_meta)))
    cached = service.cache.pods[meta["uid"]]
    call = _call(pod)
    _no_decode(service, monkeypatch)
    assert service.extender.request_pod(call) is cached


def test_the_request_bytes_with_other_content_or_spacing_are_decoded(service: Any) -> None:
    pod = request_pod()
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod)))
    cached = service.cache.pods[pod["metadata"]["uid"]]
    changed = copy.deepcopy(pod)
    changed["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    assert service.extender._cached_parse_json(_call(changed).pod_json) is None
    got = service.extender.request_pod(_call(changed))
    assert got is not cached and got.requests["cpu"] == 3000
    spaced = _call(pod, option=orjson.OPT_INDENT_2)
    assert service.extender._cached_parse_json(spaced.pod_json) is None  # not byte-equal: decoded instead
    assert service.extender.request_pod(spaced) is cached  # and then matched by _cached_parse
    typed = _call({"kind": "Pod", "apiVersion": "v1", **pod})  # TypeMeta in the request: compared as is
    assert service.extender._cached_parse_json(typed.pod_json) is cached


def test_the_request_bytes_of_an_assumed_or_other_version_are_decoded(service: Any) -> None:
    pod = request_pod()
    service.cache.apply(Event("Pod", EventType.ADDED, watched(pod)))
    newer = copy.deepcopy(pod)
    newer["metadata"]["resourceVersion"] = "999999"
    assert service.extender._cached_parse_json(_call(newer).pod_json) is None
    uid = pod["metadata"]["uid"]
    node_obj = {"metadata": {"name": "node-a"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}
    service.cache.apply(Event("Node", EventType.ADDED, node_obj))
    service.cache.assume(service.cache.pods[uid], "node-a")
    assert service.extender._cached_parse_json(_call(pod).pod_json) is None
    assert service.extender.request_pod(_call(pod)).node_name == ""
