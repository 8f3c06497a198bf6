"""DeviceShare's annotation write lands before the Binding (upstream's PreBind order), and a failed
write aborts the binding and releases the GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.client.errors import ServerTimeout
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.test_deviceshare import ANN, CORE, RATIO, _config, device, node, pod


class RecordingSource(FileSource):
    """A file source recording the order of writes; ``fail_patch`` makes pod patches fail with 500."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, poll_interval=0)
        self.calls: list[str] = []
        self.fail_patch = False

    async def patch(self, kind: str, name: str, patch: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.calls.append(f"patch {kind}/{name}")
        if self.fail_patch:
            raise ServerTimeout("etcdserver: request timed out")
        return await super().patch(kind, name, patch, **kw)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append(f"bind {name}")
        await super().bind(namespace, name, uid, node)


def _cluster(tmp: Path) -> Path:
    objs = [node("gpu-a", 2), device("gpu-a", 2), pod("share", {CORE: "50", RATIO: "50"})]
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


def _bind(srv: LiveServer) -> dict[str, Any]:
    body = {"PodName": "share", "PodNamespace": "default", "PodUID": "uid-share", "Node": "gpu-a"}
    result: dict[str, Any] = srv.client.post("/bind", json=body).json()
    return result


def test_annotation_is_written_before_the_binding(tmp_path: Path) -> None:
    source = RecordingSource(_cluster(tmp_path))
    with LiveServer(source, _config()) as srv:
        assert _bind(srv) == {"Error": ""}
        assert source.calls == ["patch Pod/share", "bind share"]
        assert ANN in source._objects["Pod"]["default/share"]["metadata"]["annotations"]


def test_failed_annotation_write_aborts_the_binding_and_frees_the_gpus(tmp_path: Path) -> None:
    source = RecordingSource(_cluster(tmp_path))
    source.fail_patch = True
    with LiveServer(source, _config()) as srv:
        answer = _bind(srv)
        # upstream's wording for a failing PreBind plugin
        assert answer["Error"] == 'running PreBind plugin "DeviceShare": etcdserver: request timed out'
        assert source.calls == ["patch Pod/share"]  # no Binding was written
        summary = srv.client.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/gpu-a").json()
        assert summary["allocateSet"] in ({}, {"gpu": {}})
        assert srv.service.cache.find_pod("uid-share").node_name == ""
