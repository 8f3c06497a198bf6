"""The sim's typed decode of the extender answers (:mod:`app.sim.answers`) against the plain ``orjson.loads``
it replaced: same survivors, failure reasons, scores and chosen host for arbitrary answers; bad answers raise
:class:`VerbError` (as :class:`AnswerError`) naming the verb, never a crash further on."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.answers import AnswerError, VerbError, decode_bind, decode_filter, decode_prioritize
from app.sim.fit import pod_vector
from app.sim.policies import builtin_policy
from app.sim.run import Simulation
from app.sim.trace import TraceNode, TracePod

NAMES = st.text(alphabet="abcdefghij-0123456789.", min_size=1, max_size=12)
#: Extra keys a newer extender might add: ignored, as the plain decode ignored them.
EXTRA = st.dictionaries(
    st.sampled_from(["Extra", "host", "score", "Nodes"]), st.integers(-(2**40), 2**40) | st.none(), max_size=2
)


def plain_best(answer: list[dict[str, Any]], tie_break: str, rows: dict[str, int], rank: Any, rng: Any) -> str:
    """The choice among ``/prioritize`` scores as the sim made it before the typed decode (dicts)."""
    values = np.fromiter((h["Score"] for h in answer), dtype=np.int64, count=len(answer))
    top = np.flatnonzero(values == values.max()).tolist()
    if tie_break == "order":
        if len(top) == 1:
            return str(answer[top[0]]["Host"])
        best = [answer[i]["Host"] for i in top]
        return str(best[int(rank[[rows[h] for h in best]].argmin())])
    if tie_break == "name":
        return str(min(answer[i]["Host"] for i in top))
    return str(answer[top[int(rng.integers(len(top)))]]["Host"])


@st.composite
def prioritize_answers(draw: st.DrawFn) -> tuple[list[str], bytes]:
    names = draw(st.lists(NAMES, min_size=1, max_size=40, unique=True))
    # every host tied (the sim's common case: empty nodes score alike; _best takes another way there)
    same = draw(st.none() | st.integers(min_value=0, max_value=100))
    scores = [same if same is not None else draw(st.integers(min_value=0, max_value=100)) for _ in names]
    entries = [{**draw(EXTRA), "Host": name, "Score": score} for name, score in zip(names, scores, strict=True)]
    return names, orjson.dumps(entries)


@settings(max_examples=150, deadline=None)
@given(prioritize_answers(), st.sampled_from(["order", "name", "random"]), st.integers(0, 2**32 - 1))
def test_prioritize_decode_and_choice_match_the_plain_decode(
    answer: tuple[list[str], bytes], tie_break: str, seed: int
) -> None:
    names, content = answer
    plain = orjson.loads(content)
    typed = decode_prioritize(content)
    assert [(h.Host, h.Score) for h in typed] == [(h["Host"], h["Score"]) for h in plain]
    nodes = [TraceNode(name, 32000, 65536, 4, "T4") for name in sorted(names)]
    policy = builtin_policy("FragmentationAware")
    sim = Simulation(SimpleNamespace(port=1), nodes, policy, seed, tie_break=tie_break)  # type: ignore[arg-type]
    rows, rank = sim.rows, sim._rank  # the run's node rows and seeded order, as the plain choice read them
    chosen = sim._best(typed)
    assert chosen == plain_best(plain, tie_break, rows, rank, np.random.default_rng(seed))
    # the random stream advanced as the plain choice advanced it
    reference = np.random.default_rng(seed)
    plain_best(plain, tie_break, rows, rank, reference)
    assert sim.rng.integers(1 << 30) == reference.integers(1 << 30)


REASONS = st.sampled_from(["Insufficient nvidia.com/gpu", "node(s) didn't match Pod's node affinity/selector", "x"])


@st.composite
def filter_answers(draw: st.DrawFn) -> dict[str, Any]:
    answer: dict[str, Any] = draw(EXTRA)
    for key in ("NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"):
        if not draw(st.booleans()):
            continue  # absent
        if key == "NodeNames":
            answer[key] = draw(st.none() | st.lists(NAMES, max_size=20))
        elif key == "Error":
            answer[key] = draw(st.none() | st.just("") | st.text(max_size=10))
        else:
            answer[key] = draw(st.none() | st.dictionaries(NAMES, REASONS, max_size=8))
    return answer


@settings(max_examples=200, deadline=None)
@given(filter_answers())
def test_filter_decode_matches_the_plain_decode(answer: dict[str, Any]) -> None:
    content = orjson.dumps(answer)
    plain = orjson.loads(content)
    typed = decode_filter(content)
    assert bool(typed.Error) == bool(plain.get("Error")) and (typed.Error or "") == (plain.get("Error") or "")
    assert (typed.NodeNames or []) == (plain.get("NodeNames") or [])
    expected = {**(plain.get("FailedNodes") or {}), **(plain.get("FailedAndUnresolvableNodes") or {})}
    assert typed.failed() == expected


def test_bind_decode_reads_the_error() -> None:
    assert decode_bind(b"{}").Error is None
    assert decode_bind(b'{"Error":""}').Error == ""
    assert decode_bind(b'{"Error":"pod p is bound","Extra":1}').Error == "pod p is bound"


@pytest.mark.parametrize(
    ("verb", "content", "where"),
    [
        ("filter", b"<html>oops", "malformed"),
        ("filter", b'{"NodeNames": "n1"}', "$.NodeNames"),
        ("filter", b'{"Error": 3}', "$.Error"),
        ("prioritize", b"null", "Expected `array`"),
        ("prioritize", b'[{"Host": "n1", "Score": "10"}]', "$[0].Score"),
        ("prioritize", b'[{"Score": 10}]', "Host"),
        ("prioritize", b'{"Host": "n1", "Score": 1}', "Expected `array`"),
        ("bind", b"[]", "Expected `object`"),
        ("bind", b"", "Input data was truncated"),
    ],
)
def test_a_bad_answer_is_a_verb_error_naming_the_verb(verb: str, content: bytes, where: str) -> None:
    decode = {"filter": decode_filter, "prioritize": decode_prioritize, "bind": decode_bind}[verb]
    with pytest.raises(AnswerError, match=f"^/{verb} answered a body that is not its extender answer") as info:
        decode(content)
    assert isinstance(info.value, VerbError) and where in str(info.value)


def test_a_bad_failed_nodes_map_is_read_only_when_no_node_passed() -> None:
    answer = decode_filter(b'{"NodeNames": ["n1"], "FailedNodes": {"n2": 7}}')
    assert answer.NodeNames == ["n1"]  # not read: the node passed
    with pytest.raises(AnswerError, match=r"^/filter answered a bad failed-nodes map: Expected `str`, got `int`"):
        answer.failed()


class _Scripted:
    """An :class:`~app.sim.transport.AsyncPoster` stand-in answering each verb with a scripted body."""

    def __init__(self, answers: dict[str, bytes]) -> None:
        self.answers = answers

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        orjson.loads(body)  # the sim still sends JSON
        return 200, self.answers[path]


def _sim(answers: dict[str, bytes]) -> tuple[Simulation, TracePod]:
    nodes = [TraceNode(f"n{i}", 32000, 65536, 4, "T4") for i in range(3)]
    sim = Simulation(SimpleNamespace(port=1), nodes, builtin_policy("FragmentationAware"), 1, tie_break="name")  # type: ignore[arg-type]
    sim._poster = _Scripted(answers)  # type: ignore[assignment]
    pod = TracePod("p", 1000, 1024, 1, 1000, None, "LS", 0, None, 2)
    return sim, pod


@pytest.mark.parametrize(
    ("answers", "error"),
    [
        ({"/filter": b"not json"}, "^/filter answered a body"),
        ({"/filter": b'{"NodeNames": ["n0", "n1"]}', "/prioritize": b"[]"}, "^/prioritize answered no scores"),
        ({"/filter": b'{"NodeNames": ["n0", "n1"]}', "/prioritize": b'[{"Host": 1, "Score": 2}]'}, r"\$\[0\]\.Host"),
        ({"/filter": b'{"NodeNames": null, "FailedNodes": []}'}, "^/filter answered a bad failed-nodes map"),
    ],
)
def test_the_scheduling_cycle_raises_a_verb_error_on_a_bad_answer(answers: dict[str, bytes], error: str) -> None:
    sim, pod = _sim(answers)
    obj = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    with pytest.raises(VerbError, match=error):
        asyncio.run(sim._choose(pod, obj, pod_vector(pod)))


def test_the_scheduling_cycle_reads_the_typed_answers() -> None:
    answers = {
        "/filter": b'{"NodeNames": ["n0", "n1", "n2"], "FailedNodes": {}, "Error": ""}',
        "/prioritize": b'[{"Host": "n0", "Score": 5}, {"Host": "n2", "Score": 9}, {"Host": "n1", "Score": 9}]',
    }
    sim, pod = _sim(answers)
    obj = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    assert asyncio.run(sim._choose(pod, obj, pod_vector(pod))) == ("n1", "")  # name tie-break among n2, n1
    sim, pod = _sim({"/filter": b'{"NodeNames": null, "FailedNodes": {"n0": "a", "n1": "b", "n2": "b"}}'})
    assert asyncio.run(sim._choose(pod, obj, pod_vector(pod))) == (None, "filter: b")
    sim, pod = _sim({"/filter": b'{"NodeNames": [], "Error": "boom"}'})
    assert asyncio.run(sim._choose(pod, obj, pod_vector(pod))) == (None, "filter: boom")
    assert Counter() == sim.result.failed
