"""A hostile-client probe over every POST path of the service, as a property test over real HTTP.

The paths are read from the app's own routes, so a new POST route is probed without touching this
file. Each path gets malformed JSON, valid requests with fields replaced by values of other JSON
types, integers beyond int64, deep nesting, NUL and Unicode names, and a 50 MB body. Whatever it
sends, the service must answer without a 5xx, never with code 500 inside an AdmissionReview, never
log a traceback, and a request it refuses must leave the cluster state (the cache: nodes and their
requested resources, pods, assumed pods, every other kind) exactly as it was.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import BaseRoute

from app.server.app import create_app
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer, wire
from webhooks.registry import all_webhooks

#: Examples per path and strategy: bounded, so the whole probe stays within a few tens of seconds.
#: ``KOORD_PROBE_EXAMPLES`` asks for more (a deeper search, run by hand).
EXAMPLES = int(os.environ.get("KOORD_PROBE_EXAMPLES") or 25)
MB = 1024 * 1024


def _post_paths(routes: list[BaseRoute]) -> set[str]:
    """POST paths of ``routes``, descending into included routers."""
    out: set[str] = set()
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            out |= _post_paths(inner.routes)
        elif "POST" in (getattr(route, "methods", None) or ()):
            out.add(route.path)  # type: ignore[attr-defined]
    return out


def post_paths() -> list[str]:
    """Every POST path of the app as served by ``koord scheduler`` (role ``all``), from its routes and its
    OpenAPI document (path parameters filled with ``x``)."""
    app = create_app(FileSource(EXAMPLE_CLUSTER, poll_interval=0))
    paths = _post_paths(app.routes) | {p for p, ops in app.openapi()["paths"].items() if "post" in ops}
    return sorted(re.sub(r"\{[^}]*\}", "x", p) for p in paths)


PATHS = post_paths()


def test_the_probe_covers_the_known_post_paths() -> None:
    assert {"/filter", "/prioritize", "/preempt", "/bind", "/apis/v1/explain"} <= set(PATHS)
    assert {h.path for h in all_webhooks()} <= set(PATHS)


# ---------------------------------------------------------------- valid bodies, the probe's starting points

_POD = wire("filter.json")["Pod"]
_META = _POD["metadata"]
_QUOTA = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "ElasticQuota",
    "metadata": {
        "name": "q",
        "namespace": "default",
        "labels": {"quota.scheduling.koordinator.sh/parent": "root"},
        # annotations whose values are JSON the rules parse: the probe replaces them too
        "annotations": {
            "quota.scheduling.koordinator.sh/shared-weight": '{"cpu": "10", "memory": "10Gi"}',
            "quota.scheduling.koordinator.sh/namespaces": '["team-a"]',
        },
    },
    "spec": {"max": {"cpu": "10", "memory": "10Gi"}, "min": {"cpu": "1", "memory": "1Gi"}},
}
_RESERVATION = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Reservation",
    "metadata": {"name": "r"},
    "spec": {
        "ttl": "1h",
        "owners": [{"object": {"name": "p", "namespace": "default"}}, {"labelSelector": {"matchLabels": {"a": "b"}}}],
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
    },
}
_REVIEWED_POD = wire("admissionreview.json")["request"]["object"]
# an annotation whose value is JSON the pod webhook parses: the probe replaces it too
_REVIEWED_POD["metadata"]["annotations"]["node.koordinator.sh/extended-resource-spec"] = '{"containers": {}}'
_OBJECTS = {
    "Pod": ("", "v1", "pods", _REVIEWED_POD),
    "ElasticQuota": ("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", _QUOTA),
    "Reservation": ("scheduling.koordinator.sh", "v1alpha1", "reservations", _RESERVATION),
}


def _review(kind: str, operation: str) -> dict[str, Any]:
    group, version, resource, obj = _OBJECTS[kind]
    body = wire("admissionreview.json")
    req = body["request"]
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource}
    req.update(kind=gvk, requestKind=gvk, resource=gvr, requestResource=gvr, operation=operation)
    req["object"] = None if operation == "DELETE" else copy.deepcopy(obj)
    req["oldObject"] = None if operation == "CREATE" else copy.deepcopy(obj)
    return body


def base_bodies(path: str) -> list[dict[str, Any]]:
    """Well-formed requests for ``path`` (an unknown route gets an empty object)."""
    names = ["node-idle", "node-busy", "node-hot"]
    filter_args = {"Pod": _POD, "Nodes": None, "NodeNames": names}
    with_nodes = wire("filter.nodecache-false.json")  # nodeCacheCapable: false, a NodeList
    verbs: dict[str, list[dict[str, Any]]] = {
        "/filter": [filter_args, with_nodes],
        "/prioritize": [filter_args, with_nodes],
        "/apis/v1/explain": [filter_args],
        "/preempt": [wire("preempt.json")],
        "/bind": [{"PodName": _META["name"], "PodNamespace": _META["namespace"], "PodUID": _META["uid"], "Node": "x"}],
    }
    if path in verbs:
        return verbs[path]
    for hook in all_webhooks():
        if hook.path == path:
            kind = next((k for k in hook.kinds if k in _OBJECTS), "Pod")
            return [_review(kind, op) for op in ("CREATE", "UPDATE", "DELETE")]
    return [{}]


# ---------------------------------------------------------------- strategies

#: Names a hostile client might send: NUL, right-to-left override, emoji, CJK, combining marks, very long.
NASTY_NAMES = ["", "\x00", "a\x00b", "\u202e", "🚀", "名前", "e\u0301", "\ufeff", "../../etc", "x" * 300]
OVERFLOWS = [2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30)]

names = st.sampled_from(NASTY_NAMES) | st.text(st.characters(codec="utf-8"), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from(OVERFLOWS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | names
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3), max_leaves=6
)


def _pointers(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _pointers(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _pointers(v, (*prefix, i))


def _replace(doc: Any, pointer: tuple[Any, ...], value: Any) -> Any:
    if not pointer:
        return value
    parent = doc
    for part in pointer[:-1]:
        parent = parent[part]
    parent[pointer[-1]] = value
    return doc


def _encode(doc: Any) -> bytes:
    # the standard library writes integers of any size (orjson stops at 64 bits)
    return json.dumps(doc).encode()


#: Fields no rule reads, where any value passes: the probe spends its examples elsewhere.
_UNREAD = {"managedFields", "kubectl.kubernetes.io/last-applied-configuration", "volumes", "volumeMounts"}


def _json_type(value: Any) -> str:
    return "number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__


@st.composite
def mutated(draw: st.DrawFn, bases: list[dict[str, Any]]) -> bytes:
    """A well-formed body with one to three values (any depth, names and keys included) replaced by a value
    of another JSON type."""
    doc: Any = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 3))):
        pointers = [p for p in _pointers(doc) if not _UNREAD & set(map(str, p))]
        objects = [
            p for p in pointers if p[:1] == ("Pod",) or p[:2] in (("request", "object"), ("request", "oldObject"))
        ]
        # four in five replacements inside the object under review, where the rules read
        pointer = draw(st.sampled_from(objects if objects and draw(st.integers(0, 4)) else pointers))
        current = _json_type(_get(doc, pointer))
        doc = _replace(doc, pointer, draw(json_values.filter(lambda v, t=current: _json_type(v) != t)))
    return _encode(doc)


@st.composite
def renamed(draw: st.DrawFn, bases: list[dict[str, Any]]) -> bytes:
    """A well-formed body whose string values (names, namespaces, labels) are replaced by nasty names."""
    doc: Any = copy.deepcopy(draw(st.sampled_from(bases)))
    strings = [p for p in _pointers(doc) if p and isinstance(_get(doc, p), str)]
    if strings:
        for pointer in draw(st.lists(st.sampled_from(strings), min_size=1, max_size=4)):
            doc = _replace(doc, pointer, draw(names))
    return _encode(doc)


def _get(doc: Any, pointer: tuple[Any, ...]) -> Any:
    for part in pointer:
        doc = doc[part]
    return doc


RAW_BODIES = [
    b"",
    b"{",
    b"[",
    b"null",
    b"\x00",
    b"\xff\xfe",
    b'{"a":',
    b'{"Pod": 1e400}',
    b'{"Pod": NaN}',
    b'{"Pod": "\\ud800"}',
    b'{"\xff": 1}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    b"123456789012345678901234567890",
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}',
]
raw_bodies = st.sampled_from(RAW_BODIES) | st.binary(max_size=64) | json_values.map(_encode)


# ---------------------------------------------------------------- the service under probe


class _Tracebacks(logging.Handler):
    """Collects log records that carry an exception (a traceback in the service's log)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, _Tracebacks]]:
    cluster = tmp_path_factory.mktemp("cluster")
    for f in EXAMPLE_CLUSTER.iterdir():
        (cluster / f.name).write_text(f.read_text())
    tracebacks = _Tracebacks()
    root = logging.getLogger()
    root.addHandler(tracebacks)
    try:
        # no polling, and no re-stamping of the example's NodeMetrics (the stand-in for a live node agent):
        # nothing but the probe's requests may change the state
        with LiveServer(FileSource(cluster, poll_interval=0, restamp_interval=3600)) as srv:
            srv.client.timeout = httpx.Timeout(60.0)
            yield srv, tracebacks
    finally:
        root.removeHandler(tracebacks)


def fingerprint(srv: LiveServer) -> Any:
    """The cluster state a request could change: nodes (object, requested, pods), pods, assumed pods and
    every other cached kind."""
    cache = srv.service.cache
    nodes = sorted((n, s.raw, sorted(s.requested.items()), sorted(s.pods)) for n, s in cache.nodes.items())
    pods = sorted(
        (uid, p.namespace, p.name, p.node_name, p.resource_version, p.spec_hash) for uid, p in cache.pods.items()
    )
    assumed = sorted((uid, a.node) for uid, a in cache.assumed.items())
    objects = sorted(
        (kind, key, orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))
        for kind, objs in cache.objects.items()
        for key, obj in objs.items()
    )
    return nodes, pods, assumed, objects, sorted(cache.pod_objects.keys())


def _refused(resp: httpx.Response, body: Any) -> bool:
    if resp.status_code >= 400:
        return True
    if isinstance(body, dict):
        if isinstance(body.get("response"), dict):
            return body["response"].get("allowed") is not True
        return bool(body.get("Error"))
    return False


def _settled(srv: LiveServer) -> Any:
    """The fingerprint once the effects of an accepted request have landed (a binding is delivered as a
    watch event on the server's next loop turn): the first that stays the same for 10 ms."""
    last = fingerprint(srv)
    for _ in range(50):
        time.sleep(0.01)
        now = fingerprint(srv)
        if now == last:
            return now
        last = now
    return last


def check(probe: tuple[LiveServer, _Tracebacks], path: str, payload: bytes) -> None:
    """POST ``payload`` to ``path`` and hold the answer to the probe's rules."""
    srv, tracebacks = probe
    before = fingerprint(srv)
    resp = srv.client.post(path, content=payload, headers={"content-type": "application/json"})
    assert resp.status_code < 500, (path, payload[:300], resp.status_code, resp.text[:500])
    body = resp.json()  # every answer is JSON, errors included
    if isinstance(body, dict) and isinstance(body.get("response"), dict):
        code = (body["response"].get("status") or {}).get("code")
        assert code != 500, (path, payload[:300], body)
    assert not tracebacks.records, [tracebacks.format(r) for r in tracebacks.records][:1]
    if not _refused(resp, body):
        _settled(srv)  # let an accepted request's effects land before the next request is judged
    else:
        time.sleep(0.002)  # a change scheduled for the server's next loop turn lands
        after = fingerprint(srv)
        assert after == before, (path, payload[:300], resp.text[:500], _changes(before, after))


def _changes(before: Any, after: Any) -> list[str]:
    """What differs between two fingerprints, briefly."""
    out = []
    for name, b, a in zip(("nodes", "pods", "assumed", "objects", "raw pods"), before, after, strict=True):
        gone, new = set(map(repr, b)) - set(map(repr, a)), set(map(repr, a)) - set(map(repr, b))
        out += [f"{name} -{x[:300]}" for x in sorted(gone)] + [f"{name} +{x[:300]}" for x in sorted(new)]
    return out


# ---------------------------------------------------------------- the probe

_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("path", PATHS)
@_SETTINGS
@given(data=st.data())
def test_wrong_types_anywhere_in_a_valid_request(
    probe: tuple[LiveServer, _Tracebacks], path: str, data: st.DataObject
) -> None:
    check(probe, path, data.draw(mutated(base_bodies(path))))


@pytest.mark.parametrize("path", PATHS)
@_SETTINGS
@given(data=st.data())
def test_nul_and_unicode_names(probe: tuple[LiveServer, _Tracebacks], path: str, data: st.DataObject) -> None:
    check(probe, path, data.draw(renamed(base_bodies(path))))


@pytest.mark.parametrize("path", PATHS)
@_SETTINGS
@given(payload=raw_bodies)
def test_malformed_json_overflows_and_deep_nesting(
    probe: tuple[LiveServer, _Tracebacks], path: str, payload: bytes
) -> None:
    check(probe, path, payload)


@pytest.mark.parametrize("path", PATHS)
def test_a_50_mb_body(probe: tuple[LiveServer, _Tracebacks], path: str) -> None:
    doc: Any = copy.deepcopy(base_bodies(path)[0])
    strings = [p for p in _pointers(doc) if p and isinstance(_get(doc, p), str)]
    strings.sort(key=lambda p: p[-1] not in ("name", "PodName"))  # a name first, where there is one
    big = "\x00名" * (50 * MB // 12)  # 50 MB once encoded as JSON: \u0000 and \u540d are 6 bytes each
    doc = _replace(doc, strings[0], big) if strings else {"padding": big}
    payload = _encode(doc)
    assert len(payload) >= 50 * 1_000_000
    check(probe, path, payload)
