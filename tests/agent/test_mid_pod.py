"""A Mid pod end to end: admitted by /mutate-pod (cpu/memory -> kubernetes.io/mid-*), filtered by /filter against
the nodes' mid-cpu (as the manager wrote it from prodReclaimableMetric), and bounded by the agent on a real cgroup."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from agent.cgroups import CgroupLayout
from agent.daemon import Agent, AgentConfig
from agent.evictor import RecordingEvictor
from agent.prediction.server import PredictionConfig
from agent.states.providers import FileStates
from app.api.koordext import MID_CPU, MID_MEMORY
from app.sources.files import FileSource
from tests.agent.cgtree import CgroupTree
from tests.conftest import LiveServer, filter_body, wire

MiB = 1 << 20


def node(name: str, mid_cpu: str, mid_memory: str) -> dict[str, Any]:
    res = {"cpu": "8", "memory": "32Gi", MID_CPU: mid_cpu, MID_MEMORY: mid_memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": res, "allocatable": res},
    }


SCHEDULER_OBJECTS: list[dict[str, Any]] = [
    # node-small's prod pods are predicted to leave 1.5 cores, node-big's 4.2 (what the manager would write)
    node("node-small", "1500", "8Gi"),
    node("node-big", "4200", "8Gi"),
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "koord-mid"},
        "value": 7000,
        "preemptionPolicy": "PreemptLowerPriority",
    },
    {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": "mid-tier"},
        "spec": {"selector": {"matchLabels": {"tier": "mid"}}, "qosClass": "LS", "priorityClassName": "koord-mid"},
    },
]


def mid_pod() -> dict[str, Any]:
    pod: dict[str, Any] = copy.deepcopy(wire("admissionreview.json")["request"]["object"])
    pod["metadata"]["labels"] = {"tier": "mid"}
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "2", "memory": "256Mi"},
        "limits": {"cpu": "3", "memory": "512Mi"},
    }
    return pod


def admit(srv: LiveServer, pod: dict[str, Any]) -> dict[str, Any]:
    body = wire("admissionreview.json")
    body["request"]["object"] = pod
    answer = srv.client.post("/mutate-pod", json=body).json()["response"]
    assert answer["allowed"] is True, answer
    ops = json.loads(base64.b64decode(answer["patch"]))
    mutated: dict[str, Any] = jsonpatch.apply_patch(pod, ops)
    return mutated


def test_mid_pod_is_admitted_scheduled_on_mid_cpu_and_bounded_on_a_real_cgroup(
    cgtree: CgroupTree, tmp_path: Path
) -> None:
    cluster = tmp_path / "scheduler"
    cluster.mkdir()
    (cluster / "objects.yaml").write_text(yaml.safe_dump_all(SCHEDULER_OBJECTS))
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        pod = admit(srv, mid_pod())
        labels = pod["metadata"]["labels"]
        assert labels["koordinator.sh/qosClass"] == "LS" and pod["spec"]["priority"] == 7000
        res = pod["spec"]["containers"][0]["resources"]
        assert res["requests"] == {MID_CPU: "2k", MID_MEMORY: "256Mi"}  # 2 cores -> 2000 milli-cores
        assert res["limits"] == {MID_CPU: "3k", MID_MEMORY: "512Mi"}
        answer = srv.client.post("/filter", json=filter_body(pod, ["node-small", "node-big"])).json()
        assert answer["NodeNames"] == ["node-big"]
        # 2000 milli-cores of mid-cpu exceed node-small's 1500 even when empty: unresolvable there
        assert answer["FailedAndUnresolvableNodes"] == {"node-small": "Insufficient kubernetes.io/mid-cpu"}

    # the kubelet runs it on node-big: no cpu/memory requests, so in the besteffort tree without limits
    uid, cid = "mid-0001", "mid1c"
    pod_dir = cgtree.pod(uid, "besteffort", (cid,))
    pod["metadata"].update(uid=uid, namespace="default")
    pod["spec"]["nodeName"] = "node-big"
    pod["status"] = {
        "phase": "Running",
        "qosClass": "BestEffort",
        "containerStatuses": [{"name": "c", "containerID": f"containerd://{cid}"}],
    }
    agent_cluster = tmp_path / "agent"
    agent_cluster.mkdir()
    (agent_cluster / "objects.yaml").write_text(yaml.safe_dump_all([node("node-big", "4200", "8Gi"), pod]))
    agent = Agent(
        AgentConfig(
            node_name="node-big",
            interval=0.5,
            states_interval=0,
            report_interval=1.0,
            features=set(),
            prediction=PredictionConfig(checkpoint_dir=tmp_path / "ckpt"),
        ),
        CgroupLayout.detect(cgtree.root, cgtree.kubepods),
        FileStates("node-big", agent_cluster),
        None,
        RecordingEvictor("node-big", tmp_path / "events.jsonl", False),
    )
    agent.tick()
    # the agent's tick also ran the first prediction round (the Mid pod is not prod: only its class model counts it)
    assert agent.prediction is not None and agent.prediction.server.synced
    assert "__node-koord-mid__" in agent.prediction.server.models  # (the node's own needs a second cpu reading)
    for rel in (pod_dir, f"{pod_dir}/{cid}"):
        # mid-cpu request 2000 -> shares 2000 * 1024 / 1000; limit 3000 -> quota 300000 us; mid-memory limit
        assert cgtree.read("cpu", rel, "cpu.shares") == "2048"
        assert cgtree.read("cpu", rel, "cpu.cfs_quota_us") == "300000"
        assert cgtree.read("memory", rel, "memory.limit_in_bytes") == str(512 * MiB)
