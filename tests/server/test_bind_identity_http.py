"""``/bind`` over real HTTP binds only a pod the source reported, matched by uid, namespace and name (issue 28).

A pod kube-scheduler only sent to ``/filter`` is not a pod: before the fix a bind naming any PodName with
the uid of a filtered pod answered ``Error: ""`` and, in file mode, added the filtered pod to the cluster.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.sources.files import FileSource
from tests.conftest import LiveServer, filter_body


def _node(name: str) -> dict[str, Any]:
    res = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": res}}


def _pod(name: str, uid: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }


@pytest.fixture
def srv(tmp_path: Path) -> Any:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([_node("n1"), _pod("web", "uid-web")]))
    with LiveServer(FileSource(tmp_path, poll_interval=0.05)) as server:
        yield server


def _bind(srv: LiveServer, name: str, uid: str, namespace: str = "default") -> str:
    r = srv.client.post("/bind", json={"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": "n1"})
    assert r.status_code == 200, r.text
    error: str = r.json()["Error"]
    return error


def _pods_on_n1(srv: LiveServer) -> list[str]:
    r = srv.client.get("/apis/v1/nodes/n1")
    assert r.status_code == 200
    return sorted(p if isinstance(p, str) else f"{p['namespace']}/{p['name']}" for p in r.json()["pods"])


def _cached_pods(srv: LiveServer) -> set[str]:
    return {p.key for p in srv.service.cache.pods.values()}


@pytest.mark.parametrize(
    ("name", "namespace", "uid", "error"),
    [
        # the case: the uid of a filtered, never listed pod under another name
        ("other", "default", "uid-ghost", 'pods "other" not found'),
        # the filtered pod itself: filtered is not listed
        ("ghost", "default", "uid-ghost", 'pods "ghost" not found'),
        # a listed pod's uid under another name, or in another namespace
        ("other", "default", "uid-web", "pod uid uid-web is pod default/web, not default/other"),
        ("web", "kube-system", "uid-web", "pod uid uid-web is pod default/web, not kube-system/web"),
        # a listed pod's name with another uid (recreated, or a forged uid)
        ("web", "default", "uid-ghost", "pod default/web has uid uid-web, not uid-ghost"),
    ],
    ids=["filtered-uid-other-name", "filtered-never-listed", "uid-other-name", "uid-other-namespace", "name-other-uid"],
)
def test_a_bind_that_does_not_match_a_reported_pod_is_refused_and_writes_nothing(
    srv: LiveServer, name: str, namespace: str, uid: str, error: str
) -> None:
    ghost = _pod("ghost", "uid-ghost")
    web = _pod("web", "uid-web")
    for pod in (ghost, web):
        r = srv.client.post("/filter", json=filter_body(pod, ["n1"]))
        assert r.status_code == 200 and r.json()["NodeNames"] == ["n1"], r.text
    assert _bind(srv, name, uid, namespace) == error
    time.sleep(0.3)  # a binding would reach the cache on the next loop turn; a file reload on the next poll
    assert _pods_on_n1(srv) == []
    assert _cached_pods(srv) == {"default/web"}  # no pod added to the cluster
    assert srv.service.cache.pods["uid-web"].node_name == ""
    assert not srv.service.cache.assumed
    # the pod the source reported still binds, under its own name and uid
    assert _bind(srv, "web", "uid-web") == ""
    deadline = time.monotonic() + 5
    while srv.service.cache.pods["uid-web"].node_name != "n1" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.service.cache.pods["uid-web"].node_name == "n1"
    assert _cached_pods(srv) == {"default/web"}


def test_a_filtered_pod_appears_only_once_the_source_reports_it(srv: LiveServer, tmp_path: Path) -> None:
    late = _pod("late", "uid-late")
    assert srv.client.post("/filter", json=filter_body(late, ["n1"])).json()["NodeNames"] == ["n1"]
    assert _bind(srv, "late", "uid-late") == 'pods "late" not found'
    (tmp_path / "late.yaml").write_text(yaml.safe_dump(late))  # now the source reports it
    deadline = time.monotonic() + 5
    while "uid-late" not in srv.service.cache.pods and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _bind(srv, "late", "uid-late") == ""


async def test_the_file_source_never_adds_a_pod_at_bind(tmp_path: Path) -> None:
    """FileSource.bind itself: an unknown pod is NotFound even with its object; a uid other than the held pod's is a
    Conflict (the API server's uid precondition); neither leaves anything behind."""
    from app.client.errors import Conflict, NotFound
    from app.sources.events import Event

    class Sink:
        def __init__(self) -> None:
            self.events: list[Event] = []

        def replace(self, kind: str, objs: Any) -> None:
            pass

        def apply(self, event: Event) -> None:
            self.events.append(event)

    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([_node("n1"), _pod("web", "uid-web")]))
    src = FileSource(tmp_path, poll_interval=0, restamp_interval=0)
    sink = Sink()
    await src.start(sink)  # type: ignore[arg-type]
    try:
        with pytest.raises(NotFound, match='pods "ghost" not found'):
            await src.bind("default", "ghost", "uid-ghost", "n1")
        with pytest.raises(Conflict, match="UID in precondition: uid-ghost, UID in object meta: uid-web"):
            await src.bind("default", "web", "uid-ghost", "n1")
        assert set(src._objects["Pod"]) == {"default/web"}
        assert not src._bindings
        await src.bind("default", "web", "uid-web", "n1")
        assert src._objects["Pod"]["default/web"]["spec"]["nodeName"] == "n1"
    finally:
        await src.stop()
