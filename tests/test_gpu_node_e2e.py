"""GPU sharing end to end on the HTTP fake API server: the agent (fake NVML over the real H200 capture)
reports the Device -> the manager patches the Node's gpu resources -> a pod asking for half a GPU passes
/filter (NodeResourcesFit sees koordinator.sh/gpu-core, DeviceShare the Device), binds, and carries
device-allocated with the GPU's UUID and minor. Plus the pod inspection in embedded mode."""

from __future__ import annotations

import asyncio
import copy
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from agent.collectors.gpu import GPUCollector
from agent.daemon import Agent, AgentConfig
from agent.evictor import RecordingEvictor
from agent.states.device import APIDeviceWriter
from agent.states.providers import APIServerStates
from app.cache.snapshot import ClusterCache
from app.client.config import load_configuration
from app.client.sync import Client
from app.framework.config import PluginSpec, SchedulerConfig
from app.manager.cli import MANAGER_KINDS
from app.manager.controllers import SLOControllers
from app.sources.files import FileSource
from app.sources.kubernetes import KubernetesSource
from tests.agent.fake_nvml import H200_MEMORY, H200_UUID, FakeNVML, h200_capture, h200_sys
from tests.agent.test_units import v2_tree
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer
from tests.conftest import LiveServer, filter_body

CORE, RATIO, MEM = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio", "koordinator.sh/gpu-memory"
ANN = "scheduling.koordinator.sh/device-allocated"
DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
PODS = "/api/v1/namespaces/ml/pods"
CONFIG = SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare", 1, {})))


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-node", "uid": "uid-gpu-node", "labels": {"kubernetes.io/hostname": "gpu-node"}},
        "status": {
            "allocatable": {"cpu": "16", "memory": "125Gi", "pods": "110"},
            "capacity": {"cpu": "16", "memory": "125Gi", "pods": "110"},
        },
    }


def _share_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "half-gpu", "namespace": "ml", "uid": "uid-half-gpu"},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [
                {
                    "name": "train",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", CORE: "50", RATIO: "50"},
                        "limits": {CORE: "50", RATIO: "50"},
                    },
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def _wait(cond: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


async def _manager_round(fake: FakeAPIServer, kubeconfig: str) -> None:
    source = KubernetesSource(MANAGER_KINDS, kubeconfig=kubeconfig, backoff_initial=0.1)
    cache = ClusterCache()
    controllers = SLOControllers(cache, source)
    await source.start(cache)
    try:
        for _ in range(100):
            if source.ready():
                break
            await asyncio.sleep(0.05)
        await controllers.run_once(full=True)
    finally:
        await source.stop()


def test_agent_device_manager_node_scheduler_bind(tmp_path: Path) -> None:
    fake = FakeAPIServer(tokens={TOKEN})
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    try:
        fake.seed("/api/v1/nodes", _node())
        second = copy.deepcopy(_share_pod())
        second["metadata"].update(name="half-2", uid="uid-half-2")
        for obj in (_share_pod(), second):
            fake.seed("/api/v1/pods", obj)
            fake.seed(PODS, obj)

        # 1. the agent discovers the H200 and writes the Device, owned by the Node
        h200_sys(tmp_path / "sys")
        nvml = FakeNVML(h200_capture())
        gpu = GPUCollector(nvml, sys_root=tmp_path / "sys")
        with Client(load_configuration(kubeconfig), timeout=5) as client:
            agent = Agent(
                AgentConfig(node_name="gpu-node", states_interval=0, features=set(), sys_root=tmp_path / "sys"),
                v2_tree(tmp_path / "cg"),
                APIServerStates("gpu-node", client),
                None,
                RecordingEvictor("gpu-node", None),
                gpu=gpu,
                device_writer=APIDeviceWriter(client),
            )
            agent.tick(1000.0)
        device = fake.store[DEVICES]["gpu-node"]
        assert device["metadata"]["ownerReferences"][0]["uid"] == "uid-gpu-node"
        assert device["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "H200"
        assert [(d["id"], d["minor"], d["health"]) for d in device["spec"]["devices"]] == [(H200_UUID, 0, True)]
        # without the manager, kube-scheduler's NodeResourcesFit would refuse: the node has no gpu-core
        assert CORE not in fake.store["/api/v1/nodes"]["gpu-node"]["status"]["allocatable"]

        # 2. the manager advertises it
        asyncio.run(_manager_round(fake, kubeconfig))
        node = fake.store["/api/v1/nodes"]["gpu-node"]
        assert node["status"]["allocatable"][CORE] == "100"
        assert node["status"]["allocatable"][RATIO] == "100"
        assert node["status"]["allocatable"][MEM] == "143771Mi"
        assert node["status"]["capacity"]["koordinator.sh/gpu"] == "100"
        assert node["metadata"]["labels"]["node.koordinator.sh/gpu-driver-version"] == "580.159.04"

        # 3. the scheduler: filter passes, bind writes device-allocated with the GPU's UUID and minor
        source = KubernetesSource(kubeconfig=kubeconfig, backoff_initial=0.1)
        with LiveServer(source, CONFIG) as srv:
            _wait(lambda: "gpu-node" in srv.service.cache.nodes and srv.service.cache.objects.get("Device"))
            pod = fake.store[PODS]["half-gpu"]
            r = srv.client.post("/filter", json=filter_body(pod, ["gpu-node"]))
            assert r.status_code == 200 and r.json()["NodeNames"] == ["gpu-node"], r.json()
            assert not r.json()["FailedNodes"]
            r = srv.client.post(
                "/bind",
                json={"PodName": "half-gpu", "PodNamespace": "ml", "PodUID": "uid-half-gpu", "Node": "gpu-node"},
            )
            assert r.json() == {"Error": ""}
            stored = fake.store[PODS]["half-gpu"]
            assert stored["spec"]["nodeName"] == "gpu-node"
            allocated = orjson.loads(stored["metadata"]["annotations"][ANN])
            half = H200_MEMORY // 2  # 75,377,410,048 bytes
            assert allocated == {
                "gpu": [
                    {
                        "minor": 0,
                        "resources": {CORE: "50", MEM: f"{half // 1024}Ki", RATIO: "50"},
                        "id": H200_UUID,
                    }
                ]
            }
            # the inspection shows the allocation the service made
            view = srv.client.get("/apis/v1/pods/ml/half-gpu").json()
            assert view["deviceAllocated"] == allocated
            assert view["uid"] == "uid-half-gpu"
            # a second half fits beside it and binds, a third does not fit
            r = srv.client.post("/filter", json=filter_body(fake.store[PODS]["half-2"], ["gpu-node"]))
            assert r.json()["NodeNames"] == ["gpu-node"]
            bind2 = {"PodName": "half-2", "PodNamespace": "ml", "PodUID": "uid-half-2", "Node": "gpu-node"}
            assert srv.client.post("/bind", json=bind2).json() == {"Error": ""}
            third = copy.deepcopy(_share_pod())
            third["metadata"].update(name="half-3", uid="uid-half-3")
            r = srv.client.post("/filter", json=filter_body(third, ["gpu-node"]))
            # NodeResourcesFit already counts the node's advertised 100 gpu-core as taken
            failed = "Insufficient koordinator.sh/gpu-core, Insufficient koordinator.sh/gpu-memory-ratio"
            assert r.json()["FailedNodes"] == {"gpu-node": failed}

        # 4. the GPU stops answering: the agent marks it unhealthy, the manager stops advertising it
        nvml.failing = {0}
        with Client(load_configuration(kubeconfig), timeout=5) as client:
            agent.states = APIServerStates("gpu-node", client)
            agent.device_writer = APIDeviceWriter(client)
            agent.tick(1010.0)
        [entry] = fake.store[DEVICES]["gpu-node"]["spec"]["devices"]
        assert entry["health"] is False and entry["conditions"][0]["reason"] == "NVMLError"
        asyncio.run(_manager_round(fake, kubeconfig))
        allocatable = fake.store["/api/v1/nodes"]["gpu-node"]["status"]["allocatable"]
        assert not any(k.startswith("koordinator.sh/gpu") for k in allocatable), allocatable
    finally:
        fake.close()


def test_pod_inspection_in_embedded_mode(tmp_path: Path) -> None:
    """No API server: the pod's allocation is read from the service (its cache's annotation, written in memory by
    the file source at PreBind); unknown pods answer 404 with the message."""
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    node = _node()
    node["status"]["allocatable"].update({CORE: "100", RATIO: "100", MEM: "143771Mi"})
    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "gpu-node"},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "id": H200_UUID,
                    "minor": 0,
                    "health": True,
                    "resources": {CORE: "100", RATIO: "100", MEM: "143771Mi"},
                }
            ]
        },
    }
    (cluster / "cluster.yaml").write_text(yaml.safe_dump_all([node, device, _share_pod()]))
    with LiveServer(FileSource(cluster, poll_interval=0), CONFIG) as srv:
        c = srv.client
        before = c.get("/apis/v1/pods/ml/half-gpu").json()
        assert before["phase"] == "Pending" and before["nodeName"] == ""
        assert before["deviceAllocated"] is None and before["annotations"] == {}
        assert before["requests"] == {CORE: "50", "cpu": "1", "memory": "1Gi", RATIO: "50"}
        pod = srv.service.cache.pod_objects["uid-half-gpu"]
        assert c.post("/filter", json=filter_body(pod, ["gpu-node"])).json()["NodeNames"] == ["gpu-node"]
        bind = {"PodName": "half-gpu", "PodNamespace": "ml", "PodUID": "uid-half-gpu", "Node": "gpu-node"}
        assert c.post("/bind", json=bind).json() == {"Error": ""}
        view = _wait(
            lambda: (v := c.get("/apis/v1/pods/ml/half-gpu").json())["deviceAllocatedFrom"] == "annotation" and v
        )
        assert view["nodeName"] == "gpu-node"
        assert view["deviceAllocated"]["gpu"][0]["id"] == H200_UUID
        assert view["deviceAllocated"]["gpu"][0]["minor"] == 0
        assert ANN in view["annotations"]
        missing = c.get("/apis/v1/pods/ml/nope")
        assert missing.status_code == 404 and missing.json() == {"message": "cannot find pod ml/nope"}
        assert "/apis/v1/pods/:namespace/:name" in c.get("/apis/v1/__services__").json()["GET"]
