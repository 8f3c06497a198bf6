"""KubernetesSource against an in-process fake API server speaking the real list/watch protocol.

The fake (``http.server`` in a thread, HTTP/1.1) serves:

* LIST: ``{"kind": "...List", "metadata": {"resourceVersion": ..., "continue": ...}, "items": [...]}``
  with items lacking ``kind``/``apiVersion`` like a real typed list, honouring ``limit``/``continue``;
* WATCH (``?watch=true``): newline-delimited JSON events, chunked, held open until the test
  ends it; events newer than the requested resourceVersion are replayed; a resourceVersion older
  than the compaction point answers an ``ERROR`` event carrying a 410 ``Status``; ``BOOKMARK``
  events; abrupt connection drops (no terminating chunk);
* POST ``.../pods/{name}/binding`` (recorded, answer configurable) and GET ``/version``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import socket
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from app.client.errors import Conflict, ConnectionFailed, NotFound
from app.sources.events import Event
from app.sources.kubernetes import KubernetesSource, probe

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"

KIND_OF = {
    NODES: ("Node", "v1"),
    PODS: ("Pod", "v1"),
    NODEMETRICS: ("NodeMetric", "slo.koordinator.sh/v1alpha1"),
}


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def node(name: str) -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}}


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
        "spec": {"containers": [{"name": "c"}]},
    }


class FakeAPIServer:
    """State and controls of the fake; the HTTP handler below reads it under ``cond``."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 100
        self.store: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.history: dict[str, list[dict[str, Any]]] = defaultdict(list)  # watch events with rv
        self.compacted: dict[str, int] = defaultdict(int)  # watches from rv < this get 410
        self.missing: set[str] = set()  # collections answering 404
        self.held_lists: dict[str, threading.Event] = {}
        self.fail_next_watch: dict[str, int] = {}  # path -> HTTP status for the next watch
        self.expire_gen: dict[str, int] = defaultdict(int)
        self.drop_gen: dict[str, int] = defaultdict(int)
        self.list_calls: dict[str, int] = defaultdict(int)
        self.watch_rvs: dict[str, list[str | None]] = defaultdict(list)
        self.open_watches: dict[str, int] = defaultdict(int)
        self.posts: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.post_answer: tuple[int, dict[str, Any]] = (
            201,
            {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201},
        )
        self.auth_headers: list[str | None] = []
        self.closed = False
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- controls (called from the test) -------------------------------------------------------

    def _bump(self) -> int:
        self.rv += 1
        return self.rv

    def seed(self, path: str, objs: list[dict[str, Any]]) -> None:
        """Set the collection's contents without producing watch events."""
        with self.cond:
            self.store[path] = {}
            for o in objs:
                o = copy.deepcopy(o)
                o["metadata"]["resourceVersion"] = str(self._bump())
                self.store[path][_key(o)] = o

    def put(self, path: str, obj: dict[str, Any]) -> int:
        with self.cond:
            o = copy.deepcopy(obj)
            rv = self._bump()
            o["metadata"]["resourceVersion"] = str(rv)
            etype = "MODIFIED" if _key(o) in self.store[path] else "ADDED"
            self.store[path][_key(o)] = o
            self.history[path].append({"rv": rv, "type": etype, "object": o})
            self.cond.notify_all()
            return rv

    def delete(self, path: str, key: str) -> int:
        with self.cond:
            o = copy.deepcopy(self.store[path].pop(key))
            rv = self._bump()
            o["metadata"]["resourceVersion"] = str(rv)
            self.history[path].append({"rv": rv, "type": "DELETED", "object": o})
            self.cond.notify_all()
            return rv

    def bookmark(self, path: str) -> int:
        with self.cond:
            rv = self._bump()
            kind, api_version = KIND_OF[path]
            obj = {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": str(rv)}}
            self.history[path].append({"rv": rv, "type": "BOOKMARK", "object": obj})
            self.cond.notify_all()
            return rv

    def expire(self, path: str) -> None:
        """Compact history: open watches get a 410 ERROR event, old resourceVersions answer 410."""
        with self.cond:
            self.compacted[path] = self._bump()
            self.history[path].clear()
            self.expire_gen[path] += 1
            self.cond.notify_all()

    def drop(self, path: str) -> None:
        """Close open watches on ``path`` abruptly (no terminating chunk)."""
        with self.cond:
            self.drop_gen[path] += 1
            self.cond.notify_all()

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for ev in self.held_lists.values():
            ev.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _make_handler(fake: FakeAPIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            path = url.path
            fake.auth_headers.append(self.headers.get("Authorization"))
            if path == "/version":
                self._json(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"})
                return
            if path not in KIND_OF:
                self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            if path in fake.missing:
                if q.get("watch") != "true":
                    with fake.cond:
                        fake.list_calls[path] += 1
                self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            if q.get("watch") == "true":
                self._watch(path, q)
            else:
                self._list(path, q)

        def _list(self, path: str, q: dict[str, str]) -> None:
            with fake.cond:
                fake.list_calls[path] += 1
                held = fake.held_lists.get(path)
            if held is not None:
                held.wait(10)
            with fake.cond:
                items = sorted(fake.store[path].values(), key=_key)
                rv = fake.rv
            start = int(q.get("continue", "0"))
            limit = int(q.get("limit", "0")) or len(items) or 1
            page = items[start : start + limit]
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
            out = []
            for o in page:  # typed lists carry no kind/apiVersion on their items
                o = copy.deepcopy(o)
                o.pop("kind", None)
                o.pop("apiVersion", None)
                out.append(o)
            kind, api_version = KIND_OF[path]
            self._json(200, {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta, "items": out})

        def _chunk(self, event: dict[str, Any]) -> None:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        def _watch(self, path: str, q: dict[str, str]) -> None:
            rv_param = q.get("resourceVersion")
            with fake.cond:
                fake.watch_rvs[path].append(rv_param)
                status = fake.fail_next_watch.pop(path, None)
            if status is not None:
                self._json(status, _status(status, "InternalError", "etcd is sad"))
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            deadline = time.monotonic() + int(q.get("timeoutSeconds", "300"))
            with fake.cond:
                fake.open_watches[path] += 1
                since = int(rv_param) if rv_param else fake.rv
                expire_gen, drop_gen = fake.expire_gen[path], fake.drop_gen[path]
            try:
                if since < fake.compacted[path]:
                    self._chunk({"type": "ERROR", "object": _status(410, "Expired", "too old resource version")})
                    self.wfile.write(b"0\r\n\r\n")
                    return
                while True:
                    with fake.cond:
                        pending = [e for e in fake.history[path] if e["rv"] > since]
                        if (
                            not pending
                            and not fake.closed
                            and expire_gen == fake.expire_gen[path]
                            and drop_gen == fake.drop_gen[path]
                        ):
                            fake.cond.wait(0.05)
                            pending = [e for e in fake.history[path] if e["rv"] > since]
                        expired = expire_gen != fake.expire_gen[path]
                        dropped = drop_gen != fake.drop_gen[path]
                        closed = fake.closed
                    for e in pending:
                        self._chunk({"type": e["type"], "object": e["object"]})
                        since = e["rv"]
                    if expired:
                        self._chunk({"type": "ERROR", "object": _status(410, "Expired", "too old resource version")})
                        self.wfile.write(b"0\r\n\r\n")
                        return
                    if dropped or closed:
                        self.close_connection = True  # no terminating chunk: a broken stream
                        return
                    if time.monotonic() > deadline:
                        self.wfile.write(b"0\r\n\r\n")
                        return
            except OSError:
                self.close_connection = True
            finally:
                with fake.cond:
                    fake.open_watches[path] -= 1

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            fake.posts.append((self.path, body, {k.lower(): v for k, v in self.headers.items()}))
            code, answer = fake.post_answer
            self._json(code, answer)

    return Handler


class RecordingSink:
    """Stores objects per kind; records every call and the thread it was made on."""

    def __init__(self) -> None:
        self.loop_thread = threading.get_ident()
        self.objects: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.calls: list[tuple[str, ...]] = []
        self.replaced: dict[str, int] = defaultdict(int)
        self.wrong_thread = 0

    def _check_thread(self) -> None:
        if threading.get_ident() != self.loop_thread:
            self.wrong_thread += 1

    def replace(self, kind: str, objects: list[dict[str, Any]]) -> None:
        self._check_thread()
        self.objects[kind] = {_key(o): o for o in objects}
        self.replaced[kind] += 1
        self.calls.append(("replace", kind, *sorted(self.objects[kind])))

    def apply(self, event: Event) -> None:
        self._check_thread()
        key = _key(event.obj)
        self.calls.append(("apply", event.kind, event.type.value, key))
        if event.type.value == "DELETED":
            self.objects[event.kind].pop(key, None)
        else:
            self.objects[event.kind][key] = event.obj


async def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def write_kubeconfig(tmp_path: Path, port: int) -> str:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "tester", "user": {"token": "test-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
        "current-context": "fake",
    }
    p = tmp_path / f"kubeconfig-{port}"
    p.write_text(json.dumps(cfg))  # JSON is YAML
    return str(p)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fake() -> Iterator[FakeAPIServer]:
    f = FakeAPIServer()
    f.seed(NODES, [node("n1"), node("n2")])
    f.seed(PODS, [pod("p1")])
    f.start()
    yield f
    f.close()


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
async def make_source(
    fake: FakeAPIServer, tmp_path: Path, sink: RecordingSink
) -> AsyncIterator[Callable[..., KubernetesSource]]:
    sources: list[KubernetesSource] = []

    def factory(kinds: tuple[str, ...] = ("Node", "Pod"), **kw: Any) -> KubernetesSource:
        kw.setdefault("watch_timeout_seconds", 30)
        kw.setdefault("backoff_initial", 0.05)
        kw.setdefault("backoff_max", 0.2)
        src = KubernetesSource(kinds, kubeconfig=write_kubeconfig(tmp_path, fake.port), **kw)
        sources.append(src)
        return src

    yield factory
    for src in sources:
        await src.stop()
    assert sink.wrong_thread == 0, "sink called off the loop thread"


async def test_initial_list_and_readiness(
    fake: FakeAPIServer, sink: RecordingSink, make_source: Callable[..., KubernetesSource]
) -> None:
    fake.held_lists[PODS] = threading.Event()
    src = make_source()
    src.list_page_size = 1  # exercise limit/continue: two pages of nodes
    assert src.description == f"kubernetes:http://127.0.0.1:{fake.port}"
    await src.start(sink)
    await wait_for(lambda: "Node" in sink.replaced)
    await asyncio.sleep(0.1)
    assert not src.ready(), "ready before the Pod list arrived"
    assert set(sink.objects["Node"]) == {"n1", "n2"}
    assert fake.list_calls[NODES] == 2  # paginated
    fake.held_lists[PODS].set()
    await wait_for(src.ready)
    assert set(sink.objects["Pod"]) == {"default/p1"}
    p1 = sink.objects["Pod"]["default/p1"]
    assert (p1["kind"], p1["apiVersion"]) == ("Pod", "v1")  # filled in for list items
    assert sink.objects["Node"]["n1"]["kind"] == "Node"
    assert sink.calls[0][0] == "replace"
    assert set(fake.auth_headers) == {"Bearer test-token"}
    # both watches start from their list's resourceVersion
    await wait_for(lambda: bool(fake.watch_rvs[NODES]) and bool(fake.watch_rvs[PODS]))
    assert fake.watch_rvs[PODS][0] is not None
    assert src.watch_restarts() == 0


async def test_watch_events_applied_in_order(
    fake: FakeAPIServer, sink: RecordingSink, make_source: Callable[..., KubernetesSource]
) -> None:
    src = make_source()
    await src.start(sink)
    await wait_for(src.ready)
    await wait_for(lambda: fake.open_watches[PODS] == 1)
    fake.put(PODS, pod("p2"))
    fake.put(PODS, pod("p2", tier="gold"))
    fake.delete(PODS, "default/p1")
    await wait_for(lambda: len([c for c in sink.calls if c[0] == "apply"]) == 3)
    assert [c for c in sink.calls if c[0] == "apply"] == [
        ("apply", "Pod", "ADDED", "default/p2"),
        ("apply", "Pod", "MODIFIED", "default/p2"),
        ("apply", "Pod", "DELETED", "default/p1"),
    ]
    assert set(sink.objects["Pod"]) == {"default/p2"}
    assert sink.objects["Pod"]["default/p2"]["metadata"]["labels"] == {"tier": "gold"}
    assert fake.list_calls[PODS] == 1
    assert src.watch_restarts() == 0


async def test_410_on_watch_relists(
    fake: FakeAPIServer, sink: RecordingSink, make_source: Callable[..., KubernetesSource]
) -> None:
    src = make_source()
    await src.start(sink)
    await wait_for(src.ready)
    await wait_for(lambda: fake.open_watches[PODS] == 1)
    fake.seed(PODS, [pod("p3"), pod("p4")])  # changes the watcher never hears about
    fake.expire(PODS)
    await wait_for(lambda: fake.list_calls[PODS] == 2)
    await wait_for(lambda: set(sink.objects["Pod"]) == {"default/p3", "default/p4"})
    assert sink.replaced["Pod"] == 2
    assert src.watch_restarts() >= 1
    # the new watch starts at or after the compaction point, and events flow again
    await wait_for(lambda: len(fake.watch_rvs[PODS]) == 2)
    assert int(fake.watch_rvs[PODS][1] or 0) >= fake.compacted[PODS]
    fake.put(PODS, pod("p5"))
    await wait_for(lambda: "default/p5" in sink.objects["Pod"])
    assert fake.list_calls[NODES] == 1


async def test_dropped_stream_rewatches_from_last_rv(
    fake: FakeAPIServer, sink: RecordingSink, make_source: Callable[..., KubernetesSource]
) -> None:
    src = make_source()
    await src.start(sink)
    await wait_for(src.ready)
    await wait_for(lambda: fake.open_watches[PODS] == 1)
    fake.put(PODS, pod("p2"))
    await wait_for(lambda: "default/p2" in sink.objects["Pod"])
    bookmark_rv = fake.bookmark(PODS)
    fake.drop(PODS)
    await wait_for(lambda: len(fake.watch_rvs[PODS]) == 2)
    assert fake.watch_rvs[PODS][1] == str(bookmark_rv)  # resumed from the bookmark, no relist
    assert fake.list_calls[PODS] == 1
    assert src.watch_restarts() == 1
    fake.put(PODS, pod("p6"))
    await wait_for(lambda: "default/p6" in sink.objects["Pod"])
    assert sink.replaced["Pod"] == 1


async def test_5xx_watch_backs_off_and_rewatches(
    fake: FakeAPIServer, sink: RecordingSink, make_source: Callable[..., KubernetesSource]
) -> None:
    src = make_source()
    await src.start(sink)
    await wait_for(src.ready)
    await wait_for(lambda: fake.open_watches[PODS] == 1)
    fake.fail_next_watch[PODS] = 500
    last_rv = fake.put(PODS, pod("p2"))
    await wait_for(lambda: "default/p2" in sink.objects["Pod"])
    fake.drop(PODS)  # next watch answers 500, the one after succeeds from the same rv
    await wait_for(lambda: len(fake.watch_rvs[PODS]) == 3)
    assert fake.watch_rvs[PODS][1:] == [str(last_rv), str(last_rv)]
    assert fake.list_calls[PODS] == 1
    assert src.watch_restarts() == 2


async def test_missing_crd_does_not_block_readiness(
    fake: FakeAPIServer,
    sink: RecordingSink,
    make_source: Callable[..., KubernetesSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="app.sources.kubernetes")
    fake.missing.add(NODEMETRICS)
    src = make_source(("Node", "Pod", "NodeMetric"), missing_kind_retry_seconds=0.1)
    await src.start(sink)
    await wait_for(src.ready)
    assert sink.objects["NodeMetric"] == {}
    await wait_for(lambda: fake.list_calls[NODEMETRICS] >= 3)  # retried in the background
    assert sink.replaced["NodeMetric"] == 1  # delivered empty once, not on every retry
    warnings = [r.getMessage() for r in caplog.records if "NodeMetric" in r.getMessage()]
    assert len(warnings) == 1 and "404" in warnings[0]
    # once the CRD is installed the kind is listed and watched
    fake.seed(NODEMETRICS, [{"metadata": {"name": "n1"}, "status": {}}])
    fake.missing.discard(NODEMETRICS)
    await wait_for(lambda: "n1" in sink.objects["NodeMetric"])
    assert sink.objects["NodeMetric"]["n1"]["apiVersion"] == "slo.koordinator.sh/v1alpha1"
    await wait_for(lambda: fake.open_watches[NODEMETRICS] == 1)


async def test_bind(fake: FakeAPIServer, sink: RecordingSink, make_source: Callable[..., KubernetesSource]) -> None:
    src = make_source(())
    await src.bind("default", "p1", "uid-p1", "n2")
    path, body, headers = fake.posts[-1]
    assert path == "/api/v1/namespaces/default/pods/p1/binding"
    assert body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1", "namespace": "default", "uid": "uid-p1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n2"},
    }
    assert headers["authorization"] == "Bearer test-token"
    assert headers["content-type"] == "application/json"

    fake.post_answer = (409, _status(409, "Conflict", 'pod p1 is already assigned to node "n1"'))
    with pytest.raises(Conflict) as exc:
        await src.bind("default", "p1", "uid-p1", "n2")
    assert str(exc.value) == 'pod p1 is already assigned to node "n1"'

    fake.post_answer = (404, _status(404, "NotFound", 'pods "gone" not found'))
    with pytest.raises(NotFound, match='pods "gone" not found'):
        await src.bind("default", "gone", "uid-gone", "n2")


async def test_bind_connection_error(tmp_path: Path) -> None:
    src = KubernetesSource((), kubeconfig=write_kubeconfig(tmp_path, free_port()))
    try:
        with pytest.raises(ConnectionFailed, match="default/p1"):
            await src.bind("default", "p1", "uid-p1", "n2")
    finally:
        await src.stop()  # closes the client and its connection pools


async def test_stop_is_prompt_with_open_watches(
    fake: FakeAPIServer, sink: RecordingSink, make_source: Callable[..., KubernetesSource]
) -> None:
    src = make_source(watch_timeout_seconds=300)
    await src.start(sink)
    await wait_for(src.ready)
    await wait_for(lambda: fake.open_watches[NODES] == 1 and fake.open_watches[PODS] == 1)
    tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("reflector-")]
    assert len(tasks) == 2
    t0 = time.monotonic()
    await src.stop()
    assert time.monotonic() - t0 < 2.0
    assert all(t.done() for t in tasks), "reflector tasks still blocked in a read"
    await src.stop()  # idempotent
    # nothing reaches the sink after stop
    calls = len(sink.calls)
    fake.put(PODS, pod("late"))
    await asyncio.sleep(0.2)
    assert len(sink.calls) == calls


async def test_probe(fake: FakeAPIServer, tmp_path: Path) -> None:
    assert await probe(write_kubeconfig(tmp_path, fake.port)) is True
    assert await probe(write_kubeconfig(tmp_path, free_port())) is False
    assert await probe(str(tmp_path / "does-not-exist")) is False
    # a server that accepts connections but never answers: False within the timeout
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        t0 = time.monotonic()
        assert await probe(write_kubeconfig(tmp_path, silent.getsockname()[1]), timeout=0.5) is False
        assert time.monotonic() - t0 < 2.0


async def test_an_object_the_cache_refuses_is_rejected_alone(
    fake: FakeAPIServer, make_source: Callable[..., KubernetesSource], caplog: pytest.LogCaptureFixture
) -> None:
    """The sink raising on one event (a bad object) is logged; the watch goes on and nothing relists."""

    class PickySink(RecordingSink):
        def apply(self, event: Event) -> None:
            if event.obj["metadata"]["name"] == "bad":
                raise ValueError("bad object")
            super().apply(event)

    sink = PickySink()
    src = make_source()
    await src.start(sink)
    await wait_for(src.ready)
    await wait_for(lambda: fake.open_watches[PODS] == 1)
    fake.put(PODS, pod("bad"))
    fake.put(PODS, pod("good"))
    await wait_for(lambda: "default/good" in sink.objects["Pod"])
    assert "default/bad" not in sink.objects["Pod"]
    assert any("refused the ADDED event of Pod bad" in r.getMessage() for r in caplog.records)
    assert src.watch_restarts() == 0 and fake.list_calls[PODS] == 1 and len(fake.watch_rvs[PODS]) == 1
    await src.stop()


async def test_a_node_with_a_quantity_beyond_int64_does_not_block_readiness(
    fake: FakeAPIServer, make_source: Callable[..., KubernetesSource]
) -> None:
    from app.cache.snapshot import ClusterCache

    bad = node("bad")
    bad["status"] = {"allocatable": {"cpu": "9223372036854775808"}}
    fake.seed(NODES, [bad, node("n1")])
    cache = ClusterCache()
    src = make_source()
    await src.start(cache)
    await wait_for(src.ready)
    assert sorted(cache.nodes) == ["n1"]
    assert cache.rejected_by_kind == {"Node": 1}
    fake.put(NODES, node("n3"))  # the watch keeps flowing
    await wait_for(lambda: "n3" in cache.nodes)


def test_event_types_are_read_by_their_wire_spelling_and_an_unknown_one_is_skipped() -> None:
    """The reflector maps ``ADDED`` / ``MODIFIED`` / ``DELETED`` onto the EventType members (a dict lookup,
    issue 29) and skips any other type with a warning, leaving its resourceVersion and the sink alone."""
    from app.api.kinds import KINDS
    from app.client.watch import WatchEvent
    from app.sources.events import EventType
    from app.sources.kubernetes import _Reflector

    delivered: list[Event] = []

    class Source:
        _stopped = False

        def _deliver_event(self, event: Event) -> None:
            delivered.append(event)

    reflector = _Reflector(Source(), KINDS["Pod"])  # type: ignore[arg-type]
    for n, etype in enumerate(("ADDED", "MODIFIED", "DELETED")):
        reflector.handle(WatchEvent(etype, {"metadata": {"name": "p", "resourceVersion": str(n + 1)}}))
    assert [e.type for e in delivered] == [EventType.ADDED, EventType.MODIFIED, EventType.DELETED]
    assert all(type(e.type) is EventType for e in delivered)
    reflector.handle(WatchEvent("Added", {"metadata": {"name": "p", "resourceVersion": "9"}}))
    assert len(delivered) == 3
    assert reflector.rv == "3"
