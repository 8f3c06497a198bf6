"""The PodGroup status controller: upstream's phase machine step by step, and over real HTTP the phases a
PodGroup goes through as its members are created, bound, run and finish (merge patches through the source)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import httpx

from app.cache.snapshot import ClusterCache
from app.framework.handle import Handle
from app.plugins.coscheduling.plugin import new_coscheduling
from app.plugins.coscheduling.status import STATUS_SYNC_INTERVAL, settle, status_patch, step
from app.sources.files import FileSource
from app.sources.kubernetes import KubernetesSource
from tests.conftest import LiveServer
from tests.plugins.gangkit import bind, node, pod, pod_group, write
from tests.sources.test_kubernetes_source import write_kubeconfig
from tests.sources.test_source_writes import _Recorder

NOW = 1_800_000_000.0


def _pods(*phases: str | None) -> list[dict[str, Any]]:
    return [pod(f"p-{i}", group="g", phase=ph) for i, ph in enumerate(phases)]


def test_each_step_is_upstreams() -> None:
    assert step({}, 2, [], 0, NOW) == {"phase": "Pending"}
    assert step({"phase": "Pending"}, 2, _pods(None), 0, NOW) == {"phase": "Pending"}  # not enough pods
    assert step({"phase": "Pending"}, 0, _pods(None), 0, NOW) == {"phase": "Pending"}  # minMember 0 never moves
    pre = step({"phase": "Pending"}, 2, _pods(None, None), 0, NOW)
    assert pre == {"phase": "PreScheduling", "occupiedBy": "default/job-g"}
    sched = step(pre, 2, _pods(None, None), 1, NOW)
    assert sched["phase"] == "Scheduling" and sched["scheduled"] == 1
    assert sched["scheduleStartTime"] == "2027-01-15T08:00:00Z"
    later = step(sched, 2, _pods(None, None), 1, NOW + 60)
    assert later["scheduleStartTime"] == sched["scheduleStartTime"]  # set once
    assert step(sched, 2, _pods(None, None), 2, NOW)["phase"] == "Scheduled"
    assert step(sched, 2, _pods("Running", "Running"), 2, NOW)["phase"] == "Running"
    assert step(sched, 2, _pods("Running", "Pending"), 2, NOW)["phase"] == "Scheduled"
    assert step(sched, 2, _pods("Running", "Failed"), 2, NOW)["phase"] == "Failed"
    assert step(sched, 2, _pods("Succeeded", "Succeeded"), 2, NOW)["phase"] == "Finished"
    assert step(sched, 2, [], 2, NOW)["phase"] == "Pending"  # every pod gone


def test_settle_reaches_what_upstreams_successive_syncs_reach_and_drops_zero_counts() -> None:
    assert settle({}, 2, _pods(None, None), 0, NOW) == {
        "phase": "Scheduling",
        "occupiedBy": "default/job-g",
        "scheduleStartTime": "2027-01-15T08:00:00Z",
    }
    old = {"phase": "Running", "running": 2, "scheduled": 2, "occupiedBy": "default/job-g"}
    new = settle(old, 2, _pods("Succeeded", "Succeeded"), 2, NOW)
    assert new == {"phase": "Finished", "succeeded": 2, "scheduled": 2, "occupiedBy": "default/job-g"}
    assert status_patch(old, new) == {"status": {"phase": "Finished", "succeeded": 2, "running": None}}
    assert status_patch(new, new) is None


def _status(source: FileSource) -> dict[str, Any]:
    return dict(source._objects["PodGroup"]["default/job"].get("status") or {})


def _wait_phase(source: FileSource, phase: str, timeout: float = 8.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = _status(source)
        if status.get("phase") == phase:
            return status
        time.sleep(0.1)
    raise AssertionError(f"PodGroup phase is {_status(source).get('phase')!r}, expected {phase}")


def test_podgroup_status_follows_its_gang_over_http(tmp_path: Path) -> None:
    members = [pod(f"job-{i}", group="job") for i in range(2)]
    group = pod_group("job", 2, 30)
    source = FileSource(write(tmp_path, [node("n1"), group, members[0]]), poll_interval=0.1)
    with LiveServer(source) as srv:
        assert _wait_phase(source, "Pending") == {"phase": "Pending"}  # one pod of two
        write(tmp_path, [node("n1"), group, *members])
        status = _wait_phase(source, "Scheduling")  # PreScheduling, then Scheduling: nothing bound yet
        assert status["occupiedBy"] == "default/job-job" and status["scheduleStartTime"]
        assert "scheduled" not in status

        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as client:
                return list(await asyncio.gather(*(bind(client, m, "n1") for m in members)))

        assert asyncio.run(run()) == ["", ""]
        assert _wait_phase(source, "Scheduled")["scheduled"] == 2
        running = [{**m, "status": {"phase": "Running"}} for m in members]
        write(tmp_path, [node("n1"), group, *running])
        assert _wait_phase(source, "Running")["running"] == 2
        done = [{**m, "status": {"phase": "Succeeded"}} for m in members]
        write(tmp_path, [node("n1"), group, *done])
        final = _wait_phase(source, "Finished")
        assert final["succeeded"] == 2 and "running" not in final


async def _round(leading: bool, tmp_path: Path, recorder: _Recorder) -> list[tuple[str, str, str, Any]]:
    """Run the plugin's background loop for one status round against a recording API server."""
    cache = ClusterCache()
    client = KubernetesSource((), kubeconfig=write_kubeconfig(tmp_path, recorder.port))
    handle = Handle(cache, client=client, leading=lambda: leading)
    plugin = new_coscheduling({}, handle)
    cache.replace("Node", [node("n1")])
    cache.replace("PodGroup", [pod_group("job", 2)])
    cache.replace("Pod", [pod(f"job-{i}", group="job") for i in range(2)])
    task = asyncio.create_task(plugin.run_background())
    try:
        await asyncio.sleep(STATUS_SYNC_INTERVAL + 0.5)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.stop()
    return recorder.calls


async def test_the_status_is_merge_patched_on_the_podgroup_by_the_leader_only(tmp_path: Path) -> None:
    recorder = _Recorder()
    try:
        assert await _round(False, tmp_path, recorder) == []  # a standby replica writes nothing
        calls = await _round(True, tmp_path, recorder)
    finally:
        recorder.server.shutdown()
        recorder.server.server_close()
    assert len(calls) == 1
    method, path, content_type, body = calls[0]
    assert (method, path, content_type) == (
        "PATCH",
        "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/podgroups/job",
        "application/merge-patch+json",
    )
    assert body["status"]["phase"] == "Scheduling" and body["status"]["occupiedBy"] == "default/job-job"
