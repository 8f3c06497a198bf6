"""The binding cycle (app.framework.bindingcycle): order of the points, Unreserve and forget at each
failure point, Permit's waiting pods, and the assume rules (no second assumption, no foreign forget)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.cache.podinfo import PodInfo
from app.cache.snapshot import ClusterCache
from app.client.errors import Conflict, NotFound
from app.framework.bindingcycle import BindingCycle
from app.framework.config import PluginSpec, SchedulerConfig
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import (
    BindPlugin,
    FilterFailures,
    FilterPlugin,
    NodeBatch,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
)
from app.framework.registry import Registry
from app.framework.runtime import Framework
from app.framework.status import SUCCESS, Status
from app.framework.waiting import MAX_TIMEOUT, WaitingPod
from app.sources.events import Event, EventType


class FakeClient:
    """Records binds and patches; ``fail_bind`` makes the next binds raise it."""

    def __init__(self, log: list[str], cache: ClusterCache) -> None:
        self.log = log
        self.cache = cache
        self.fail_bind: Exception | None = None
        self.confirm_before_failing = False

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.log.append(f"bind {name} {node}")
        if self.confirm_before_failing:  # the watch shows the pod bound, then the answer is lost
            self.cache.apply(Event("Pod", EventType.MODIFIED, _pod_obj(name, node)))
        if self.fail_bind is not None:
            raise self.fail_bind

    async def patch(self, kind: str, name: str, patch: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.log.append(f"patch {kind}/{name}")
        return {}

    async def create_or_update(self, obj: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        raise NotImplementedError

    async def evict(self, namespace: str, name: str, uid: str, reason: str) -> None:
        raise NotImplementedError


class Recorder(ReservePlugin, PermitPlugin, PreBindPlugin, PostBindPlugin):
    """Appends ``<point> <name>`` to the log; fails where ``fail`` says (point -> Status)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.fail: dict[str, Status] = {}
        self.permit_answer: tuple[Status, float] = (SUCCESS, 0.0)
        self.raise_at: str = ""

    def _at(self, point: str) -> Status:
        self.log.append(f"{point} {self.name}")
        if self.raise_at == point:
            raise RuntimeError(f"{self.name} broke at {point}")
        return self.fail.get(point, SUCCESS)

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return self._at("reserve")

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.log.append(f"unreserve {self.name}")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        self.log.append(f"permit {self.name}")
        return self.permit_answer

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        await asyncio.sleep(0)
        return self._at("prebind")

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.log.append(f"postbind {self.name}")


class Binder(BindPlugin):
    """A Bind plugin that skips, binds or fails as told."""

    name = "Binder"

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.answer = Status.skip()

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append("bind Binder")
        return self.answer


class Capacity(FilterPlugin):
    """Fails nodes already holding ``limit`` pods (assumed ones included)."""

    name = "Capacity"

    def __init__(self, handle: Handle, limit: int) -> None:
        self.handle = handle
        self.limit = limit

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        full = Status.unschedulable("Too many pods")
        out: FilterFailures = {}
        for i, name in enumerate(nodes.names):
            node = self.handle.snapshot.node(name)
            if node is not None and len(node.pods) >= self.limit:
                out[i] = full
        return out


def _node_obj(name: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "8", "pods": "110"}}}


def _pod_obj(name: str, node: str = "") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


class Env:
    """A cache with nodes n1, n2 and pending pods p1..p4, a framework of A, B (Recorders) [+ Binder, Capacity]."""

    def __init__(self, binder: bool = False, capacity: int = 0) -> None:
        self.log: list[str] = []
        self.cache = ClusterCache()
        for n in ("n1", "n2"):
            self.cache.apply(Event("Node", EventType.ADDED, _node_obj(n)))
        for p in ("p1", "p2", "p3", "p4"):
            self.cache.apply(Event("Pod", EventType.ADDED, _pod_obj(p)))
        self.client = FakeClient(self.log, self.cache)
        self.a = Recorder("A", self.log)
        self.b = Recorder("B", self.log)
        self.binder = Binder(self.log)
        registry = Registry()
        registry.register("A", lambda args, handle: self.a)
        registry.register("B", lambda args, handle: self.b)
        registry.register("Binder", lambda args, handle: self.binder)
        registry.register("Capacity", lambda args, handle: Capacity(handle, capacity))
        names = ["A", "B"] + (["Binder"] if binder else []) + (["Capacity"] if capacity else [])
        config = SchedulerConfig(tuple(PluginSpec(n) for n in names))
        self.handle = Handle(self.cache, client=self.client)
        self.framework = Framework(config, registry, self.handle)
        self.cycle = BindingCycle(self.cache, self.framework)

    def pod(self, name: str) -> PodInfo:
        found = self.cache.find_pod(f"uid-{name}")
        assert found is not None
        return found

    async def bind(self, name: str, node: str = "n1") -> str:
        return (await self.cycle.run(self.pod(name), node)).error


async def test_success_runs_every_point_in_order() -> None:
    env = Env()
    assert await env.bind("p1") == ""
    assert env.log == [
        "reserve A",
        "reserve B",
        "permit A",
        "permit B",
        "prebind A",
        "prebind B",
        "bind p1 n1",
        "postbind A",
        "postbind B",
    ]
    assert env.pod("p1").node_name == "n1"
    entry = env.cache.assumed["uid-p1"]
    assert entry.node == "n1" and entry.deadline is not None  # assumed until a watch event confirms it


@pytest.mark.parametrize(
    ("where", "expected_tail", "error"),
    [
        # Reserve fails at B: Unreserve for the plugins whose Reserve ran (B included), reverse order
        (("B", "reserve"), ["reserve A", "reserve B", "unreserve B", "unreserve A"], "B: no room"),
        # Permit rejects at A: nothing later runs, every Reserve plugin is unreserved
        (("A", "permit"), ["reserve A", "reserve B", "permit A", "unreserve B", "unreserve A"], "A: no room"),
        # PreBind fails at A: B's PreBind and the Binding never run
        (
            ("A", "prebind"),
            ["reserve A", "reserve B", "permit A", "permit B", "prebind A", "unreserve B", "unreserve A"],
            'running PreBind plugin "A": disk full',
        ),
    ],
)
async def test_failure_unreserves_and_forgets(where: tuple[str, str], expected_tail: list[str], error: str) -> None:
    env = Env()
    plugin, point = where
    target = env.a if plugin == "A" else env.b
    failure = Status.error("disk full") if point == "prebind" else Status.unschedulable("no room")
    if point == "permit":
        target.permit_answer = (failure, 0.0)
    else:
        target.fail[point] = failure
    assert await env.bind("p1") == error
    assert env.log == expected_tail
    assert env.pod("p1").node_name == ""  # forgotten: pending again
    assert "uid-p1" not in env.cache.assumed
    assert "uid-p1" not in env.cache.nodes["n1"].pods


async def test_bind_failure_unreserves_with_the_api_message() -> None:
    env = Env()
    env.client.fail_bind = NotFound('pods "p1" not found')
    assert await env.bind("p1") == 'pods "p1" not found'  # the API's own message, as before
    assert env.log[-3:] == ["bind p1 n1", "unreserve B", "unreserve A"]
    assert "postbind A" not in env.log
    assert env.pod("p1").node_name == ""


async def test_bind_plugins_take_the_binding_or_skip_it() -> None:
    env = Env(binder=True)
    assert await env.bind("p1") == ""
    assert env.log[6:8] == ["bind Binder", "bind p1 n1"]  # skipped: the default binder wrote the Binding
    env.log.clear()
    env.binder.answer = SUCCESS
    assert await env.bind("p2") == ""
    assert "bind p2 n1" not in env.log  # the plugin bound it
    env.log.clear()
    env.binder.answer = Status.error("webhook said no")
    assert await env.bind("p3") == 'running Bind plugin "Binder": webhook said no'
    assert env.log[-2:] == ["unreserve B", "unreserve A"]


async def test_a_plugin_that_raises_fails_only_this_binding() -> None:
    env = Env()
    env.b.raise_at = "reserve"
    assert await env.bind("p1") == 'running Reserve plugin "B": B broke at reserve'
    assert env.log == ["reserve A", "reserve B", "unreserve B", "unreserve A"]
    env.b.raise_at = "prebind"
    env.log.clear()
    assert await env.bind("p1") == 'running PreBind plugin "B": B broke at prebind'
    assert env.log[-2:] == ["unreserve B", "unreserve A"]
    assert env.pod("p1").node_name == ""


async def test_recheck_refuses_a_node_that_filled_up() -> None:
    env = Env(capacity=2)
    assert await env.bind("p1") == ""
    assert await env.bind("p2") == ""
    env.log.clear()
    assert await env.bind("p3") == "Capacity: Too many pods"
    assert env.log == []  # refused before Reserve: nothing to undo
    assert await env.bind("p3", "n2") == ""


async def test_concurrent_binds_never_overcommit() -> None:
    env = Env(capacity=2)
    env.a.permit_answer = (Status.wait(), 5.0)
    tasks = [asyncio.create_task(env.bind(p)) for p in ("p1", "p2", "p3", "p4")]
    await asyncio.sleep(0.01)
    assert len(env.framework.waiting_pods) == 2  # the other two were refused at the re-check
    for waiting in list(env.framework.waiting_pods):
        env.framework.waiting_pods.allow(waiting.uid, "A")
    results = await asyncio.gather(*tasks)
    assert sorted(results) == ["", "", "Capacity: Too many pods", "Capacity: Too many pods"]
    assert len(env.cache.nodes["n1"].pods) == 2


async def test_permit_wait_then_allow() -> None:
    env = Env()
    env.a.permit_answer = (Status.wait(), 5.0)
    env.b.permit_answer = (Status.wait(), 5.0)
    task = asyncio.create_task(env.bind("p1"))
    await asyncio.sleep(0.01)
    waiting = env.handle.waiting_pods.get("uid-p1")
    assert waiting is not None and sorted(waiting.pending_plugins()) == ["A", "B"]
    assert env.pod("p1").node_name == "n1"  # assumed while it waits: its resources are held
    assert "uid-p1" in env.cache.nodes["n1"].pods
    assert env.handle.waiting_pods.allow("uid-p1", "A")
    await asyncio.sleep(0.01)
    assert not task.done()  # B still holds it
    env.handle.waiting_pods.allow("uid-p1", "B")
    assert await task == ""
    assert env.log[-4:] == ["prebind B", "bind p1 n1", "postbind A", "postbind B"]
    assert env.handle.waiting_pods.get("uid-p1") is None


async def test_permit_wait_then_reject() -> None:
    env = Env()
    env.a.permit_answer = (Status.wait(), 5.0)
    task = asyncio.create_task(env.bind("p1"))
    await asyncio.sleep(0.01)
    assert env.handle.waiting_pods.reject("uid-p1", "A", "gang default/g1 rejected")
    assert await task == "A: gang default/g1 rejected"
    assert env.log[-2:] == ["unreserve B", "unreserve A"]
    assert env.pod("p1").node_name == ""
    assert env.handle.waiting_pods.get("uid-p1") is None
    assert not env.handle.waiting_pods.reject("uid-p1")  # nothing waits any more


async def test_permit_timeout_rejects_with_upstream_message() -> None:
    env = Env()
    env.b.permit_answer = (Status.wait(), 0.05)
    assert await env.bind("p1") == "B: rejected due to timeout after waiting 50ms at plugin B"
    assert env.log[-2:] == ["unreserve B", "unreserve A"]
    assert env.pod("p1").node_name == ""


async def test_permit_timeout_is_capped_at_fifteen_minutes() -> None:
    env = Env()
    waiting = WaitingPod(env.pod("p1"), "n1", {"A": 10 * 3600.0})
    timer = waiting._timers["A"]
    loop = asyncio.get_running_loop()
    assert timer.when() - loop.time() <= MAX_TIMEOUT + 0.1
    waiting.reject("A", "done")


async def test_deleting_a_waiting_pod_rejects_it() -> None:
    env = Env()
    env.a.permit_answer = (Status.wait(), 5.0)
    task = asyncio.create_task(env.bind("p1"))
    await asyncio.sleep(0.01)
    env.cache.apply(Event("Pod", EventType.DELETED, _pod_obj("p1")))
    assert await task == "removed"  # upstream RejectWaitingPod: plugin "" and message "removed"
    assert "bind p1 n1" not in env.log


async def test_a_pod_assumed_on_one_node_cannot_be_assumed_on_another() -> None:
    env = Env()
    env.a.permit_answer = (Status.wait(), 5.0)
    first = asyncio.create_task(env.bind("p1", "n1"))
    await asyncio.sleep(0.01)
    # a second bind of the same pod, elsewhere, is refused and leaves the first assumption alone
    error = await env.bind("p1", "n2")
    assert error == "pod default/p1 is already assumed on node 'n1': its binding is in flight"
    assert env.cache.assumed["uid-p1"].node == "n1"
    assert "uid-p1" in env.cache.nodes["n1"].pods and "uid-p1" not in env.cache.nodes["n2"].pods
    assert env.log.count("reserve A") == 1  # the refused bind reserved nothing and unreserved nothing
    assert "unreserve A" not in env.log
    env.handle.waiting_pods.allow("uid-p1", "A")
    assert await first == ""
    assert env.pod("p1").node_name == "n1"
    # once bound, binding it again fails without touching it
    assert await env.bind("p1", "n2") == "pod default/p1 is already assigned to node 'n1'"
    assert env.pod("p1").node_name == "n1"


async def test_a_failed_bind_never_removes_a_pod_the_watch_confirmed() -> None:
    env = Env()
    env.client.confirm_before_failing = True  # the API server bound it, but our request failed
    env.client.fail_bind = Conflict("the object has been modified")
    assert await env.bind("p1") == "the object has been modified"
    assert env.pod("p1").node_name == "n1"  # the watch event stands; forget touched nothing
    assert "uid-p1" in env.cache.nodes["n1"].pods


async def test_cancelled_binding_undoes_everything() -> None:
    env = Env()
    env.a.permit_answer = (Status.wait(), 5.0)
    task = asyncio.create_task(env.bind("p1"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert env.pod("p1").node_name == ""
    assert env.log[-2:] == ["unreserve B", "unreserve A"]
    assert env.handle.waiting_pods.get("uid-p1") is None
