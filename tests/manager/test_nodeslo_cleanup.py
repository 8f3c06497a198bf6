"""NodeSLO cleanup: the controller deletes the NodeSLO of a node that is gone (embedded mode has no
garbage collector), and leaves Node-owned NodeSLOs to the API server's garbage collector."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.cache.snapshot import ClusterCache
from app.client.errors import error_from_response
from app.manager.controllers import SLOControllers
from app.sources.files import FileSource


def _node(name: str, uid: str | None = None) -> str:
    meta = f"{{name: {name}, uid: {uid}}}" if uid else f"{{name: {name}}}"
    return f"apiVersion: v1\nkind: Node\nmetadata: {meta}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi}}}}\n"


async def _until(cond: Any) -> None:
    for _ in range(200):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def test_embedded_nodeslo_of_removed_node_is_deleted(tmp_path: Path) -> None:
    # node n2 has a uid: its NodeSLO carries an ownerReference, which no embedded GC honours
    (tmp_path / "nodes.yaml").write_text(_node("n1") + "---\n" + _node("n2", "u-2"))
    source = FileSource(tmp_path, poll_interval=0.02, restamp_interval=0)
    cache = ClusterCache()
    controllers = SLOControllers(cache, source)
    await source.start(cache)
    try:
        await controllers.run_once(full=True)
        await _until(lambda: set(cache.objects.get("NodeSLO", {})) == {"n1", "n2"})
        assert cache.objects["NodeSLO"]["n2"]["metadata"]["ownerReferences"][0]["kind"] == "Node"
        (tmp_path / "nodes.yaml").write_text(_node("n1"))
        await _until(lambda: "n2" not in cache.nodes)
        await controllers.run_once()
        await _until(lambda: set(cache.objects.get("NodeSLO", {})) == {"n1"})
        # a NodeSLO whose node never existed goes at the next full resync
        await source.create_or_update({"kind": "NodeSLO", "metadata": {"name": "ghost"}, "spec": {}})
        await _until(lambda: "ghost" in cache.objects["NodeSLO"])
        controllers.dirty.clear()
        await controllers.run_once(full=True)
        await _until(lambda: set(cache.objects.get("NodeSLO", {})) == {"n1"})
    finally:
        await source.stop()


class _GCSource(FileSource):
    """A file source claiming owner garbage collection, recording deletes."""

    owner_gc = True

    def __init__(self, path: Path, refuse: int = 0) -> None:
        super().__init__(path, poll_interval=0, restamp_interval=0)
        self.deleted: list[str] = []
        self.refuse = refuse

    async def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        self.deleted.append(name)
        if self.refuse:
            raise error_from_response(self.refuse, {"message": "refused"})
        await super().delete(kind, name, namespace=namespace)


async def test_owned_nodeslo_is_left_to_the_garbage_collector(tmp_path: Path) -> None:
    owned = {"kind": "NodeSLO", "metadata": {"name": "gone", "ownerReferences": [{"kind": "Node", "name": "gone"}]}}
    (tmp_path / "x.yaml").write_text(_node("n1"))
    source = _GCSource(tmp_path)
    cache = ClusterCache()
    controllers = SLOControllers(cache, source)
    await source.start(cache)
    await source.create_or_update(owned)
    await source.create_or_update({"kind": "NodeSLO", "metadata": {"name": "orphan"}, "spec": {}})
    await asyncio.sleep(0)
    assert await controllers.delete_orphan_nodeslo("gone") is False
    assert await controllers.delete_orphan_nodeslo("orphan") is True
    assert await controllers.delete_orphan_nodeslo("never") is False
    assert source.deleted == ["orphan"]


async def test_failed_delete_keeps_the_node_dirty_and_404_counts_as_done(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(_node("n1"))
    for status, dirty in ((500, {"orphan"}), (404, set())):
        source = _GCSource(tmp_path, refuse=status)
        cache = ClusterCache()
        controllers = SLOControllers(cache, source)
        await source.start(cache)
        await source.create_or_update({"kind": "NodeSLO", "metadata": {"name": "orphan"}, "spec": {}})
        await asyncio.sleep(0)
        controllers.config_changed = False
        controllers.dirty = set()
        await controllers.reconcile({"orphan"})
        assert source.deleted == ["orphan"]
        assert controllers.dirty == dirty
