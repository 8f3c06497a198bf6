"""Node name lists found again by their JSON bytes (issue 29, ``koord sim`` sends ~1,000 names per call).

``decode_extender_args`` keeps ``NodeNames`` undecoded and finds a list it decoded before (or that ``/filter``
kept for its survivors) by the exact bytes; the service then keeps the batch and the HostPriorityList entries
per shared list, and ``/filter`` writes its failures with one C-level update per code class. Every shortcut is
checked against the plain path: the same lists, the same answer bytes, the same 400s, across node rows freed
and reused in between."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.extender import ExtenderArgs
from app.api.timeparse import format_time
from app.framework.status import Status
from app.server import extender_routes
from app.server.app import create_app
from app.server.wire import BadRequest, NameLists, decode, decode_extender_args
from app.sources.events import Event, EventType
from app.sources.files import FileSource
from tests.conftest import LiveServer

# ---------------------------------------------------------------------------------------------- decode

NAME = st.text(st.sampled_from('ab-.0é"\\/\u2028'), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(lists=st.lists(st.lists(NAME, max_size=8), min_size=1, max_size=6), size=st.integers(1, 4), data=st.data())
def test_a_name_list_found_by_its_bytes_is_the_list_the_bytes_decode_to(
    lists: list[list[str]], size: int, data: st.DataObject
) -> None:
    kept = NameLists(size)
    pod = b'{"metadata":{"name":"p"}}'
    for _ in range(3 * len(lists)):
        names = data.draw(st.sampled_from(lists))
        body = b'{"Pod":' + pod + b',"NodeNames":' + orjson.dumps(names) + b"}"
        call = decode_extender_args(body, kept)
        assert call.NodeNames == names == decode(body, ExtenderArgs).NodeNames
        assert call.names_shared and kept.find(orjson.dumps(names)) is call.NodeNames
        again = decode_extender_args(body, kept)
        assert again.NodeNames is call.NodeNames  # found by its bytes, not decoded again
        spaced = b'{"Pod":' + pod + b', "NodeNames" : ' + orjson.dumps(names, option=orjson.OPT_INDENT_2) + b"}"
        assert decode_extender_args(spaced, kept).NodeNames == names  # other bytes: decoded, equal
    plain = decode_extender_args(b'{"Pod":' + pod + b',"NodeNames":["x"]}')
    assert plain.NodeNames == ["x"] and not plain.names_shared
    assert decode_extender_args(b'{"Pod":' + pod + b',"NodeNames":null}', kept).NodeNames is None
    assert decode_extender_args(b'{"Pod":' + pod + b"}", kept).NodeNames is None


def test_bad_node_names_get_the_pydantic_400_with_lists_kept() -> None:
    kept = NameLists()
    pod = b'{"Pod":{"metadata":{"name":"p"}},"NodeNames":'
    decode_extender_args(pod + b'["a"]}', kept)  # ["a"] kept
    for bad in (b'["a",1]', b'"a"', b"{}", b'["\\ud800"]', b"[" * 1100 + b"]" * 1100, b"1"):
        body = pod + bad + b"}"
        with pytest.raises(BadRequest) as want:
            decode(body, ExtenderArgs)
        with pytest.raises(BadRequest) as got:
            decode_extender_args(body, kept).Pod  # noqa: B018
        assert str(got.value) == str(want.value), bad[:20]
    assert kept.find(b'["a"]') == ["a"] and kept.find(b'["a",1]') is None


# ---------------------------------------------------------------------------------------------- failures

POOL = (
    Status.unschedulable("Insufficient cpu", plugin="NodeResourcesFit"),
    Status.unschedulable("node(s) usage exceed threshold", plugin="LoadAwareScheduling"),
    Status.unresolvable("node(s) didn't match Pod's node affinity", plugin="NodeAffinity"),
    Status.error("boom", plugin="X"),
)


@settings(max_examples=200, deadline=None)
@given(picks=st.dictionaries(st.integers(0, 30), st.integers(0, len(POOL) - 1)), known=st.integers(0, 3))
def test_failures_are_written_as_the_plain_loop_writes_them(picks: dict[int, int], known: int) -> None:
    names = [f"n{i}" for i in range(31)]
    failures = {pos: POOL[k] for pos, k in picks.items()}
    ext = create_app(FileSource(Path("/nonexistent"), poll_interval=0)).state.service.extender
    seed = {f"ghost-{i}": "node not found" for i in range(known)}  # written first, as for unknown names
    failed, unresolvable = dict(seed), dict[str, str]()
    ext._record_failures(names, failures, failed, unresolvable)
    want_failed, want_unresolvable = dict(seed), dict[str, str]()
    for i, status in failures.items():
        target = want_unresolvable if status.code == Status.unresolvable().code else want_failed
        target[names[i]] = status.message
    assert list(failed.items()) == list(want_failed.items())  # same keys in the same order (the wire's order)
    assert list(unresolvable.items()) == list(want_unresolvable.items())
    assert ext.rejections == Counter((s.plugin, s.code.label) for s in failures.values())


# ---------------------------------------------------------------------------------------------- the verbs

NODES = [f"node-{i}" for i in range(10)]


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def metric(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "updateTime": format_time(time.time()),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "1Gi"}}},
        },
    }


def pod(cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": f"uid-{cpu}", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
    }


def add(svc: Any, i: int, name: str) -> None:
    """Nodes of 4, 8 or 16 cpus, some loaded past LoadAware's threshold: pods fail for several reasons."""
    svc.cache.apply(Event("Node", EventType.ADDED, node(name, ("4", "8", "16")[i % 3])))
    svc.cache.apply(Event("NodeMetric", EventType.ADDED, metric(name, ("1", "15", "2", "3")[i % 4])))


def reference(ext: Any, verb: str, doc: dict[str, Any]) -> bytes:
    """The plain path's answer bytes: pydantic-decoded args (fresh strings, no shared list), nothing kept."""
    args = ExtenderArgs.model_validate(orjson.loads(orjson.dumps(doc)))
    ext._last_batch = None
    if verb == "/filter":
        answer: Any = ext.filter(args)
    else:
        names, scores = ext.prioritize_scores(args)
        answer = [{"Host": n, "Score": s} for n, s in zip(names, scores, strict=True)]
    ext._last_batch = None
    return orjson.dumps(answer)


async def _no_receive() -> dict[str, Any]:
    raise AssertionError("the filter and prioritize verbs do not read past the body")


def answer(loop: asyncio.AbstractEventLoop, service: Any, path: str, doc: dict[str, Any]) -> bytes:
    """The bytes ``service``'s verb fast path answers for ``doc`` at ``path`` (HTTP 200 asserted)."""
    verb, handler = extender_routes.VERBS[path]
    code, data = loop.run_until_complete(
        extender_routes._answer(service, verb, handler, orjson.dumps(doc), _no_receive)
    )
    assert code == 200, data
    return data


def make_service(path: Path) -> Any:
    svc = create_app(FileSource(path, poll_interval=0)).state.service
    for i, name in enumerate(NODES):
        add(svc, i, name)
    return svc


CANDIDATES = [*NODES, "ghost-a", "ghost-b"]
OPS: st.SearchStrategy[tuple[str, str, list[str]]] = st.one_of(
    st.tuples(st.just("filter"), st.sampled_from(["1", "6", "12"]), st.lists(st.sampled_from(CANDIDATES), max_size=12)),
    st.tuples(st.just("prioritize"), st.sampled_from(["1", "6"]), st.lists(st.sampled_from(CANDIDATES), max_size=12)),
    st.tuples(st.just("again"), st.sampled_from(["1", "6", "12"]), st.just([])),  # /filter + /prioritize of survivors
    st.tuples(st.just("reuse-row"), st.sampled_from(NODES), st.just([])),  # a node leaves, another takes its row
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=25))
def test_verbs_answer_the_plain_paths_bytes(tmp_path: Path, ops: list[tuple[str, str, list[str]]]) -> None:
    service = make_service(tmp_path)  # a fresh cluster per example
    ext = service.extender
    loop = asyncio.new_event_loop()
    fresh = iter(range(10**6))

    def call(path: str, doc: dict[str, Any]) -> bytes:
        return answer(loop, service, path, doc)

    known = list(NODES)
    last: list[str] = list(NODES)
    try:
        for op, arg, names in ops:
            if op == "reuse-row":
                if arg not in known:
                    continue
                row = service.cache.table.row(arg)
                service.cache.apply(Event("Node", EventType.DELETED, node(arg, "8")))
                new = f"new-{next(fresh)}"
                add(service, len(known), new)
                assert service.cache.table.row(new) == row
                known[known.index(arg)] = new
                continue
            if op == "again":
                names = last
            doc = {"Pod": pod(arg), "Nodes": None, "NodeNames": names}
            if op in ("filter", "again"):
                got = call("/filter", doc)
                assert got == reference(ext, "/filter", doc)
                survivors = orjson.loads(got)["NodeNames"] or []
                doc = {"Pod": pod(arg), "Nodes": None, "NodeNames": survivors}
                last = [*survivors, *known[:3]]
            got = call("/prioritize", doc)
            assert got == reference(ext, "/prioritize", doc)
    finally:
        loop.close()


def test_filter_then_prioritize_over_http_with_a_row_reused_in_between(tmp_path: Path) -> None:
    """The survivors' list /filter keeps by its bytes answers the /prioritize that sends them back, over real
    HTTP, and is not trusted once a row of it went to another node."""
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        svc = srv.app.state.service
        for i, name in enumerate(NODES):
            add(svc, i, name)  # from this thread while the server is idle between calls
        c = srv.client
        body = {"Pod": pod("6"), "Nodes": None, "NodeNames": CANDIDATES}
        answer = c.post("/filter", content=orjson.dumps(body)).json()
        survivors = answer["NodeNames"]
        assert survivors and len(survivors) < len(NODES) and answer["FailedNodes"]["ghost-a"] == "node not found"
        prio = {"Pod": pod("6"), "Nodes": None, "NodeNames": survivors}
        first = c.post("/prioritize", content=orjson.dumps(prio)).content
        assert first == reference(svc.extender, "/prioritize", prio)
        assert svc.extender.name_lists.find(orjson.dumps(survivors)) == survivors  # kept by /filter's answer
        assert c.post("/filter", content=orjson.dumps(body)).json() == answer
        gone = survivors[0]
        row = svc.cache.table.row(gone)
        svc.cache.apply(Event("Node", EventType.DELETED, node(gone, "8")))
        add(svc, 1, "node-new")
        assert svc.cache.table.row("node-new") == row
        again = c.post("/prioritize", content=orjson.dumps(prio)).content
        assert orjson.loads(again)[0] == {"Host": gone, "Score": 0}  # unknown now, not node-new's score
        assert again == reference(svc.extender, "/prioritize", prio)


# ---------------------------------------------------------------------------------------------- kept lists

KEYS = st.sampled_from([b"[]", b'["a"]', b'["a","b"]', b'["bb","cc","dd"]', b'["' + b"x" * 20 + b'"]'])


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(st.tuples(st.booleans(), KEYS), max_size=40),
    size=st.integers(1, 4),
    budget=st.integers(1, 40),
)
def test_name_lists_keep_the_most_recently_used_within_size_and_budget(
    ops: list[tuple[bool, bytes]], size: int, budget: int
) -> None:
    """NameLists against a plain model: least recently used (kept or found) go first, at most ``size`` lists
    and ``budget`` bytes of JSON unless one list alone is larger."""
    kept = NameLists(size, budget)
    model: list[bytes] = []  # oldest first
    for is_keep, raw in ops:
        names = orjson.loads(raw)
        if is_keep:
            if raw in model:
                model.remove(raw)
            model.append(raw)
            kept.keep(raw, names)
            while len(model) > size or (sum(map(len, model)) > budget and len(model) > 1):
                del model[0]
        else:
            found = kept.find(raw)
            if raw in model:
                assert found == names
                model.remove(raw)
                model.append(raw)
            else:
                assert found is None
        assert len(kept) == len(model)
    for raw in model:  # every list the model holds is found, and nothing else
        assert kept.find(raw) == orjson.loads(raw)


def test_kube_schedulers_rotating_windows_are_found_again_with_their_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-scheduler's ``/filter`` windows (``numFeasibleNodesToFind`` nodes from a start index that moves on
    by as many) come round every ``lcm(window, nodes) / window`` pods: 50 for 46 of 100 nodes, as for 230 of
    500. Between two uses of a window come 49 other windows and 50 passing lists; from the second round on,
    every window is found by its bytes with its batch (no name decoded or looked up), and every answer is
    the plain path's."""
    service = create_app(FileSource(tmp_path, poll_interval=0)).state.service
    names = [f"node-{i:03d}" for i in range(100)]
    for i, name in enumerate(names):
        add(service, i, name)
    ext = service.extender
    loop = asyncio.new_event_loop()
    looked_up: list[int] = []
    rows_of = service.cache.table.rows_of

    def counted_rows_of(wanted: list[str]) -> Any:
        looked_up.append(len(wanted))
        return rows_of(wanted)

    monkeypatch.setattr(service.cache.table, "rows_of", counted_rows_of)

    def call(path: str, doc: dict[str, Any]) -> bytes:
        return answer(loop, service, path, doc)

    window, start = 46, 0
    try:
        for round_ in range(3):
            looked_up.clear()
            for _ in range(50):
                candidates = [names[(start + k) % len(names)] for k in range(window)]
                start = (start + window) % len(names)
                doc = {"Pod": pod("1"), "Nodes": None, "NodeNames": candidates}
                got = call("/filter", doc)
                assert got == reference(ext, "/filter", doc)
                looked_up_by_reference = looked_up.pop()  # the plain path's own look-up
                assert looked_up_by_reference == window
                survivors = orjson.loads(got)["NodeNames"]
                doc = {"Pod": pod("1"), "Nodes": None, "NodeNames": survivors}
                assert call("/prioritize", doc) == reference(ext, "/prioritize", doc)
                looked_up.pop()  # the reference's
            if round_:
                assert looked_up == []  # every window and every passing list found with its batch
    finally:
        loop.close()


def test_a_filter_passing_every_candidate_answers_with_the_requests_own_array(tmp_path: Path) -> None:
    """Every candidate passes: the answer's NodeNames is the request's JSON array as sent (issue 47: no list
    copied and no name encoded again), which decodes to the same names even when the client spelled them with
    spaces and escapes; a candidate failing gives the encoded list of the passing ones."""
    service = make_service(tmp_path)
    loop = asyncio.new_event_loop()
    try:
        spelled = b'[ "node-0" ,\n"node\\u002d2"]'
        body = b'{"Pod":' + orjson.dumps(pod("1")) + b',"NodeNames":' + spelled + b"}"
        verb, handler = extender_routes.VERBS["/filter"]
        for _ in range(2):  # decoded, then found by its bytes
            code, data = loop.run_until_complete(extender_routes._answer(service, verb, handler, body, _no_receive))
            assert code == 200 and spelled in data
            got = orjson.loads(data)
            assert got["NodeNames"] == ["node-0", "node-2"] and got["FailedNodes"] == {}
        with_ghost = {"Pod": pod("1"), "Nodes": None, "NodeNames": ["node-0", "ghost-a"]}
        got = orjson.loads(answer(loop, service, "/filter", with_ghost))
        assert got["NodeNames"] == ["node-0"] and got["FailedNodes"] == {"ghost-a": "node not found"}
        # the service's own callers (sim, explain) still get a list
        assert service.extender.filter(decode_extender_args(body))["NodeNames"] == ["node-0", "node-2"]
    finally:
        loop.close()
