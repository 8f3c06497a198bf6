"""A loop of the service cannot stop unseen (issue 28): each long-running loop gets a failure injected, and over
real HTTP the failure is counted (``koord_source_loop_errors_total{loop}``), the loop is reported down while it waits
to restart (``/readyz`` 503 naming it, ``koord_source_loop_running{loop} 0``), and it runs again after the backoff.

Before the fix the first exception ended the loop's task for good while ``/readyz`` answered 200; the file poll died
on one non-UTF-8 byte and ignored every later change.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.manager import run_embedded_controllers
from app.sources.files import FileSource
from app.sources.leaderlease import LeaseFollower
from tests.conftest import LiveServer

BACKOFF = 2.5  # seconds a failed loop waits before its restart here: long enough to see it down on a busy machine


def _node(name: str) -> dict[str, Any]:
    res = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": res}}


def _quota() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "namespace": "default"},
        "spec": {"min": {"cpu": "1", "memory": "1Gi"}, "max": {"cpu": "4", "memory": "4Gi"}},
    }


def _wait(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _metric(srv: LiveServer, name: str, loop: str) -> float | None:
    text = srv.client.get("/metrics").text
    found = re.search(rf'^{name}\{{loop="{re.escape(loop)}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


def fail_once(monkeypatch: pytest.MonkeyPatch, owner: Any, attr: str) -> list[int]:
    """Make ``owner.attr`` (a method or function, sync or async) raise RuntimeError on its next call, then behave.
    Returns a one-item list counting the calls since."""
    original = getattr(owner, attr)
    calls = [0]

    def boom() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError(f"injected failure in {attr}")

    if asyncio.iscoroutinefunction(original):

        async def faulty_async(*args: Any, **kwargs: Any) -> Any:
            boom()
            return await original(*args, **kwargs)

        monkeypatch.setattr(owner, attr, faulty_async)
    else:

        def faulty(*args: Any, **kwargs: Any) -> Any:
            boom()
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, attr, faulty)
    return calls


class _LeaseReader:
    """A Lease reader for the follower (no API server): the Lease of our kube-scheduler, renewed now."""

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        return {"spec": {"holderIdentity": "me_1", "renewTime": now, "leaseDurationSeconds": 15}}


def _arm(loop: str, srv: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inject one failure into ``loop`` of the running service, where that loop calls into its work."""
    service = srv.service
    if loop == "file-poll":
        fail_once(monkeypatch, service.source.files, "changed")
    elif loop == "file-restamp":
        import app.sources.files as files

        fail_once(monkeypatch, files, "format_time")
    elif loop == "assumed-pod-expiry":
        fail_once(monkeypatch, service.cache, "cleanup_expired")
    elif loop == "leader-lease":
        fail_once(monkeypatch, _LeaseReader, "get")
    elif loop == "plugin-ElasticQuota":
        from app.plugins.elasticquota.statuswriter import StatusWriter

        fail_once(monkeypatch, StatusWriter, "sync_once")
    elif loop == "plugin-Coscheduling":
        from app.plugins.coscheduling.status import StatusController

        fail_once(monkeypatch, StatusController, "sync_once")
    elif loop == "plugin-Reservation":
        from app.plugins.reservation.plugin import Reservation

        fail_once(monkeypatch, Reservation, "place_pending")
    elif loop == "slo-controllers":
        from app.manager.controllers import SLOControllers

        fail_once(monkeypatch, SLOControllers, "run_once")
    else:
        raise AssertionError(loop)


LOOPS = [
    "file-poll",
    "file-restamp",
    "assumed-pod-expiry",
    "leader-lease",
    "plugin-ElasticQuota",
    "plugin-Coscheduling",
    "plugin-Reservation",
    "slo-controllers",
]


@pytest.mark.parametrize("loop", LOOPS)
def test_a_failing_loop_is_counted_reported_and_restarted(
    loop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([_node("n1"), _quota()]))
    source = FileSource(tmp_path, poll_interval=0.05, restamp_interval=0.05)
    leader = LeaseFollower(_LeaseReader(), "kube-system", "kube-scheduler", "me", poll_seconds=0.05)
    with LiveServer(source, background=[run_embedded_controllers], leader=leader) as srv:
        loops = srv.service.loops
        _wait(lambda: loop in loops.loops and loops.loops[loop].running, f"{loop} to run")
        assert srv.client.get("/readyz").status_code == 200
        assert _metric(srv, "koord_source_loop_running", loop) == 1
        assert _metric(srv, "koord_source_loop_errors_total", loop) == 0
        loops.backoff_initial = BACKOFF
        _arm(loop, srv, monkeypatch)
        _wait(lambda: loops.errors[loop] == 1, f"the failure of {loop}")
        ready = srv.client.get("/readyz")  # down until the backoff ends
        assert ready.status_code == 503, ready.text
        body = ready.json()
        assert body["status"] == "not ready"
        assert loop in body["loops"] and "RuntimeError: injected failure" in body["loops"][loop], body
        assert f"{loop} (RuntimeError: injected failure" in body["reason"]
        assert _metric(srv, "koord_source_loop_running", loop) == 0
        assert _metric(srv, "koord_source_loop_errors_total", loop) == 1
        _wait(lambda: srv.client.get("/readyz").status_code == 200, f"{loop} to be restarted", timeout=BACKOFF * 5)
        assert _metric(srv, "koord_source_loop_running", loop) == 1
        assert loops.loops[loop].restarts == 1
        assert _metric(srv, "koord_source_loop_errors_total", loop) == 1  # it ran on without failing again
        if loop == "file-poll":  # later changes still flow
            (tmp_path / "more.yaml").write_text(yaml.safe_dump(_node("n2")))
            _wait(lambda: srv.client.get("/apis/v1/nodes/n2").status_code == 200, "n2 from the restarted poll")


def test_one_non_utf8_byte_does_not_stop_the_file_poll(tmp_path: Path) -> None:
    """A cluster file turning non-UTF-8 is reported (logged once, counted as a malformed read) and keeps its last
    good objects; the other files keep flowing, and fixing it is picked up."""
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(_node("n1")))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(_node("n2")))
    with LiveServer(FileSource(tmp_path, poll_interval=0.05)) as srv:
        source = srv.service.source
        (tmp_path / "b.yaml").write_bytes(b'apiVersion: v1\nkind: Node\nmetadata: {name: n2, labels: {x: "\xff"}}\n')
        _wait(lambda: source.files.read_errors == 1, "the bad read to be counted")
        text = srv.client.get("/metrics").text
        assert 'koord_source_file_bad_reads_total{reason="malformed"} 1.0' in text
        assert srv.client.get("/apis/v1/nodes/n2").status_code == 200  # its last good objects stay
        assert srv.client.get("/readyz").status_code == 200
        assert _metric(srv, "koord_source_loop_running", "file-poll") == 1
        (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([_node("n1"), _node("n3")]))
        _wait(lambda: srv.client.get("/apis/v1/nodes/n3").status_code == 200, "a later change of another file")
        (tmp_path / "b.yaml").write_text(yaml.safe_dump(_node("n4")))
        _wait(lambda: srv.client.get("/apis/v1/nodes/n4").status_code == 200, "the fixed file")
        assert srv.client.get("/apis/v1/nodes/n2").status_code == 404
        assert _metric(srv, "koord_source_loop_errors_total", "file-poll") == 0


def test_the_bad_file_is_named_with_its_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(_node("n1")))
    with LiveServer(FileSource(tmp_path, poll_interval=0.05)) as srv:
        (tmp_path / "b.yaml").write_bytes(b"apiVersion: v1\nkind: Node\nmetadata:\n  name: \xfe\n")
        _wait(lambda: srv.service.source.files.read_errors == 1, "the bad read")
    messages = [r.getMessage() for r in caplog.records if "b.yaml" in r.getMessage()]
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"{tmp_path / 'b.yaml'}:4: not UTF-8: byte 0xfe at offset 44 (invalid start byte); ")


def test_a_failing_reflector_is_counted_and_relists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The list/watch reflector of Pods raises on a watch event (a bug, not an API error): the supervisor counts it,
    and the reflector runs again from a LIST, which brings the pod the failed event carried."""
    from app.sources import kubernetes
    from app.sources.kubernetes import KubernetesSource
    from tests.client.fake_apiserver import FakeAPIServer, WatchScript

    fake = FakeAPIServer()
    try:
        fake.seed("/api/v1/nodes", _node("n1"))
        late = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": "default"}, "spec": {}}
        fake.seed("/api/v1/pods", late)
        added = {"type": "ADDED", "object": fake.store["/api/v1/pods"]["late"]}
        fake.watch_scripts["/api/v1/pods"].append(WatchScript(lines=[added], end="hold"))
        original = kubernetes._Reflector.handle
        failed: list[str] = []

        def handle(self: Any, event: Any) -> None:
            if self.kind == "Pod" and not failed:
                failed.append(self.kind)
                raise RuntimeError("injected failure in the Pod reflector")
            original(self, event)

        monkeypatch.setattr(kubernetes._Reflector, "handle", handle)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": fake.url}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        source = KubernetesSource(("Node", "Pod"), kubeconfig=str(kubeconfig), backoff_initial=0.1)
        with LiveServer(source) as srv:
            _wait(lambda: srv.service.loops.errors["reflector-Pod"] == 1, "the reflector's failure")
            _wait(lambda: srv.client.get("/readyz").status_code == 200, "the reflector to run again")
            assert _metric(srv, "koord_source_loop_errors_total", "reflector-Pod") == 1
            assert _metric(srv, "koord_source_loop_running", "reflector-Pod") == 1
            assert _metric(srv, "koord_source_loop_errors_total", "reflector-Node") == 0
            lists = [
                c
                for c in fake.calls("GET")
                if c.path.split("?")[0] == "/api/v1/pods" and c.query.get("watch") != "true"
            ]
            assert len(lists) == 2  # the restart listed again
            _wait(lambda: any(p.name == "late" for p in srv.service.cache.pods.values()), "the pod from the relist")
    finally:
        fake.close()
