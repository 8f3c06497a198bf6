"""VerbFastPath answers the extender verbs itself (same handlers, metrics, 400 and 413 shapes) and passes
everything else on to the application."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from app.server.extender_routes import VerbFastPath


class Recorder:
    def __init__(self) -> None:
        self.observed: list[tuple[str, int]] = []
        self.inner_calls: list[str] = []

    def observe(self, verb: str, code: int, seconds: float) -> None:
        assert seconds >= 0
        self.observed.append((verb, code))

    async def inner(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.inner_calls.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def stub_state(rec: Recorder) -> Any:
    def prioritize_answer(args: Any) -> list[dict[str, Any]]:
        return [{"Host": n, "Score": 7} for n in args.NodeNames]

    return SimpleNamespace(metrics=rec, extender=SimpleNamespace(prioritize_answer=prioritize_answer, name_lists=None))


async def call(
    app: VerbFastPath, method: str, path: str, chunks: list[bytes], announce: bool = True
) -> tuple[int, bytes]:
    body = b"".join(chunks)
    headers = [(b"content-length", str(len(body)).encode())] if announce else []
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": headers}
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


async def test_verbs_are_answered_here_and_the_rest_passes_on() -> None:
    rec = Recorder()
    app = VerbFastPath(rec.inner, stub_state(rec), max_body_size=1000)
    body = orjson.dumps({"Pod": {"metadata": {"name": "p"}}, "Nodes": None, "NodeNames": ["a", "b"]})
    status, data = await call(app, "POST", "/prioritize", [body[:10], body[10:]])
    assert status == 200 and orjson.loads(data) == [{"Host": "a", "Score": 7}, {"Host": "b", "Score": 7}]
    status, data = await call(app, "POST", "/prioritize", [b"{not json"])
    assert status == 400 and "not valid JSON" in orjson.loads(data)["message"]
    assert rec.observed == [("prioritize", 200), ("prioritize", 400)]
    assert rec.inner_calls == []
    assert (await call(app, "GET", "/prioritize", [b""]))[0] == 204
    assert (await call(app, "POST", "/readyz", [b""]))[0] == 204
    assert rec.inner_calls == ["/prioritize", "/readyz"]


@pytest.mark.parametrize("announce", [True, False])
async def test_a_body_over_the_limit_is_the_json_413(announce: bool) -> None:
    rec = Recorder()
    app = VerbFastPath(rec.inner, stub_state(rec), max_body_size=100)
    status, data = await call(app, "POST", "/filter", [b"x" * 60, b"x" * 60], announce=announce)
    assert status == 413
    assert orjson.loads(data) == {"message": "request body exceeds the limit of 100 bytes (--max-request-body-bytes)"}
    assert rec.observed == [] and rec.inner_calls == []
