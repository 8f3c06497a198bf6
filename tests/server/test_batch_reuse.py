"""``/prioritize`` reuses the node rows ``/filter`` found for the names it passed, and finds the encoded
HostPriorityList entries by row (issue 29). The shortcut must answer exactly what a fresh lookup answers:
the same names in the same order, unknown names scored 0, and never a name whose row was freed and given
to another node between the two calls."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.api.extender import ExtenderArgs
from app.api.timeparse import format_time
from app.server.app import create_app
from app.sources.events import Event, EventType
from app.sources.files import FileSource

NODES = [f"node-{i}" for i in range(6)]


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
    }


def metric(name: str, cpu: str) -> dict[str, Any]:
    """A fresh NodeMetric: LoadAware scores the node by ``cpu`` in use (so the nodes score apart)."""
    return {
        "metadata": {"name": name},
        "status": {
            "updateTime": format_time(time.time()),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "1Gi"}}},
        },
    }


def pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }


@pytest.fixture
def service(tmp_path: Path) -> Any:
    svc = create_app(FileSource(tmp_path, poll_interval=0)).state.service
    for i, name in enumerate(NODES):
        svc.cache.apply(Event("Node", EventType.ADDED, node(name)))
        svc.cache.apply(Event("NodeMetric", EventType.ADDED, metric(name, str(i + 1))))
    return svc


def args(names: list[str]) -> ExtenderArgs:
    # decoded from bytes, as a request is: fresh strings, equal to the earlier ones but not the same objects
    return ExtenderArgs.model_validate(orjson.loads(orjson.dumps({"Pod": pod(), "NodeNames": names})))


def fresh_answer(ext: Any, names: list[str]) -> list[dict[str, Any]]:
    """What /prioritize answers with no kept batch and the encoder's by-name path."""
    ext._last_batch = None
    got_names, scores = ext.prioritize_scores(args(names))
    ext._last_batch = None
    return [{"Host": n, "Score": s} for n, s in zip(got_names, scores, strict=True)]


def prioritize(ext: Any, names: list[str]) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = orjson.loads(orjson.dumps(ext.prioritize_answer(args(names))))
    return answer


def test_the_nodes_score_apart(service: Any) -> None:
    """The premise of the tests below: a misplaced row would show as a misplaced score."""
    answer = fresh_answer(service.extender, NODES)
    assert len({e["Score"] for e in answer}) > 2


def test_prioritize_after_filter_reuses_the_batch_and_answers_the_same(service: Any) -> None:
    ext = service.extender
    result = ext.filter(args(NODES))
    assert result["NodeNames"] == NODES
    kept = ext._last_batch
    assert kept is not None and kept[1] == NODES
    expected = fresh_answer(ext, NODES)
    ext.filter(args(NODES))
    batch = ext._last_batch[2]
    assert prioritize(ext, NODES) == expected
    assert ext._last_batch[2] is batch  # the /filter's batch answered the /prioritize
    # the /filter and /prioritize that used it left it as it was: the rows of these names
    assert batch.names == NODES
    assert batch.rows.tolist() == [service.cache.table.row(n) for n in NODES]


def test_another_order_is_looked_up_again(service: Any) -> None:
    ext = service.extender
    ext.filter(args(NODES))
    reordered = NODES[::-1]
    expected = fresh_answer(ext, reordered)
    ext.filter(args(NODES))
    answer = prioritize(ext, reordered)
    assert [e["Host"] for e in answer] == reordered
    assert answer == expected
    assert answer == fresh_answer(ext, NODES)[::-1]


def test_a_row_freed_and_reused_between_filter_and_prioritize(service: Any) -> None:
    """node-2 leaves and node-new takes its row: /prioritize still names node-2, now unknown (score 0)."""
    ext = service.extender
    table = service.cache.table
    ext.filter(args(NODES))
    prioritize(ext, NODES)  # the encoder now holds node-2's entry under its row
    old_row = table.row("node-2")
    ext.filter(args(NODES))
    service.cache.apply(Event("Node", EventType.DELETED, node("node-2")))
    service.cache.apply(Event("Node", EventType.ADDED, node("node-new")))
    service.cache.apply(Event("NodeMetric", EventType.ADDED, metric("node-new", "15")))
    assert table.row("node-new") == old_row  # the freed row went to the new node
    answer = prioritize(ext, NODES)
    assert [e["Host"] for e in answer] == NODES
    assert answer[2] == {"Host": "node-2", "Score": 0}
    assert answer == fresh_answer(ext, NODES)
    # and a request naming the new node is answered with its own name, by row
    with_new = [*NODES[:2], "node-new", *NODES[3:]]
    ext.filter(args(with_new))
    assert [e["Host"] for e in prioritize(ext, with_new)] == with_new


def test_unknown_names_score_zero_and_keep_their_place(service: Any) -> None:
    ext = service.extender
    names = ["ghost-a", *NODES[:3], "ghost-b", *NODES[3:]]
    result = ext.filter(args(names))
    assert result["FailedNodes"] == {"ghost-a": "node not found", "ghost-b": "node not found"}
    assert result["NodeNames"] == NODES
    expected_known = fresh_answer(ext, NODES)
    ext.filter(args(names))
    assert prioritize(ext, NODES) == expected_known  # the known survivors /filter kept
    answer = prioritize(ext, names)
    assert [e["Host"] for e in answer] == names
    assert answer[0] == {"Host": "ghost-a", "Score": 0} and answer[4] == {"Host": "ghost-b", "Score": 0}
    assert answer == fresh_answer(ext, names)


def test_survivors_of_a_partial_filter_are_kept(service: Any) -> None:
    """A node that fails /filter is not in the batch /prioritize reuses; its names are the survivors'."""
    ext = service.extender
    service.cache.apply(Event("NodeMetric", EventType.MODIFIED, metric("node-1", "15")))  # over LoadAware's 65 %
    passed = ext.filter(args(NODES))["NodeNames"]
    assert passed == [n for n in NODES if n != "node-1"]
    kept = ext._last_batch
    assert kept is not None and kept[1] == passed
    batch = kept[2]
    assert batch.names == passed
    assert batch.rows.tolist() == [service.cache.table.row(n) for n in passed]
    assert prioritize(ext, passed) == fresh_answer(ext, passed)
