"""The file source: formats, errors naming the file, reloads, re-stamped NodeMetrics, bindings."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.api.manifests import ManifestError, load_objects
from app.client.errors import NotFound
from app.sources.events import Event
from app.sources.files import ANNOTATION_STAMP_UPDATE_TIME, FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer


class Sink:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}
        self.events: list[Event] = []

    def replace(self, kind: str, objects: list[dict[str, Any]]) -> None:
        self.objects[kind] = {o["metadata"]["name"]: o for o in objects}

    def apply(self, event: Event) -> None:
        self.events.append(event)
        store = self.objects.setdefault(event.kind, {})
        if event.type == "DELETED":
            store.pop(event.obj["metadata"]["name"], None)
        else:
            store[event.obj["metadata"]["name"]] = event.obj


NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: %s}\nstatus: {allocatable: {cpu: '4'}}\n"


@contextlib.asynccontextmanager
async def _started(
    path: Path, *, poll_interval: float = 0.02, restamp_interval: float = 0
) -> AsyncIterator[tuple[FileSource, Sink]]:
    """A file source on ``path`` (polling every 20 ms, no re-stamping, unless told), started into a fresh
    Sink, stopped afterwards."""
    src = FileSource(path, poll_interval=poll_interval, restamp_interval=restamp_interval)
    sink = Sink()
    await src.start(sink)
    try:
        yield src, sink
    finally:
        await src.stop()


async def _poll_until(src: FileSource, sink: Sink, done: Any, what: str) -> None:
    for _ in range(200):
        await asyncio.sleep(0.02)
        if done():
            return
    raise AssertionError(f"timed out waiting for {what}; nodes now {sorted(sink.objects.get('Node', {}))}")


def test_single_multidoc_and_list_forms(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(NODE % "n1" + "---\n" + NODE % "n2")
    (tmp_path / "b.yml").write_text(
        "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: p1, namespace: ns}\n  spec: {}\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.json").write_text('{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}}')
    objs = load_objects(tmp_path)
    assert sorted(objs["Node"]) == ["n1", "n2", "n3"]
    assert list(objs["Pod"]) == ["ns/p1"]
    assert objs["Pod"]["ns/p1"]["metadata"]["uid"]  # a stable uid is derived


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("kind: Node\nmetadata: {name: [unclosed\n", "not valid YAML"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "document 1: missing kind"),
        ("apiVersion: v1\nkind: Node\nmetadata: {}\n", "Node without metadata.name"),
        ("- 1\n- 2\n", "expected an object"),
    ],
    ids=["bad-yaml", "no-kind", "no-name", "not-object"],
)
def test_bad_files_name_the_file(tmp_path: Path, content: str, needle: str) -> None:
    (tmp_path / "bad.yaml").write_text(content)
    with pytest.raises(ManifestError, match=r"bad\.yaml") as info:
        load_objects(tmp_path)
    assert needle in str(info.value)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no such file"):
        load_objects(tmp_path / "nope")


async def test_reload_delivers_differences_and_keeps_last_good(tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(NODE % "n1")
    src = FileSource(tmp_path, poll_interval=0.05, restamp_interval=0)
    sink = Sink()
    await src.start(sink)
    try:
        assert src.ready() and list(sink.objects["Node"]) == ["n1"]
        (tmp_path / "nodes.yaml").write_text(NODE % "n2")
        for _ in range(100):
            await asyncio.sleep(0.02)
            if "n2" in sink.objects["Node"]:
                break
        assert list(sink.objects["Node"]) == ["n2"]
        assert [e.type for e in sink.events] == ["ADDED", "DELETED"]
        (tmp_path / "nodes.yaml").write_text("kind: [broken")
        for _ in range(100):
            await asyncio.sleep(0.02)
            if src.files.read_errors:
                break
        assert src.files.read_errors == 1
        assert list(sink.objects["Node"]) == ["n2"]
    finally:
        await src.stop()


async def test_annotated_node_metric_without_update_time_is_restamped(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(
        "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeMetric\n"
        f"metadata: {{name: n1, annotations: {{{ANNOTATION_STAMP_UPDATE_TIME}: 'true'}}}}\n"
        "status: {nodeMetric: {nodeUsage: {resources: {cpu: '1'}}}}\n"
    )
    async with _started(tmp_path, poll_interval=0, restamp_interval=0.05) as (_, sink):
        first = sink.objects["NodeMetric"]["n1"]["status"]["updateTime"]
        assert first.endswith("Z")
        for _ in range(50):
            await asyncio.sleep(0.02)
            if sink.events:
                break
        assert sink.events and sink.events[0].kind == "NodeMetric"


async def test_node_metric_without_update_time_stays_without(tmp_path: Path) -> None:
    # upstream treats a NodeMetric with no updateTime as expired: the source must not make it fresh
    (tmp_path / "m.yaml").write_text(
        "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeMetric\nmetadata: {name: n1}\n"
        "status: {nodeMetric: {nodeUsage: {resources: {cpu: '1'}}}}\n"
        "---\napiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeMetric\n"
        f"metadata: {{name: n2, annotations: {{{ANNOTATION_STAMP_UPDATE_TIME}: 'false'}}}}\n"
        "status: {nodeMetric: {nodeUsage: {resources: {cpu: '1'}}}}\n"
    )
    async with _started(tmp_path, poll_interval=0, restamp_interval=0.05) as (_, sink):
        await asyncio.sleep(0.15)
        for name in ("n1", "n2"):
            assert "updateTime" not in sink.objects["NodeMetric"][name]["status"]
        assert sink.events == []  # nothing re-stamped


async def test_bind_records_and_delivers(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        NODE % "n1" + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\nspec: {}\n"
    )
    src = FileSource(tmp_path, poll_interval=0, restamp_interval=0)
    sink = Sink()
    await src.start(sink)
    await src.bind("d", "p", "", "n1")
    await asyncio.sleep(0)
    bound = sink.objects["Pod"]["p"]
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"][-1]["type"] == "PodScheduled"
    with pytest.raises(NotFound, match='nodes "ghost" not found'):
        await src.bind("d", "p", "", "ghost")
    with pytest.raises(NotFound, match='pods "q" not found'):
        await src.bind("d", "q", "", "n1")
    await src.stop()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("nodes.yaml", ""),
        ("nodes.json", ""),
        ("nodes.yaml", "\n  \n"),
        ("nodes.json", "  \n"),
        ("nodes.yaml", "# being rewritten\n---\n"),
    ],
    ids=["0-byte-yaml", "0-byte-json", "blank-yaml", "blank-json", "comments-only-yaml"],
)
async def test_an_emptied_file_keeps_its_objects_and_others_keep_flowing(
    tmp_path: Path, name: str, content: str
) -> None:
    first = NODE % "n1" if name.endswith(".yaml") else '{"kind": "Node", "metadata": {"name": "n1"}}'
    (tmp_path / name).write_text(first)
    (tmp_path / "other.yaml").write_text(NODE % "o1")
    async with _started(tmp_path) as (src, sink):
        assert sorted(sink.objects["Node"]) == ["n1", "o1"]
        (tmp_path / name).write_text(content)  # a writer truncated the file and has not written yet
        (tmp_path / "other.yaml").write_text(NODE % "o2")  # meanwhile another file changes
        await _poll_until(src, sink, lambda: "o2" in sink.objects["Node"], "the other file's change")
        await _poll_until(src, sink, lambda: src.files.empty_reads >= 1, "the empty read")
        assert sorted(sink.objects["Node"]) == ["n1", "o2"]
        assert not any(e.type == "DELETED" and e.obj["metadata"]["name"] == "n1" for e in sink.events)
        # the writer finishes: the file's new content replaces the kept objects
        (tmp_path / name).write_text(
            NODE % "n2" if name.endswith(".yaml") else '{"kind": "Node", "metadata": {"name": "n2"}}'
        )
        await _poll_until(src, sink, lambda: "n2" in sink.objects["Node"], "the rewritten file")
        assert sorted(sink.objects["Node"]) == ["n2", "o2"]


async def test_a_truncated_file_keeps_its_objects_and_removing_the_file_drops_them(tmp_path: Path) -> None:
    full = NODE % "n1" + "---\n" + NODE % "n2"
    (tmp_path / "nodes.yaml").write_text(full)
    (tmp_path / "keep.yaml").write_text(NODE % "k1")
    async with _started(tmp_path) as (src, sink):
        (tmp_path / "nodes.yaml").write_text(full[: len(NODE % "n1") + 30])  # cut inside the second document
        await _poll_until(src, sink, lambda: src.files.read_errors >= 1, "the failed read")
        assert sorted(sink.objects["Node"]) == ["k1", "n1", "n2"]
        (tmp_path / "nodes.yaml").unlink()
        await _poll_until(src, sink, lambda: "n1" not in sink.objects["Node"], "the removal")
        assert sorted(sink.objects["Node"]) == ["k1"]


async def test_an_empty_list_drops_a_files_objects(tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(NODE % "n1")
    async with _started(tmp_path) as (src, sink):
        (tmp_path / "nodes.yaml").write_text("apiVersion: v1\nkind: List\nitems: []\n")
        await _poll_until(src, sink, lambda: not sink.objects["Node"], "the deliberate emptying")
        assert src.files.empty_reads == 0


async def test_an_object_in_two_files_is_a_warning_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a.yaml").write_text(NODE % "n1")
    (tmp_path / "b.yaml").write_text((NODE % "n1").replace("'4'", "'8'"))
    with caplog.at_level("WARNING"):
        async with _started(tmp_path) as (src, sink):
            assert sink.objects["Node"]["n1"]["status"]["allocatable"]["cpu"] == "8"  # the last file wins
            assert list(src.files.duplicates) == [("Node", "n1")]
            await asyncio.sleep(0.1)  # a few polls: the warning is not repeated
            warnings = [r.getMessage() for r in caplog.records if "defined in 2 files" in r.getMessage()]
            assert len(warnings) == 1 and "a.yaml" in warnings[0] and "b.yaml" in warnings[0], warnings
            (tmp_path / "b.yaml").unlink()
            await _poll_until(src, sink, lambda: not src.files.duplicates, "the duplicate to go")
            assert sink.objects["Node"]["n1"]["status"]["allocatable"]["cpu"] == "4"


def test_blank_json_and_blank_yaml_load_the_same_at_start(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("")
    (tmp_path / "b.yaml").write_text("")
    assert load_objects(tmp_path) == {}


def test_bad_reads_and_duplicates_are_in_the_service_metrics(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, cluster)
    (cluster / "zz-dup.yaml").write_text(NODE % "node-idle")
    with LiveServer(FileSource(cluster, poll_interval=0.02, restamp_interval=0)) as srv:
        (cluster / "zz-dup.yaml").write_text("kind: [broken")
        text = ""
        for _ in range(200):
            text = srv.client.get("/metrics").text
            if 'koord_source_file_bad_reads_total{reason="malformed"} 1.0' in text:
                break
            time.sleep(0.02)
        assert 'koord_source_file_bad_reads_total{reason="malformed"} 1.0' in text, text
        assert 'koord_source_file_bad_reads_total{reason="empty"} 0.0' in text
        assert "koord_source_file_duplicate_objects 1.0" in text  # the broken file keeps its copy of node-idle
