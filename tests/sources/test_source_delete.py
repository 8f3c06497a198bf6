"""Source deletes: the file source (in memory; a file-held object stays deleted until its file
version changes) and the Kubernetes source (DELETE on the object path, 404 as NotFound)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.client.errors import MethodNotAllowed, NotFound
from app.sources.base import Source
from app.sources.events import EventSink
from app.sources.files import FileSource
from app.sources.kubernetes import KubernetesSource
from tests.sources.test_files import Sink
from tests.sources.test_kubernetes_source import write_kubeconfig

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4'}}\n"
SLO = "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeSLO\nmetadata: {name: n1}\nspec: {a: 1}\n"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: ns}\nspec: {containers: [{name: c}]}\n"


async def _started(tmp_path: Path, text: str) -> tuple[FileSource, Sink]:
    (tmp_path / "c.yaml").write_text(text)
    src = FileSource(tmp_path, poll_interval=0.02, restamp_interval=0)
    sink = Sink()
    await src.start(sink)
    return src, sink


async def _until(cond: Any) -> None:
    for _ in range(200):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def test_base_source_delete_is_405() -> None:
    class Bare(Source):
        async def start(self, sink: EventSink) -> None: ...
        async def stop(self) -> None: ...
        def ready(self) -> bool:
            return True

        async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
            return None

        @property
        def description(self) -> str:
            return "bare"

    with pytest.raises(MethodNotAllowed, match="does not support writes") as err:
        await Bare().delete("NodeSLO", "n1")
    assert err.value.status == 405


async def test_file_source_delete_created_object_reaches_sink_and_survives_reload(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path, NODE)
    try:
        await src.create_or_update({"kind": "NodeSLO", "metadata": {"name": "n2"}, "spec": {}})
        await asyncio.sleep(0)
        assert "n2" in sink.objects["NodeSLO"]
        await src.delete("NodeSLO", "n2")
        await asyncio.sleep(0)
        assert "n2" not in sink.objects.get("NodeSLO", {})
        (tmp_path / "c.yaml").write_text(NODE.replace("'4'", "'8'"))
        await _until(lambda: sink.objects["Node"]["n1"]["status"]["allocatable"]["cpu"] == "8")
        assert "n2" not in sink.objects.get("NodeSLO", {})
    finally:
        await src.stop()


async def test_file_source_delete_of_file_object_lasts_until_its_file_version_changes(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path, NODE + "---\n" + SLO)
    try:
        await src.patch("NodeSLO", "n1", {"spec": {"b": 2}})
        await src.delete("NodeSLO", "n1")
        await asyncio.sleep(0)
        assert "n1" not in sink.objects["NodeSLO"]
        # another object in the same file changes: the deleted one stays deleted
        (tmp_path / "c.yaml").write_text(NODE.replace("'4'", "'8'") + "---\n" + SLO)
        await _until(lambda: sink.objects["Node"]["n1"]["status"]["allocatable"]["cpu"] == "8")
        assert "n1" not in sink.objects["NodeSLO"]
        # its own file version changes: it is back, without the patch made before the deletion
        (tmp_path / "c.yaml").write_text(NODE + "---\n" + SLO.replace("a: 1", "a: 3"))
        await _until(lambda: "n1" in sink.objects["NodeSLO"])
        assert sink.objects["NodeSLO"]["n1"]["spec"] == {"a": 3}
    finally:
        await src.stop()


async def test_file_source_delete_is_forgotten_when_files_drop_the_object(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path, NODE + "---\n" + SLO)
    try:
        await src.delete("NodeSLO", "n1")
        (tmp_path / "c.yaml").write_text(NODE)
        await _until(lambda: not src._deleted.get("NodeSLO"))
        (tmp_path / "c.yaml").write_text(NODE + "---\n" + SLO)  # same content as when deleted
        await _until(lambda: "n1" in sink.objects["NodeSLO"])
    finally:
        await src.stop()


async def test_file_source_delete_pod_and_unknown_is_404(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path, NODE + "---\n" + POD)
    try:
        await src.delete("Pod", "p1", namespace="ns")
        await asyncio.sleep(0)
        assert "p1" not in sink.objects["Pod"]
        with pytest.raises(NotFound, match='pods "p1" not found') as err:
            await src.delete("Pod", "p1", namespace="ns")
        assert err.value.status == 404
        with pytest.raises(NotFound, match="unknown kind Gadget") as err:
            await src.delete("Gadget", "g")
        assert err.value.status == 404
    finally:
        await src.stop()


class _DeleteServer:
    """An API server answering DELETE: 200 with a Status for known paths, 404 otherwise."""

    def __init__(self, known: set[str]) -> None:
        self.calls: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_DELETE(self) -> None:
                server.calls.append((self.command, self.path))
                if self.path in known:
                    code, answer = 200, {"kind": "Status", "status": "Success"}
                else:
                    name = self.path.rsplit("/", 1)[-1]
                    answer = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
                    answer["message"] = f'nodeslos.slo.koordinator.sh "{name}" not found'
                    code = 404
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def api() -> Iterator[_DeleteServer]:
    s = _DeleteServer({"/apis/slo.koordinator.sh/v1alpha1/nodeslos/n1", "/api/v1/namespaces/ns/pods/p1"})
    yield s
    s.server.shutdown()


async def test_kubernetes_delete_sends_delete_and_maps_404(tmp_path: Path, api: _DeleteServer) -> None:
    src = KubernetesSource((), kubeconfig=write_kubeconfig(tmp_path, api.port))
    await src.delete("NodeSLO", "n1")
    await src.delete("Pod", "p1", namespace="ns")
    with pytest.raises(NotFound, match='"gone" not found') as err:
        await src.delete("NodeSLO", "gone")
    assert err.value.status == 404
    assert api.calls == [
        ("DELETE", "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n1"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p1"),
        ("DELETE", "/apis/slo.koordinator.sh/v1alpha1/nodeslos/gone"),
    ]
    with pytest.raises(NotFound, match="unknown kind Gadget"):
        await src.delete("Gadget", "g")
