"""ElasticQuota status write-back (upstream's quota controller): the patch, its format, and the loop."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.api import elasticquota as n
from app.client.errors import Conflict
from app.plugins.elasticquota.args import ElasticQuotaArgs
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.statuswriter import BadAnnotation, StatusWriter, same_definition, status_patch
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.elasticquota.fixtures import node, pod, quota

MAX = {"cpu": "10", "memory": "64Gi"}


def _objects() -> list[dict[str, Any]]:
    return [
        node("n1", "10"),
        quota("team-a", {"cpu": "4"}, MAX),
        quota("team-b", {"cpu": "6"}, MAX),
        pod("a-run-1", "3", namespace="team-a", quota_name="team-a", node="n1"),
        pod("a-pending", "2", namespace="team-a", quota_name="team-a"),
    ]


def _manager() -> QuotaManager:
    from app.cache.podinfo import parse_pod

    mgr = QuotaManager(ElasticQuotaArgs())
    for obj in _objects():
        if obj["kind"] == "ElasticQuota":
            mgr.set_quota_object(obj["metadata"]["name"], obj)
        elif obj["kind"] == "Node":
            mgr.set_node("n1", {"cpu": 10_000, "memory": 64 << 30})
    mgr.ensure()
    for obj in _objects():
        if obj["kind"] == "Pod":
            info = parse_pod(obj)
            mgr.set_pod(info.uid, info)
    mgr.refresh_all()
    return mgr


def test_patch_carries_upstream_annotations_and_status_used_then_nothing() -> None:
    mgr = _manager()
    obj = mgr.objects["team-a"]
    patch = status_patch(obj, mgr.quotas["team-a"])
    assert patch is not None
    ann = patch["metadata"]["annotations"]
    # ResourceList JSON as Go marshals it: compact, keys sorted, quantity strings; only what is non-empty
    assert ann[n.ANNOTATION_REQUEST] == '{"cpu":"5"}'
    assert json.loads(ann[n.ANNOTATION_RUNTIME])["cpu"] == "5"
    assert ann[n.ANNOTATION_CHILD_REQUEST] == '{"cpu":"5"}'  # a leaf: its pods' request
    # non-preemptible request/used, guaranteed and allocated are empty: not written
    assert set(ann) == {n.ANNOTATION_RUNTIME, n.ANNOTATION_REQUEST, n.ANNOTATION_CHILD_REQUEST}
    assert patch["status"] == {"used": {"cpu": "3"}}
    updated = {**obj, "metadata": {**obj["metadata"], "annotations": {**obj["metadata"]["annotations"], **ann}}}
    updated["status"] = patch["status"]
    assert status_patch(updated, mgr.quotas["team-a"]) is None  # applied: nothing left to write
    assert same_definition(obj, updated)  # the tree need not be rebuilt for it


def test_zero_quantities_compare_equal_and_stale_values_are_cleared() -> None:
    mgr = _manager()
    info = mgr.quotas["team-b"]  # no pods: request, runtime-free, used all empty
    obj = json.loads(json.dumps(mgr.objects["team-b"]))
    obj["metadata"]["annotations"][n.ANNOTATION_NON_PREEMPTIBLE_USED] = '{"cpu":"0"}'
    obj["status"] = {"used": {"memory": "0"}}
    patch = status_patch(obj, info) or {}
    assert n.ANNOTATION_NON_PREEMPTIBLE_USED not in patch.get("metadata", {}).get("annotations", {})
    assert "status" not in patch
    obj["metadata"]["annotations"][n.ANNOTATION_ALLOCATED] = '{"cpu":"2"}'  # stale: written back empty
    assert (status_patch(obj, info) or {})["metadata"]["annotations"][n.ANNOTATION_ALLOCATED] == "{}"


def test_bad_annotation_skips_the_quota() -> None:
    mgr = _manager()
    obj = json.loads(json.dumps(mgr.objects["team-a"]))
    obj["metadata"]["annotations"][n.ANNOTATION_RUNTIME] = "not json"
    with pytest.raises(BadAnnotation, match=r"annotation quota\.scheduling\.koordinator\.sh/runtime"):
        status_patch(obj, mgr.quotas["team-a"])
    obj["metadata"]["annotations"][n.ANNOTATION_RUNTIME] = '{"cpu":"lots"}'
    with pytest.raises(BadAnnotation, match="invalid quantity"):
        status_patch(obj, mgr.quotas["team-a"])


class _RecordingSource:
    def __init__(self, fail: str = "") -> None:
        self.patches: list[tuple[str, str, dict[str, Any], str | None]] = []
        self.fail = fail

    async def patch(self, kind: str, name: str, patch: dict[str, Any], *, namespace: str | None = None) -> None:
        if name == self.fail:
            raise Conflict("conflict")
        self.patches.append((kind, name, patch, namespace))


def test_one_round_patches_changed_quotas_and_survives_a_refused_patch() -> None:
    mgr = _manager()
    source = _RecordingSource(fail="team-a")
    assert asyncio.run(StatusWriter(mgr).sync_once(source)) == 0  # refused (logged); team-b has nothing to write
    source = _RecordingSource()
    assert asyncio.run(StatusWriter(mgr).sync_once(source)) == 1  # the next round sends it again
    assert [(k, name, ns) for k, name, _, ns in source.patches] == [("ElasticQuota", "team-a", "koordinator-system")]


def test_service_writes_the_status_back_within_two_rounds(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(_objects()))
    source = FileSource(tmp_path, poll_interval=0)
    with LiveServer(source) as srv:
        cache = srv.app.state.service.cache
        deadline = time.monotonic() + 5
        obj: dict[str, Any] = {}
        while time.monotonic() < deadline:
            obj = cache.objects.get("ElasticQuota", {}).get("koordinator-system/team-a") or {}
            if (obj.get("status") or {}).get("used"):
                break
            time.sleep(0.1)
        assert obj["status"]["used"] == {"cpu": "3"}
        assert obj["metadata"]["annotations"][n.ANNOTATION_REQUEST] == '{"cpu":"5"}'
        # the written fields do not change the tree: the REST view still answers the same runtime
        assert srv.client.get("/apis/v1/plugins/ElasticQuota/quota/team-a").json()["used"] == {"cpu": "3"}


def test_writer_skips_quotas_already_in_agreement(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.plugins.elasticquota import statuswriter
    from app.sources.mergepatch import apply_merge_patch

    mgr = _manager()

    class Applier:
        async def patch(self, kind: str, name: str, patch: dict[str, Any], *, namespace: str | None = None) -> None:
            mgr.objects[name] = apply_merge_patch(mgr.objects[name], patch)

    writer = statuswriter.StatusWriter(mgr)
    assert asyncio.run(writer.sync_once(Applier())) == 1
    assert asyncio.run(writer.sync_once(Applier())) == 0  # compares the written object once

    def boom(obj: dict[str, Any], info: Any) -> None:
        raise AssertionError("compared again")

    monkeypatch.setattr(statuswriter, "status_patch", boom)
    assert asyncio.run(writer.sync_once(Applier())) == 0  # nothing changed: nothing parsed
    mgr.objects["team-a"] = dict(mgr.objects["team-a"])  # a new version of the object is compared again
    with pytest.raises(AssertionError, match="compared again"):
        asyncio.run(writer.sync_once(Applier()))
