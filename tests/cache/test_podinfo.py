"""Pod parsing: requests as Kubernetes computes them, QoS and priority class as Koordinator resolves them."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.koordext import PriorityClass, QoSClass
from app.cache.podinfo import PodError, PodInfo, parse_pod


def make(
    spec: dict[str, Any], labels: dict[str, str] | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"metadata": {"name": "p", "labels": labels or {}}, "spec": spec, "status": status or {}}


def c(req: dict[str, str] | None = None, lim: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if req:
        res["requests"] = req
    if lim:
        res["limits"] = lim
    return {"name": "c", "resources": res, **kw}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [c({"cpu": "1"}), c({"cpu": "500m"})]}, {"cpu": 1500}),
        ({"containers": [c({"cpu": "1"})], "initContainers": [c({"cpu": "3"})]}, {"cpu": 3000}),
        (  # a restartable (sidecar) init container adds to the app containers
            {"containers": [c({"cpu": "1"})], "initContainers": [c({"cpu": "500m"}, restartPolicy="Always")]},
            {"cpu": 1500},
        ),
        ({"containers": [c({"memory": "1Gi"})], "overhead": {"memory": "64Mi"}}, {"memory": (1 << 30) + (64 << 20)}),
        ({"containers": [c({"kubernetes.io/batch-cpu": "2000"})]}, {"kubernetes.io/batch-cpu": 2000}),
    ],
    ids=["sum", "init-max", "sidecar", "overhead", "batch"],
)
def test_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert parse_pod(make(spec)).requests == expected


@pytest.mark.parametrize(
    ("labels", "spec", "status", "qos", "pclass"),
    [
        ({"koordinator.sh/qosClass": "BE"}, {"containers": [c()]}, {}, QoSClass.BE, PriorityClass.BATCH),
        (
            {},
            {"containers": [c({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})]},
            {},
            QoSClass.LSR,
            PriorityClass.PROD,
        ),
        ({}, {"containers": [c({"cpu": "1"})]}, {}, QoSClass.LS, PriorityClass.PROD),
        ({}, {"containers": [c()]}, {}, QoSClass.BE, PriorityClass.BATCH),
        ({}, {"containers": [c()], "priority": 7500}, {}, QoSClass.BE, PriorityClass.MID),
        (
            {"koordinator.sh/priority-class": "koord-free"},
            {"containers": [c()], "priority": 9500},
            {},
            QoSClass.BE,
            PriorityClass.FREE,
        ),
        (
            {"koordinator.sh/qosClass": "bogus"},
            {"containers": [c()]},
            {"qosClass": "Burstable"},
            QoSClass.LS,
            PriorityClass.PROD,
        ),
    ],
    ids=["label-be", "guaranteed-lsr", "burstable-ls", "besteffort-be", "mid-band", "label-wins", "unknown-label"],
)
def test_qos_and_priority_class(
    labels: dict[str, str], spec: dict[str, Any], status: dict[str, Any], qos: QoSClass, pclass: PriorityClass
) -> None:
    info = parse_pod(make(spec, labels, status))
    assert info.qos == qos
    assert info.priority_class == pclass


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ("pod", "expected an object"),
        ({"metadata": {}}, "metadata.name"),
        (make({"containers": "x"}), "spec.containers"),
        (make({"containers": [c({"cpu": "x"})]}), "spec.containers[0].resources.requests.cpu"),
        (make({"containers": [], "priority": "high"}), "spec.priority"),
        ({"metadata": {"name": "p", "labels": {"a": 1}}}, "metadata.labels.a"),
        # found by the POST probe (tests/server/test_post_probe_http.py): a list here crashed the QoS lookup
        ({"metadata": {"name": "p"}, "status": {"qosClass": ["Guaranteed"]}}, "status.qosClass: expected a string"),
        ({"metadata": {"name": "p", "uid": {"a": 1}}}, "metadata.uid: expected a string"),
        ({"metadata": {"name": "p", "namespace": 5}}, "metadata.namespace: expected a string"),
        ({"metadata": {"name": "p", "resourceVersion": 5}}, "metadata.resourceVersion: expected a string"),
    ],
    ids=[
        "not-object",
        "no-name",
        "containers-not-list",
        "bad-quantity",
        "bad-priority",
        "bad-label",
        "qos-class-not-string",
        "uid-not-string",
        "namespace-not-string",
        "resource-version-not-string",
    ],
)
def test_malformed_pods_raise_pod_error(obj: Any, needle: str) -> None:
    with pytest.raises(PodError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        parse_pod(obj)


@pytest.mark.parametrize(
    ("phase", "expected", "terminated"),
    [("Running", "Running", False), ("Succeeded", "Succeeded", True), (None, "", False), (42, "", False)],
)
def test_phase_is_kept(phase: Any, expected: str, terminated: bool) -> None:
    obj = {"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"phase": phase}}
    info = parse_pod(obj)
    assert (info.phase, info.terminated) == (expected, terminated)


def test_spec_hash_follows_spec_and_conditions_not_metadata() -> None:
    def obj(labels: dict[str, str], cpu: str, ready: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "p", "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }

    base = parse_pod(obj({}, "1", "True")).spec_hash
    assert parse_pod(obj({"a": "b"}, "1", "True")).spec_hash == base  # a label patch is no renewal
    assert parse_pod(obj({}, "2", "True")).spec_hash != base
    assert parse_pod(obj({}, "1", "False")).spec_hash != base


def test_same_containers_share_one_aggregation_but_not_its_dicts() -> None:
    """Pods with the same containers reuse one aggregation (issue 29); each PodInfo owns its maps, and
    what the key leaves out (node, labels) or puts in (a changed request) is honoured."""
    from app.cache import podinfo

    podinfo._RESOURCES_SEEN.clear()
    spec = {"containers": [c({"cpu": "250m", "memory": "1Gi"}, {"cpu": "1"})], "overhead": {"cpu": "10m"}}
    a = parse_pod(make(spec))
    b = parse_pod(make({**spec, "nodeName": "n1"}, labels={"koordinator.sh/qosClass": "BE"}))
    assert len(podinfo._RESOURCES_SEEN) == 1
    assert a.requests == b.requests == {"cpu": 260, "memory": 1 << 30}
    assert a.limits == b.limits == {"cpu": 1010}
    assert a.requests is not b.requests and a.limits is not b.limits
    a.requests["cpu"] = 1
    assert parse_pod(make(spec)).requests["cpu"] == 260
    assert (b.node_name, b.qos) == ("n1", QoSClass.BE)
    resized = parse_pod(make({"containers": [c({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1"})]}))
    assert resized.requests == {"cpu": 500, "memory": 1 << 30}


def test_a_bad_quantity_is_refused_every_time_not_remembered() -> None:
    spec = {"containers": [c({"cpu": "lots"})]}
    for _ in range(2):
        with pytest.raises(PodError, match=r"spec.containers\[0\].resources.requests"):
            parse_pod(make(spec))


def test_remembered_classes_follow_every_input() -> None:
    """QoS and priority class are remembered by the labels, priority and Kubernetes QoS they read: any one of
    them changing gives the class it calls for, whatever was parsed before."""
    spec = {"containers": [c({"cpu": "1"})]}
    burstable = {"qosClass": "Burstable"}
    seen = [
        parse_pod(make(spec, status=burstable)),
        parse_pod(make(spec, labels={"koordinator.sh/qosClass": "BE"}, status=burstable)),
        parse_pod(make({**spec, "priority": 5500}, status=burstable)),
        parse_pod(make(spec, labels={"koordinator.sh/priority-class": "koord-free"}, status=burstable)),
        parse_pod(make(spec, status={"qosClass": "Guaranteed"})),
        parse_pod(make(spec, status=burstable)),
    ]
    assert [(p.qos, p.priority_class) for p in seen] == [
        (QoSClass.LS, PriorityClass.PROD),
        (QoSClass.BE, PriorityClass.BATCH),
        (QoSClass.LS, PriorityClass.BATCH),
        (QoSClass.LS, PriorityClass.FREE),
        (QoSClass.LSR, PriorityClass.PROD),
        (QoSClass.LS, PriorityClass.PROD),
    ]


def test_with_node_name_is_replace_of_the_node_only() -> None:
    from dataclasses import replace

    pod = parse_pod(make({"containers": [c({"cpu": "1"})]}, labels={"app": "a"}, status={"phase": "Pending"}))
    moved = pod.with_node_name("n1")
    assert moved == replace(pod, node_name="n1")
    assert moved is not pod and pod.node_name == "" and moved.node_name == "n1"
    assert moved.with_node_name("") == pod


def test_spec_hash_of_values_json_cannot_carry_or_yaml_keys_is_still_a_fingerprint() -> None:
    """A spec read from YAML (a datetime, an integer key) or holding a value JSON cannot carry (a set) still
    gets a fingerprint that follows it; the fast encoding's refusals fall back, they do not raise."""
    import datetime as dt

    def obj(extra: Any) -> dict[str, Any]:
        return {"metadata": {"name": "p"}, "spec": {"containers": [], "x": extra}}

    when = dt.datetime(2026, 11, 28, 12, 0, 0)
    for a, b in (({1: "a"}, {1: "b"}), ({"s": {1}}, {"s": {2}}), (when, when + dt.timedelta(seconds=1))):
        assert parse_pod(obj(a)).spec_hash == parse_pod(obj(a)).spec_hash
        assert parse_pod(obj(a)).spec_hash != parse_pod(obj(b)).spec_hash


def _reference_parse_pod(obj: Any) -> PodInfo:
    """parse_pod as it read field by field before issue 29's inline checks: the property test below holds
    the inline version to it (same PodInfo, same PodError message) on well- and ill-typed fields."""
    from app.cache.podinfo import (
        _PHASES,
        _classes,
        _condition_times,
        _list,
        _mapping,
        _resources,
        _str,
        _str_map,
        kube_qos_class,
        spec_fingerprint,
    )

    if not isinstance(obj, dict):
        raise PodError(f"Pod: expected an object, got {type(obj).__name__}")
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise PodError("metadata.name: required")
    labels = _str_map(meta.get("labels"), "metadata.labels")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise PodError("spec.priority: expected an integer")
    uid = _str(meta.get("uid"), "metadata.uid")
    namespace = _str(meta.get("namespace"), "metadata.namespace")
    resource_version = _str(meta.get("resourceVersion"), "metadata.resourceVersion")
    requests, limits = _resources(spec)
    kube_qos = _str(status.get("qosClass"), "status.qosClass") or kube_qos_class(spec)
    qos, pclass = _classes(
        labels.get("koordinator.sh/qosClass"), labels.get("koordinator.sh/priority-class"), priority, str(kube_qos)
    )
    owners = _list(meta.get("ownerReferences"), "metadata.ownerReferences")
    phase = status.get("phase") or ""
    node_name = spec.get("nodeName") or ""
    if not isinstance(node_name, str):
        raise PodError("spec.nodeName: expected a string")
    scheduled_time, initialized_time = _condition_times(status)
    return PodInfo(
        uid=uid,
        namespace=sys.intern(namespace or "default"),
        name=name,
        node_name=sys.intern(node_name),
        requests=requests,
        limits=limits,
        priority=priority,
        qos=qos,
        priority_class=pclass,
        kube_qos=sys.intern(str(kube_qos)),
        terminated=phase in ("Succeeded", "Failed"),
        daemonset=any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners),
        scheduled_time=scheduled_time,
        initialized_time=initialized_time,
        labels=labels,
        annotations=annotations,
        resource_version=resource_version,
        phase=_PHASES.get(phase, phase) if isinstance(phase, str) else "",
        spec_hash=spec_fingerprint(spec, status.get("conditions")),
        owner_references=tuple(o for o in owners if isinstance(o, dict)),
    )


class _Str(str):
    """A str subclass: the inline checks test ``type(x) is str`` first."""


_ODD = st.sampled_from([None, "", 0, 1, True, False, 2.5, [], {}, ["x"], {"k": "v"}, _Str("s"), _Str("")])


def _field(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(good, _ODD, st.just(_ABSENT))


_ABSENT = object()


def _put(into: dict[str, Any], key: str, value: Any) -> None:
    if value is not _ABSENT:
        into[key] = value


# The strategies are built once, here: building them inside the composite on every draw cost more than
# the test itself (hypothesis validates and wraps each new strategy).
_LABELS = st.dictionaries(
    st.sampled_from(["app", "koordinator.sh/qosClass", "koordinator.sh/priority-class"]),
    st.one_of(st.sampled_from(["LS", "BE", "koord-prod", "koord-batch", "web"]), st.integers(0, 2)),
    max_size=3,
)
_OWNER = st.one_of(
    st.fixed_dictionaries({"kind": st.sampled_from(["DaemonSet", "ReplicaSet"]), "name": st.just("o")}),
    st.sampled_from(["DaemonSet", 3, None]),
)
_CONDITIONS = st.one_of(
    st.just(_ABSENT),
    st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["PodScheduled", "Initialized", "Ready"]),
                "status": st.sampled_from(["True", "False"]),
                "lastTransitionTime": st.sampled_from(["2026-11-28T12:00:00Z", "2026-11-28T12:00:05Z"]),
            }
        ),
        max_size=3,
    ),
)
_META_FIELDS = (
    ("name", _field(st.sampled_from(["p", "web-1"]))),
    ("namespace", _field(st.sampled_from(["default", "kube-system"]))),
    ("uid", _field(st.sampled_from(["u-1", "u-2"]))),
    ("resourceVersion", _field(st.sampled_from(["1", "42"]))),
    ("labels", _field(_LABELS)),
    ("annotations", _field(st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", ""]), max_size=2))),
    ("ownerReferences", _field(st.lists(_OWNER, max_size=3))),
)
_SPEC_FIELDS = (
    ("priority", _field(st.integers(-5, 2_000_000_000))),
    ("nodeName", _field(st.sampled_from(["n1", "node-00007"]))),
)
_STATUS_FIELDS = (
    ("qosClass", _field(st.sampled_from(["Burstable", "Guaranteed", "BestEffort"]))),
    ("phase", _field(st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Weird"]))),
    ("conditions", _CONDITIONS),
)


def _part(value: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The part as built, twice as likely as an odd value in its place."""
    return st.one_of(st.just(value), st.just(value), _ODD)


@st.composite
def _pods(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 30)) == 0:
        return draw(_ODD)
    parts: list[dict[str, Any]] = []
    for fields, base in (
        (_META_FIELDS, {}),
        (_SPEC_FIELDS, {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}),
        (_STATUS_FIELDS, {}),
    ):
        part: dict[str, Any] = dict(base)
        for key, strategy in fields:
            _put(part, key, draw(strategy))
        parts.append(part)
    obj: dict[str, Any] = {}
    for key, part in zip(("metadata", "spec", "status"), parts, strict=True):
        _put(obj, key, draw(_part(part)))
    return obj


def _outcome(parse: Any, obj: Any) -> Any:
    try:
        return parse(obj)
    except (PodError, TypeError) as exc:  # TypeError: sys.intern of a str subclass, in both
        return (type(exc).__name__, str(exc))


@settings(max_examples=600, deadline=None)
@given(_pods())
def test_inline_checks_parse_exactly_as_the_field_by_field_parse(obj: Any) -> None:
    assert _outcome(parse_pod, obj) == _outcome(_reference_parse_pod, obj)
