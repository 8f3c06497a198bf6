"""Gang members ``/filter`` refused while their gang was incomplete are retried once it is complete (issue 28):
the service, on the Kubernetes source against the fake API server over the real client, merge-patches
``gang.scheduling.koordinator.sh/gang-state`` on each refused member, which moves it from kube-scheduler's
unschedulable queue to the active queue. Only the leader writes; the writes are rate-limited."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.api import coscheduling as n
from app.api.timeparse import parse_time
from app.plugins.coscheduling.retry import TokenBucket
from app.sources.kubernetes import KubernetesSource
from tests.client.fake_apiserver import FakeAPIServer, wait_until
from tests.conftest import LiveServer
from tests.plugins.gangkit import filter_verdict, node, pod, pod_group

PODS = "/api/v1/pods"
NS_PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
GROUPS = "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups"
NS_GROUPS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/podgroups"


class _Follower:
    """A lease follower that never leads (a standby replica)."""

    def leading(self) -> bool:
        return False

    async def run(self) -> None:
        await asyncio.Event().wait()


def _kubeconfig(tmp: Path, url: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
        "current-context": "fake",
    }
    path = tmp / "kubeconfig"
    path.write_text(json.dumps(config))
    return str(path)


def _seed_pods(fake: FakeAPIServer, *objs: dict[str, Any]) -> None:
    """Pods in the cluster-wide list (the reflector's) and the namespaced collection (the patches')."""
    fake.seed(PODS, *objs)
    fake.seed(NS_PODS, *objs)


def _seed_groups(fake: FakeAPIServer, *objs: dict[str, Any]) -> None:
    """PodGroups in the cluster-wide list and the namespaced collection (the status controller's patches)."""
    fake.seed(GROUPS, *objs)
    fake.seed(NS_GROUPS, *objs)


def _add_pod(fake: FakeAPIServer, obj: dict[str, Any]) -> None:
    """A pod created after the service listed: stored for patches, streamed to the held pod watch."""
    fake.seed(NS_PODS, obj)
    fake.publish(PODS, "ADDED", obj)


@contextmanager
def _service(fake: FakeAPIServer, tmp: Path, **app_kwargs: Any) -> Iterator[LiveServer]:
    source = KubernetesSource(("Node", "Pod", "PodGroup"), kubeconfig=_kubeconfig(tmp, fake.url), backoff_initial=0.1)
    with LiveServer(source, **app_kwargs) as srv:
        yield srv


def _retry_patches(fake: FakeAPIServer) -> dict[str, dict[str, Any]]:
    """Pod name -> the gang-state annotation value of every merge patch that wrote one."""
    out = {}
    for call in fake.calls("PATCH"):
        path = call.path.split("?")[0]
        annotations = ((call.body or {}).get("metadata") or {}).get("annotations") or {}
        if path.startswith(NS_PODS + "/") and n.ANNOTATION_GANG_STATE in annotations:
            assert call.headers["content-type"] == "application/merge-patch+json"
            out[path.rsplit("/", 1)[1]] = json.loads(annotations[n.ANNOTATION_GANG_STATE])
    return out


def _refused(srv: LiveServer, obj: dict[str, Any]) -> str:
    reason: str = filter_verdict(srv.client, obj, ["n1"])["FailedAndUnresolvableNodes"]["n1"]
    return reason


def test_refused_members_are_patched_when_the_last_child_arrives(tmp_path: Path) -> None:
    members = [pod(f"t-{i}", group="train") for i in range(3)]
    fake = FakeAPIServer()
    try:
        fake.seed(NODES, node("n1"))
        _seed_groups(fake, pod_group("train", 3, 5))
        _seed_pods(fake, *members[:2])
        with _service(fake, tmp_path) as srv:
            before = time.time()
            assert "child pod not collect enough" in _refused(srv, members[0])
            assert "child pod not collect enough" in _refused(srv, members[1])
            time.sleep(0.3)
            assert _retry_patches(fake) == {}  # nothing is retried while the gang is incomplete
            _add_pod(fake, members[2])
            wait_until(lambda: set(_retry_patches(fake)) == {"t-0", "t-1"}, timeout=5)
            # the member that completed the gang was never refused: not patched
            time.sleep(0.3)
            patches = _retry_patches(fake)
            assert set(patches) == {"t-0", "t-1"}
            for value in patches.values():
                assert set(value) == {"gang", "children", "minMember", "completeAt"}
                assert (value["gang"], value["children"], value["minMember"]) == ("default/train", 3, 3)
                assert before - 1 <= parse_time(value["completeAt"].split(".")[0] + "Z") <= time.time() + 1
            # the patched pods' annotation is on the server: kube-scheduler sees an update of each
            stored = fake.store[NS_PODS]["t-0"]["metadata"]["annotations"]
            assert json.loads(stored[n.ANNOTATION_GANG_STATE]) == patches["t-0"]
            # and the members now pass (kube-scheduler's retry)
            assert filter_verdict(srv.client, members[0], ["n1"])["NodeNames"] == ["n1"]
    finally:
        fake.close()


def test_refused_members_are_patched_when_their_podgroup_appears(tmp_path: Path) -> None:
    members = [pod(f"p-{i}", group="late") for i in range(2)]
    fake = FakeAPIServer()
    try:
        fake.seed(NODES, node("n1"))
        _seed_pods(fake, *members)
        with _service(fake, tmp_path) as srv:
            assert _refused(srv, members[0]) == "gang has not init, gangName: default/late, podName: default/p-0"
            fake.publish(GROUPS, "ADDED", pod_group("late", 2, 5))
            wait_until(lambda: set(_retry_patches(fake)) == {"p-0"}, timeout=5)
            assert _retry_patches(fake)["p-0"]["minMember"] == 2
    finally:
        fake.close()


def test_a_standby_replica_does_not_patch(tmp_path: Path) -> None:
    members = [pod(f"s-{i}", group="standby") for i in range(3)]
    fake = FakeAPIServer()
    try:
        fake.seed(NODES, node("n1"))
        _seed_groups(fake, pod_group("standby", 3, 5))
        _seed_pods(fake, *members[:2])
        with _service(fake, tmp_path, leader=_Follower()) as srv:
            assert "child pod not collect enough" in _refused(srv, members[0])
            _add_pod(fake, members[2])
            gangs = srv.service.framework.plugin("Coscheduling").cache
            wait_until(lambda: len(gangs.get("default/standby").children) == 3, timeout=5)
            time.sleep(0.5)
            assert _retry_patches(fake) == {}
    finally:
        fake.close()


def test_a_refused_member_bound_meanwhile_is_not_patched(tmp_path: Path) -> None:
    members = [pod(f"b-{i}", group="bound") for i in range(3)]
    fake = FakeAPIServer()
    try:
        fake.seed(NODES, node("n1"))
        _seed_groups(fake, pod_group("bound", 3, 5))
        _seed_pods(fake, *members[:2])
        with _service(fake, tmp_path) as srv:
            _refused(srv, members[0])
            _refused(srv, members[1])
            placed = json.loads(json.dumps(members[1]))
            placed["spec"]["nodeName"] = "n1"
            fake.publish(PODS, "MODIFIED", placed)  # bound by someone else
            _add_pod(fake, members[2])
            wait_until(lambda: "b-0" in _retry_patches(fake), timeout=5)
            time.sleep(0.3)
            assert set(_retry_patches(fake)) == {"b-0"}
    finally:
        fake.close()


def test_token_bucket_allows_a_burst_then_paces_at_qps() -> None:
    now = [100.0]
    bucket = TokenBucket(10.0, 3, clock=lambda: now[0])
    assert [bucket.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.delay() == pytest.approx(0.1)
    assert bucket.delay() == pytest.approx(0.2)  # queued behind the previous one
    now[0] += 10.0  # idle: refilled up to the burst only
    assert [bucket.delay() for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.1)]
    with pytest.raises(ValueError, match="qps must be > 0 and burst >= 1"):
        TokenBucket(0, 1)


def test_retries_are_rate_limited(tmp_path: Path) -> None:
    """The patches go through the plugin's token bucket: with 5/s and bursts of 2, 8 refused members take
    at least (8 - 2) / 5 s, and no second holds more than 2 + 5 of them."""
    members = [pod(f"r-{i}", group="big") for i in range(9)]
    fake = FakeAPIServer()
    try:
        fake.seed(NODES, node("n1"))
        _seed_groups(fake, pod_group("big", 9, 5))
        _seed_pods(fake, *members[:8])
        with _service(fake, tmp_path) as srv:
            srv.service.framework.plugin("Coscheduling").retry_bucket = TokenBucket(5.0, 2)
            for m in members[:8]:
                _refused(srv, m)
            _add_pod(fake, members[8])
            wait_until(lambda: len(_retry_patches(fake)) == 8, timeout=10)
        times = sorted(c.at for c in fake.calls("PATCH") if n.ANNOTATION_GANG_STATE in json.dumps(c.body))
        assert len(times) == 8
        assert times[-1] - times[0] >= 1.1
        assert all(sum(1 for t in times if start <= t < start + 1.0) <= 7 for start in times)
    finally:
        fake.close()


def test_a_gang_group_is_retried_when_its_last_gang_completes(tmp_path: Path) -> None:
    """Gangs ga (min 1) and gb (min 2) form one group: ga's member is refused while gb lacks a child, and
    is retried when gb's second member arrives (a Pod event of the *other* gang). Over the file source,
    whose merge patches land on the pods it holds."""
    from app.sources.files import FileSource
    from tests.plugins.gangkit import annotations_of, dumps, gang_pod, write

    group = dumps(["default/ga", "default/gb"])
    a0 = gang_pod("a-0", "ga", "1", groups=group)
    b0, b1 = gang_pod("b-0", "gb", "2", groups=group), gang_pod("b-1", "gb", "2", groups=group)
    source = FileSource(write(tmp_path, [node("n1"), a0, b0]), poll_interval=0.05)
    with LiveServer(source) as srv:
        assert "child pod not collect enough" in _refused(srv, a0)
        assert n.ANNOTATION_GANG_STATE not in annotations_of(source, "a-0")
        write(tmp_path, [node("n1"), a0, b0, b1])
        wait_until(lambda: n.ANNOTATION_GANG_STATE in annotations_of(source, "a-0"), timeout=10)
        state = json.loads(annotations_of(source, "a-0")[n.ANNOTATION_GANG_STATE])
        assert (state["gang"], state["children"], state["minMember"]) == ("default/ga", 1, 1)
        assert n.ANNOTATION_GANG_STATE not in annotations_of(source, "b-0")  # never refused
        assert filter_verdict(srv.client, a0, ["n1"])["NodeNames"] == ["n1"]
