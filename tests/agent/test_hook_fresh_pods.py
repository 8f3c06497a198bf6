"""The creation race of runtime hooks: an LS pod created together with an LSR pod must not get the LSR pod's cpus.

The agent publishes shared pools 0-3 (its NodeResourceTopology, built before either pod existed); the kubelet's
``/pods`` (a fake HTTP server) already lists the LSR pod (resource-status cpuset 2) and the LS pod, while the
agent's states know neither or only the LS pod. The LS container's PreCreateContainer hook, on the agent's real
RuntimeHookServicer, must get 0-1,3: the hook reads the kubelet's pods again before it hands out the pool.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups import CgroupLayout
from agent.daemon import Agent, AgentConfig
from agent.evictor import RecordingEvictor
from agent.executor import CgroupExecutor
from agent.runtimehooks.freshpods import PodsRefresher
from agent.runtimehooks.server import RuntimeHookServicer
from agent.states.pods import pod_meta
from agent.states.providers import APIServerStates, StatesError
from agent.topologyreport import TopologyStatus
from app.api.runtime.v1alpha1 import api_pb2 as hookapi
from app.api.topology import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_RESOURCE_STATUS,
)

NODE = "n1"


def raw_pod(name: str, uid: str, qos: str, kube_qos: str, annotations: dict[str, str]) -> dict[str, Any]:
    cpu = {"cpu": "1"} if kube_qos == "Guaranteed" else {"cpu": "500m"}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "labels": {"koordinator.sh/qosClass": qos},
            "annotations": annotations,
        },
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "resources": {"requests": cpu, "limits": cpu}}]},
        "status": {"phase": "Pending", "qosClass": kube_qos},
    }


LSR = raw_pod("lsr", "u-lsr", "LSR", "Guaranteed", {ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": "2"})})
LS = raw_pod("ls", "u-ls", "LS", "Burstable", {})


@dataclass
class FakeKubelet:
    """``GET /pods``: ``pods`` as a PodList; counts requests; sleeps ``delay`` seconds first."""

    pods: list[dict[str, Any]]
    delay: float = 0.0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    fake = FakeKubelet([LSR, LS])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with fake.lock:
                fake.requests += 1
            time.sleep(fake.delay)
            body = json.dumps({"kind": "PodList", "items": fake.pods}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def make_agent(tmp_path: Path, kubelet_url: str, known: list[dict[str, Any]]) -> Agent:
    """An agent whose published pools are 0-3 and whose states know ``known`` only."""
    root = tmp_path / "cg"
    for ctrl in ("cpu", "cpuset", "memory"):
        (root / ctrl / "kubepods").mkdir(parents=True)
    layout = CgroupLayout.detect(root, "kubepods")
    states = APIServerStates(NODE, client=None, kubelet_url=kubelet_url, kubelet_token=None)  # type: ignore[arg-type]
    agent = Agent(AgentConfig(node_name=NODE), layout, states, None, RecordingEvictor(NODE, None, True))
    agent.topology = TopologyStatus(
        {
            ANNOTATION_NODE_CPU_SHARED_POOLS: json.dumps([{"socket": 0, "node": 0, "cpuset": "0-3"}]),
            ANNOTATION_KUBELET_CPU_MANAGER_POLICY: json.dumps({"policy": "none"}),
        }
    )
    agent.pods = [pod_meta(p, layout) for p in known]
    return agent


def create_request(pod: dict[str, Any]) -> hookapi.ContainerResourceHookRequest:
    meta = pod["metadata"]
    return hookapi.ContainerResourceHookRequest(
        pod_meta=hookapi.PodSandboxMetadata(name=meta["name"], uid=meta["uid"], namespace=meta["namespace"]),
        container_meta=hookapi.ContainerMetadata(name="main"),
        pod_labels=meta["labels"],
        pod_annotations=meta["annotations"],
        pod_cgroup_parent=f"/kubepods/burstable/pod{meta['uid']}",
        container_resources=hookapi.LinuxContainerResources(cpu_shares=512),
    )


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("the agent knows neither pod", []),
        ("the agent knows the LS pod only", [LS]),
    ],
)
def test_ls_pod_created_with_an_lsr_pod_does_not_get_its_cpus(
    tmp_path: Path, kubelet: FakeKubelet, name: str, known: list[dict[str, Any]]
) -> None:
    agent = make_agent(tmp_path, kubelet.url, known)
    servicer = RuntimeHookServicer(agent, CgroupExecutor(agent.layout))
    resp = servicer.PreCreateContainerHook(create_request(LS), None)
    assert resp.container_resources.cpuset_cpus == "0-1,3", name
    assert kubelet.requests == 1, "one read of the kubelet's pods for the hook"
    # the LSR pod's own container gets its cpuset, whatever the agent knows
    resp = servicer.PreCreateContainerHook(create_request(LSR), None)
    assert (resp.container_resources.cpuset_cpus, resp.container_resources.cpu_quota) == ("2", -1)


def test_an_unknown_pod_is_taken_from_the_kubelet_with_its_spec(tmp_path: Path, kubelet: FakeKubelet) -> None:
    """A BE pod the agent does not know yet: the kubelet's copy carries its batch resources (the request has no
    spec), so its container gets its batch shares at creation."""
    be = raw_pod("be", "u-be", "BE", "BestEffort", {})
    be["spec"]["containers"][0]["resources"] = {
        "requests": {"kubernetes.io/batch-cpu": "500"},
        "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "128Mi"},
    }
    kubelet.pods = [be]
    agent = make_agent(tmp_path, kubelet.url, [])
    req = create_request(be)
    req.pod_cgroup_parent = "/kubepods/besteffort/podu-be"
    resp = RuntimeHookServicer(agent, CgroupExecutor(agent.layout)).PreCreateContainerHook(req, None)
    res = resp.container_resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == (512, 100000, 128 << 20)


def test_concurrent_hooks_share_one_read(tmp_path: Path, kubelet: FakeKubelet) -> None:
    """Eight hooks at once while the kubelet takes 0.2 s: no stampede (one read, two at most when a hook
    arrives just after the first read started), and every hook sees the LSR pod."""
    kubelet.delay = 0.2
    agent = make_agent(tmp_path, kubelet.url, [])
    servicer = RuntimeHookServicer(agent, CgroupExecutor(agent.layout))
    out: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: out.append(
                servicer.PreCreateContainerHook(create_request(LS), None).container_resources.cpuset_cpus
            )
        )
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert out == ["0-1,3"] * 8
    assert 1 <= kubelet.requests <= 2


def test_kubelet_down_falls_back_to_the_known_pods_quickly(tmp_path: Path) -> None:
    """No kubelet: the hook answers with what the agent knows (the published pool) and does not ask again for
    the back-off, so a dead kubelet costs one failed read, not one per hook."""
    agent = make_agent(tmp_path, "http://127.0.0.1:9", [LS])  # port 9 (discard): refused
    servicer = RuntimeHookServicer(agent, CgroupExecutor(agent.layout))
    t0 = time.monotonic()
    for _ in range(3):
        assert servicer.PreCreateContainerHook(create_request(LS), None).container_resources.cpuset_cpus == "0-3"
    assert time.monotonic() - t0 < 1.0
    assert agent.hook_pods.reads == 1


def test_a_read_older_than_the_hook_is_not_used(tmp_path: Path) -> None:
    """``get(since)`` reuses a read that started at or after ``since`` only; a failed read falls back."""
    now = [100.0]
    calls: list[float] = []

    def fetch(timeout: float) -> list[dict[str, Any]]:
        calls.append(timeout)
        if len(calls) == 3:
            raise StatesError("kubelet: timed out")
        return [LSR]

    layout = CgroupLayout.detect(tmp_path, "kubepods")
    refresher = PodsRefresher(fetch, lambda: [], layout, timeout=0.5, backoff=5.0, clock=lambda: now[0])
    first = refresher.get(100.0)
    assert first.fresh and first.exclusive_cpus == {2} and len(calls) == 1
    assert refresher.get(100.0) is first  # same instant: shared
    now[0] = 101.0
    second = refresher.get(100.5)  # the hook began after the first read: read again
    assert second is not first and len(calls) == 2
    now[0] = 102.0
    fallback = refresher.get(102.0)  # the source fails: the known pods (none), not the stale read
    assert not fallback.fresh and fallback.exclusive_cpus == frozenset() and len(calls) == 3
    now[0] = 103.0
    assert not refresher.get(103.0).fresh and len(calls) == 3  # backing off
    now[0] = 108.0
    assert refresher.get(108.0).fresh and len(calls) == 4
