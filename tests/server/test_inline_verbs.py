"""``POST /filter`` and ``POST /prioritize`` answered inline by the service's HTTP protocol (issue 47).

Over a real uvicorn server and real sockets: :class:`~app.server.httpprotocol.ServiceProtocol` answers the two
verbs from the parser's callback, with no ASGI cycle, and every answer (status, headers that matter, body) is the
one the ASGI path gives; requests it must not take (other verbs, a query string, ``Expect: 100-continue``, a
request pipelined behind an unfinished one) go the ASGI way, and answers stay in order.
"""

from __future__ import annotations

import logging
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.server.clientauth import TLSScopeProtocol
from app.server.extender_routes import InlineVerbs
from app.server.httpprotocol import ServiceProtocol
from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer, filter_body, wire

LIMIT = 64 * 1024


class _CountingProtocol(ServiceProtocol):
    """The service's protocol, counting the ASGI cycles it starts (class-wide)."""

    asgi_cycles: list[str] = []

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        type(self).asgi_cycles.append(cycle.scope["path"])
        super()._start_asgi_task(cycle, app)


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    target = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, target)
    return target


@pytest.fixture
def servers(cluster: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    """(the service under its own protocol, counting ASGI cycles; the same under the plain ASGI protocol)."""
    with (
        LiveServer(
            FileSource(cluster, poll_interval=0), protocol=_CountingProtocol, max_request_body_bytes=LIMIT
        ) as inline,
        LiveServer(
            FileSource(cluster, poll_interval=0), protocol=TLSScopeProtocol, max_request_body_bytes=LIMIT
        ) as asgi,
    ):
        _CountingProtocol.asgi_cycles = []
        yield inline, asgi


def _exchange(port: int, raw: bytes, answers: int = 1) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``raw`` on a new connection and read ``answers`` HTTP answers: (status, headers, body) each; a last
    answer marked ``connection: close`` is read to the end of the stream."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        buf = b""
        for _ in range(answers):
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                assert chunk, f"connection closed before an answer: {buf!r}"
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            size = int(headers["content-length"])
            while len(buf) < size:
                chunk = sock.recv(65536)
                assert chunk, "connection closed inside a body"
                buf += chunk
            out.append((int(lines[0].split()[1]), headers, buf[:size]))
            buf = buf[size:]
        if out and out[-1][1].get("connection") == "close":
            sock.settimeout(5)
            assert sock.recv(1) == b"", "the server kept a connection it said it closes"
    return out


def _post(path: str, body: bytes, extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:
    return (
        b"POST " + path.encode() + b" " + version + b"\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body
    )


def _verb_body() -> bytes:
    pod = wire("filter.json")["Pod"]
    return orjson.dumps(filter_body(pod, ["node-idle", "node-busy", "ghost"]))


def _chunked(path: str, body: bytes, piece: int = 1000) -> bytes:
    out = [b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"]
    for i in range(0, len(body), piece):
        part = body[i : i + piece]
        out.append(b"%x\r\n" % len(part) + part + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)


BAD_BODIES = {
    "not-json": b"{nope",
    "not-an-object": b"[1, 2]",
    "pod-not-an-object": b'{"Pod": 3, "NodeNames": ["node-idle"]}',
    "names-not-strings": b'{"Pod": {"metadata": {"name": "p", "uid": "u"}}, "NodeNames": [1]}',
}


@pytest.mark.parametrize("path", ["/filter", "/prioritize"])
def test_answers_are_the_asgi_paths_and_take_no_asgi_cycle(servers: tuple[LiveServer, LiveServer], path: str) -> None:
    """A good body gets 200 with the same JSON as on the ASGI path, and each bad body the same 400 and message;
    two requests on one keep-alive connection each get theirs; none starts an ASGI cycle."""
    inline, asgi = servers
    bodies = [_verb_body(), *BAD_BODIES.values()]
    for body in bodies:
        got = _exchange(inline.port, _post(path, body) * 2, answers=2)
        want = _exchange(asgi.port, _post(path, body))[0]
        for status, headers, content in got:
            assert (status, orjson.loads(content)) == (want[0], orjson.loads(want[2])), body
            assert headers["content-type"] == "application/json"
            assert "connection" not in headers
        if body is not bodies[0]:
            assert got[0][0] == 400 and orjson.loads(got[0][2])["message"], body
    assert got[0][0] == 400
    assert _CountingProtocol.asgi_cycles == []


def test_a_passing_filter_names_every_known_candidate(servers: tuple[LiveServer, LiveServer]) -> None:
    inline, _ = servers
    [(status, _, content)] = _exchange(inline.port, _post("/filter", _verb_body()))
    answer = orjson.loads(content)
    assert status == 200
    assert "ghost" in answer["FailedNodes"] and "ghost" not in (answer["NodeNames"] or [])
    assert answer["NodeNames"], answer


@pytest.mark.parametrize("how", ["announced", "chunked"])
def test_a_body_over_the_limit_gets_413_and_the_connection_goes_on(
    servers: tuple[LiveServer, LiveServer], how: str
) -> None:
    """Over ``--max-request-body-bytes``, announced by Content-Length or streamed in chunks: 413 with the limit's
    message, as on the ASGI path, and the next request on the same connection is answered."""
    inline, asgi = servers
    pod = wire("filter.json")["Pod"]
    big = orjson.dumps(filter_body(pod, [f"node-{i:06d}" for i in range(LIMIT // 10)]))
    assert len(big) > LIMIT
    raw = _post("/filter", big) if how == "announced" else _chunked("/filter", big)
    got = _exchange(inline.port, raw + _post("/prioritize", _verb_body()), answers=2)
    want = _exchange(asgi.port, raw)[0]
    assert (got[0][0], orjson.loads(got[0][2])) == (413, orjson.loads(want[2]))
    assert want[0] == 413
    assert "exceeds the limit of 65536 bytes" in orjson.loads(got[0][2])["message"]
    assert got[1][0] == 200
    assert _CountingProtocol.asgi_cycles == []


def test_a_chunked_body_within_the_limit_is_answered(servers: tuple[LiveServer, LiveServer]) -> None:
    inline, asgi = servers
    [(status, _, content)] = _exchange(inline.port, _chunked("/prioritize", _verb_body(), piece=100))
    [(_, _, want)] = _exchange(asgi.port, _post("/prioritize", _verb_body()))
    assert status == 200 and orjson.loads(content) == orjson.loads(want)
    assert _CountingProtocol.asgi_cycles == []


def test_http_1_0_and_connection_close_get_their_answer_then_the_close(servers: tuple[LiveServer, LiveServer]) -> None:
    inline, _ = servers
    for raw in (
        _post("/filter", _verb_body(), version=b"HTTP/1.0"),
        _post("/prioritize", _verb_body(), extra=b"Connection: close\r\n"),
    ):
        [(status, headers, _)] = _exchange(inline.port, raw)  # _exchange checks the stream then ends
        assert (status, headers["connection"]) == (200, "close")
    assert _CountingProtocol.asgi_cycles == []


def test_what_the_inline_path_must_not_take_goes_the_asgi_way_in_order(
    servers: tuple[LiveServer, LiveServer],
) -> None:
    """A query string and ``Expect: 100-continue`` take the ASGI path with their usual answers; a filter pipelined
    behind an unfinished bind (answered from a task) waits for it, and the answers keep the requests' order."""
    inline, _ = servers
    body = _verb_body()
    [(status, _, _)] = _exchange(inline.port, _post("/filter?x=1", body))
    assert status == 200
    with socket.create_connection(("127.0.0.1", inline.port), timeout=10) as sock:
        head = _post("/prioritize", b"")[: -len(b"\r\n")]
        sock.sendall(head.replace(b"Content-Length: 0", b"Content-Length: " + str(len(body)).encode()))
        sock.sendall(b"Expect: 100-continue\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        assert b"HTTP/1.1 200 OK" in sock.recv(65536)
    bind = orjson.dumps({"PodName": "nobody", "PodNamespace": "default", "PodUID": "u-1", "Node": "node-idle"})
    got = _exchange(inline.port, _post("/bind", bind) + _post("/filter", body), answers=2)
    assert orjson.loads(got[0][2]) == {"Error": 'pods "nobody" not found'}
    assert got[1][0] == 200 and "FailedNodes" in orjson.loads(got[1][2])
    # the bind is answered inline (from a task); the filter pipelined behind it waits in uvicorn's pipeline
    assert _CountingProtocol.asgi_cycles == ["/filter", "/prioritize", "/filter"]


BIND_BODIES = {
    "unknown pod": orjson.dumps({"PodName": "nobody", "PodNamespace": "default", "PodUID": "u-1", "Node": "node-idle"}),
    "unknown node": orjson.dumps({"PodName": "x", "PodNamespace": "batch", "PodUID": "u-2", "Node": "ghost"}),
    "not JSON": b"{nope",
    "wrong shape": b'{"PodName": 3}',
}


def test_bind_is_answered_inline_as_the_asgi_path_answers_it(servers: tuple[LiveServer, LiveServer]) -> None:
    """``POST /bind`` is answered from a task with no ASGI cycle: a binding, its refusals and the 400s of bad bodies
    are the ASGI path's, and counted in the metrics; a bind pipelined behind one still being answered goes the
    ASGI way after it."""
    inline, asgi = servers
    for name, body in BIND_BODIES.items():
        got = _exchange(inline.port, _post("/bind", body) * 2, answers=2)
        want = _exchange(asgi.port, _post("/bind", body))[0]
        for status, headers, content in got:
            assert (status, orjson.loads(content)) == (want[0], orjson.loads(want[2])), name
            assert headers["content-type"] == "application/json" and "connection" not in headers

    def good(srv: LiveServer) -> bytes:
        pod = srv.service.cache.find_pod(namespace="batch", name="batch-job-1")
        bind = {"PodName": "batch-job-1", "PodNamespace": "batch", "PodUID": pod.uid, "Node": "node-idle"}
        return _post("/bind", orjson.dumps(bind)) * 2

    bound = _exchange(inline.port, good(inline), answers=2)
    expected = _exchange(asgi.port, good(asgi), answers=2)
    assert [(g[0], orjson.loads(g[2])) for g in bound] == [(w[0], orjson.loads(w[2])) for w in expected]
    assert orjson.loads(bound[0][2]) == {"Error": ""}  # bound; the second is refused as the ASGI path refuses it
    assert inline.service.cache.find_pod(namespace="batch", name="batch-job-1").node_name == "node-idle"
    # each connection's first bind took no ASGI cycle; the one pipelined behind it (still being answered) did
    assert _CountingProtocol.asgi_cycles == ["/bind"] * len([*BIND_BODIES, "good"])
    [(status, _, content)] = _exchange(inline.port, _post("/bind", BIND_BODIES["unknown pod"]))
    assert (status, _CountingProtocol.asgi_cycles[-1:]) == (200, ["/bind"]) and b"not found" in content
    assert len(_CountingProtocol.asgi_cycles) == len(BIND_BODIES) + 1
    text = inline.client.get("/metrics").text
    assert 'koord_extender_requests_total{code="200",verb="bind"} 7.0' in text
    assert 'koord_extender_requests_total{code="400",verb="bind"} 4.0' in text


def test_a_bind_handler_bug_is_answered_500_then_closed(
    servers: tuple[LiveServer, LiveServer], caplog: pytest.LogCaptureFixture
) -> None:
    inline, _ = servers
    verbs = getattr(inline.app, "inline_verbs", None)
    assert isinstance(verbs, InlineVerbs)

    async def broken(state: Any, body: bytes, receive: Any) -> Any:
        raise RuntimeError("boom")

    verbs.LATER = {b"/bind": ("bind", "/bind", broken)}  # this instance only
    bind = BIND_BODIES["unknown pod"]
    [(status, headers, content)] = _exchange(inline.port, _post("/bind", bind) + _post("/filter", _verb_body()))
    assert (status, headers["connection"], content) == (500, "close", b"Internal Server Error")
    assert any("Exception in ASGI application" in r.getMessage() and r.exc_info for r in caplog.records)
    [(status, _, _)] = _exchange(inline.port, _post("/filter", _verb_body()))
    assert status == 200


def test_calls_are_counted_in_the_metrics(servers: tuple[LiveServer, LiveServer]) -> None:
    inline, _ = servers
    _exchange(inline.port, _post("/filter", _verb_body()) + _post("/prioritize", b"{nope"), answers=2)
    text = inline.client.get("/metrics").text
    assert 'koord_extender_requests_total{code="200",verb="filter"} 1.0' in text
    assert 'koord_extender_requests_total{code="400",verb="prioritize"} 1.0' in text
    assert 'koord_extender_request_duration_seconds_count{verb="filter"} 1.0' in text


def test_a_handler_bug_is_logged_and_answered_500_then_closed(
    servers: tuple[LiveServer, LiveServer], caplog: pytest.LogCaptureFixture
) -> None:
    """An exception that is not a bad request (a bug) is logged as uvicorn logs an ASGI app's, answered with
    uvicorn's plain 500 and the connection closed; the server keeps serving."""
    inline, _ = servers
    verbs = getattr(inline.app, "inline_verbs", None)
    assert isinstance(verbs, InlineVerbs)

    def broken(state: Any, body: bytes) -> Any:
        raise RuntimeError("boom")

    verbs.HANDLERS = {**InlineVerbs.HANDLERS, b"/filter": ("filter", "/filter", broken)}  # this instance only
    [(status, headers, content)] = _exchange(inline.port, _post("/filter", _verb_body()) + _post("/filter", b"{}"))
    assert (status, headers["connection"], content) == (500, "close", b"Internal Server Error")
    assert any("Exception in ASGI application" in r.getMessage() and r.exc_info for r in caplog.records)
    [(status, _, _)] = _exchange(inline.port, _post("/prioritize", _verb_body()))
    assert status == 200


def test_a_server_with_an_access_log_takes_the_asgi_path(cluster: Path) -> None:
    """With uvicorn's access log on (``koord scheduler`` at debug level), every request goes the ASGI way, so each
    is logged."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    _CountingProtocol.asgi_cycles = []
    srv = LiveServer(FileSource(cluster, poll_interval=0), protocol=_CountingProtocol)
    access = logging.getLogger("uvicorn.access")
    handler, level = Keep(), access.level
    access.addHandler(handler)  # after the server's config cleared the logger's handlers (access_log=False)
    access.setLevel(logging.INFO)
    try:
        with srv:
            [(status, _, _)] = _exchange(srv.port, _post("/filter", _verb_body()))
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
    assert status == 200
    assert _CountingProtocol.asgi_cycles[-1:] == ["/filter"]  # after the server's readiness probes
    assert any('"POST /filter HTTP/1.1" 200' in line for line in lines), lines
