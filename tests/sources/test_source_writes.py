"""Source writes: merge patches, create-or-update and evictions, in the file source (in memory,
surviving reloads) and the Kubernetes source (the exact requests an API server receives)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.client.errors import BadRequest, NotFound, TooManyRequests
from app.sources.files import FileSource
from app.sources.kubernetes import KubernetesSource
from app.sources.mergepatch import apply_merge_patch, compose_merge_patches
from tests.sources.test_files import Sink
from tests.sources.test_kubernetes_source import write_kubeconfig

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {a: b}}\nstatus: {allocatable: {cpu: '4'}}\n"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: ns}\nspec: {containers: [{name: c}]}\n"


def test_merge_patch_rfc7386() -> None:
    target = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert apply_merge_patch(target, {"a": {"b": None, "c": [3]}, "e": {"f": 1}}) == {
        "a": {"c": [3]},
        "d": "x",
        "e": {"f": 1},
    }
    assert target == {"a": {"b": 1, "c": [1, 2]}, "d": "x"}  # not modified
    composed = compose_merge_patches({"a": {"b": 1}, "x": 1}, {"a": {"c": 2}, "x": None})
    assert composed == {"a": {"b": 1, "c": 2}, "x": None}
    assert apply_merge_patch({"x": 5}, composed) == {"a": {"b": 1, "c": 2}}


async def _started(tmp_path: Path) -> tuple[FileSource, Sink]:
    (tmp_path / "c.yaml").write_text(NODE + "---\n" + POD)
    src = FileSource(tmp_path, poll_interval=0.05, restamp_interval=0)
    sink = Sink()
    await src.start(sink)
    return src, sink


async def test_file_source_patch_status_reaches_sink_and_survives_reload(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path)
    try:
        patched = await src.patch(
            "Node", "n1", {"status": {"allocatable": {"kubernetes.io/batch-cpu": "1500"}}}, subresource="status"
        )
        assert patched["status"]["allocatable"] == {"cpu": "4", "kubernetes.io/batch-cpu": "1500"}
        await asyncio.sleep(0)
        assert sink.objects["Node"]["n1"]["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "1500"
        # a file change reloads the node: the patch is re-applied on top of the new file content
        (tmp_path / "c.yaml").write_text(NODE.replace("'4'", "'8'") + "---\n" + POD)
        for _ in range(100):
            await asyncio.sleep(0.02)
            if sink.objects["Node"]["n1"]["status"]["allocatable"]["cpu"] == "8":
                break
        assert sink.objects["Node"]["n1"]["status"]["allocatable"] == {"cpu": "8", "kubernetes.io/batch-cpu": "1500"}
    finally:
        await src.stop()


async def test_file_source_patch_pod_annotations(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path)
    try:
        await src.patch("Pod", "p1", {"metadata": {"annotations": {"k": "v"}}}, namespace="ns")
        await asyncio.sleep(0)
        assert sink.objects["Pod"]["p1"]["metadata"]["annotations"] == {"k": "v"}
    finally:
        await src.stop()


async def test_file_source_patch_unknown_object_or_kind_is_404(tmp_path: Path) -> None:
    src, _ = await _started(tmp_path)
    try:
        with pytest.raises(NotFound, match='nodes "nope" not found') as err:
            await src.patch("Node", "nope", {"metadata": {"labels": {"x": "y"}}})
        assert err.value.status == 404
        with pytest.raises(NotFound, match="unknown kind Gadget"):
            await src.patch("Gadget", "n1", {})
    finally:
        await src.stop()


async def test_file_source_create_then_update_keeps_identity(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path)
    try:
        slo = {"kind": "NodeSLO", "metadata": {"name": "n1"}, "spec": {"cpuBurstStrategy": {"policy": "none"}}}
        created = await src.create_or_update(slo)
        assert created["apiVersion"] == "slo.koordinator.sh/v1alpha1"
        uid = created["metadata"]["uid"]
        updated = await src.create_or_update({**slo, "spec": {"cpuBurstStrategy": {"policy": "auto"}}})
        assert updated["metadata"]["uid"] == uid
        assert updated["spec"] == {"cpuBurstStrategy": {"policy": "auto"}}
        await asyncio.sleep(0)
        assert sink.objects["NodeSLO"]["n1"]["spec"]["cpuBurstStrategy"]["policy"] == "auto"
        # a new object keeps the uid and creationTimestamp it was given; without them it gets new ones
        given = {"name": "n2", "uid": "u-2", "creationTimestamp": "2026-01-02T03:04:05Z"}
        kept = await src.create_or_update({**slo, "metadata": given})
        assert (kept["metadata"]["uid"], kept["metadata"]["creationTimestamp"]) == ("u-2", "2026-01-02T03:04:05Z")
        fresh = (await src.create_or_update({**slo, "metadata": {"name": "n3"}}))["metadata"]
        assert fresh["uid"] not in (uid, "u-2") and len(fresh["uid"]) == 36
        assert fresh["creationTimestamp"].endswith("Z") and fresh["creationTimestamp"] != given["creationTimestamp"]
        with pytest.raises(BadRequest, match=r"without metadata\.name"):
            await src.create_or_update({"kind": "NodeSLO", "metadata": {}})
        with pytest.raises(BadRequest, match="'Gadget'"):
            await src.create_or_update({"kind": "Gadget", "metadata": {"name": "g"}})
    finally:
        await src.stop()


async def test_file_source_records_evictions_and_keeps_the_pod(tmp_path: Path) -> None:
    src, sink = await _started(tmp_path)
    try:
        await src.evict("ns", "p1", "uid-1", "quota reclaim")
        assert [(e["name"], e["reason"]) for e in src.evictions] == [("p1", "quota reclaim")]
        assert "p1" in sink.objects["Pod"]
        with pytest.raises(NotFound, match='pods "gone" not found'):
            await src.evict("ns", "gone", "", "x")
    finally:
        await src.stop()


class _Recorder:
    """A minimal API server answering writes and recording (method, path, content type, body)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, Any]] = []
        self.answers: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                recorder.calls.append((self.command, self.path, self.headers.get("Content-Type", ""), body))
                code, answer = recorder.answers.get((self.command, self.path), (200, body or {}))
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    r = _Recorder()
    yield r
    r.server.shutdown()


async def test_kubernetes_patch_sends_merge_patch_to_status(tmp_path: Path, recorder: _Recorder) -> None:
    src = KubernetesSource((), kubeconfig=write_kubeconfig(tmp_path, recorder.port))
    await src.patch(
        "Node", "n1", {"status": {"allocatable": {"kubernetes.io/batch-cpu": "1500"}}}, subresource="status"
    )
    await src.patch("Pod", "p1", {"metadata": {"annotations": {"k": "v"}}}, namespace="ns")
    assert recorder.calls == [
        (
            "PATCH",
            "/api/v1/nodes/n1/status",
            "application/merge-patch+json",
            {"status": {"allocatable": {"kubernetes.io/batch-cpu": "1500"}}},
        ),
        (
            "PATCH",
            "/api/v1/namespaces/ns/pods/p1",
            "application/merge-patch+json",
            {"metadata": {"annotations": {"k": "v"}}},
        ),
    ]


async def test_kubernetes_create_or_update_falls_back_to_put_on_conflict(tmp_path: Path, recorder: _Recorder) -> None:
    path = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"
    current = {"kind": "NodeSLO", "metadata": {"name": "n1", "resourceVersion": "7", "uid": "u"}, "spec": {}}
    recorder.answers[("POST", path)] = (409, {"kind": "Status", "message": 'nodeslos "n1" already exists'})
    recorder.answers[("GET", f"{path}/n1")] = (200, current)
    src = KubernetesSource((), kubeconfig=write_kubeconfig(tmp_path, recorder.port))
    await src.create_or_update({"kind": "NodeSLO", "metadata": {"name": "n1"}, "spec": {"x": 1}})
    methods = [(m, p) for m, p, _, _ in recorder.calls]
    assert methods == [("POST", path), ("GET", f"{path}/n1"), ("PUT", f"{path}/n1")]
    put_body = recorder.calls[-1][3]
    assert put_body["metadata"]["resourceVersion"] == "7" and put_body["spec"] == {"x": 1}


async def test_kubernetes_evict_posts_eviction_and_reports_pdb_refusal(tmp_path: Path, recorder: _Recorder) -> None:
    path = "/api/v1/namespaces/ns/pods/p1/eviction"
    src = KubernetesSource((), kubeconfig=write_kubeconfig(tmp_path, recorder.port))
    await src.evict("ns", "p1", "uid-1", "reclaim")
    _, _, _, body = recorder.calls[0]
    assert body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p1", "namespace": "ns"},
        "deleteOptions": {"preconditions": {"uid": "uid-1"}},
    }
    recorder.answers[("POST", path)] = (
        429,
        {"kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget."},
    )
    with pytest.raises(TooManyRequests, match="disruption budget") as err:
        await src.evict("ns", "p1", "uid-1", "reclaim")
    assert err.value.status == 429
