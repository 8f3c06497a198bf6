"""koord runtime-proxy in front of a fake containerd, calling the agent's real RuntimeHookService: a GPU-share pod's
container is created with NVIDIA_VISIBLE_DEVICES=<its GPU's UUID>, an LSR pod's with its own cpus and no quota, an
LS pod's with the shared pool, a BE pod's with its batch shares/quota/memory, and the BE pod's cgroup gets its
batch values at RunPodSandbox, before any container exists."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from agent.cgroups import CgroupLayout
from agent.executor import CgroupExecutor
from agent.metrics import AgentMetrics
from agent.runtimehooks.server import CONFIG_FILE, HookServerOptions, RuntimeHookServer
from runtimeproxy.cri.v1 import api_pb2 as cri
from runtimeproxy.options import Options
from runtimeproxy.server import RuntimeProxyServer
from tests.runtimeproxy.fakes import RS, AgentEnv, FakeCRI, serve

UUID = "GPU-ad7723cc-c000-c2e0-1213-74918b7d7a51"


@dataclass
class Rig:
    backend: FakeCRI
    channel: grpc.Channel
    root: Path
    metrics: AgentMetrics

    def run_and_create(self, sandbox: cri.PodSandboxConfig) -> cri.CreateContainerRequest:
        self.channel.unary_unary(RS + "RunPodSandbox")(
            cri.RunPodSandboxRequest(config=sandbox).SerializeToString(), timeout=5
        )
        req = cri.CreateContainerRequest(
            pod_sandbox_id="sb-1",
            config=cri.ContainerConfig(
                metadata=cri.ContainerMetadata(name="main"),
                envs=[cri.KeyValue(key="PATH", value=b"/bin")],
                linux=cri.LinuxContainerConfig(resources=cri.LinuxContainerResources(cpu_shares=2, cpu_quota=50000)),
            ),
            sandbox_config=sandbox,
        )
        self.channel.unary_unary(RS + "CreateContainer")(req.SerializeToString(), timeout=5)
        return cri.CreateContainerRequest.FromString(self.backend.calls[-1][1])


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    root = tmp_path / "cg"
    for ctrl in ("cpu", "cpuset", "memory"):
        (root / ctrl / "kubepods").mkdir(parents=True)
    layout = CgroupLayout.detect(root, "kubepods")
    backend = FakeCRI()
    cri_server = serve(backend, tmp_path / "cri.sock")
    hooks_dir = tmp_path / "hooks"
    metrics = AgentMetrics()
    hook = RuntimeHookServer(
        AgentEnv(layout),
        CgroupExecutor(layout),
        HookServerOptions(addr=str(tmp_path / "k.sock"), host_endpoint=str(tmp_path / "k.sock"), config_path=hooks_dir),
        recorder=metrics,
    )
    hook.start()
    proxy = RuntimeProxyServer(
        Options(
            runtime_proxy_endpoint=str(tmp_path / "p.sock"),
            remote_runtime_service_endpoint=str(tmp_path / "cri.sock"),
            runtime_hooks_config_path=hooks_dir,
            hook_timeout=1.0,
        )
    )
    proxy.start(fail_over_timeout=2)
    channel = grpc.insecure_channel(f"unix://{tmp_path / 'p.sock'}")
    try:
        yield Rig(backend, channel, root, metrics)
    finally:
        channel.close()
        proxy.stop(0)
        hook.stop(0)
        cri_server.stop(0)


def sandbox(uid: str, qos: str, parent: str, annotations: dict[str, str]) -> cri.PodSandboxConfig:
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=f"pod-{uid}", uid=uid, namespace="default"),
        labels={"koordinator.sh/qosClass": qos} if qos else {},
        annotations=annotations,
        linux=cri.LinuxPodSandboxConfig(cgroup_parent=parent),
    )


def test_registration_is_upstreams_format(rig: Rig, tmp_path: Path) -> None:
    data = json.loads((tmp_path / "hooks" / CONFIG_FILE).read_text())
    assert data == {
        "remote-endpoint": str(tmp_path / "k.sock"),
        "failure-policy": "Ignore",
        "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", "PreUpdateContainerResources"],
    }


def test_gpu_share_pod_gets_its_gpu_uuid(rig: Rig) -> None:
    alloc = {"gpu": [{"minor": 0, "id": UUID, "resources": {"koordinator.sh/gpu-core": "50"}}]}
    sent = rig.run_and_create(
        sandbox(
            "u-gpu",
            "LS",
            "/kubepods/burstable/podu-gpu",
            {"scheduling.koordinator.sh/device-allocated": json.dumps(alloc)},
        )
    )
    envs = {e.key: e.value for e in sent.config.envs}
    assert envs == {"PATH": b"/bin", "NVIDIA_VISIBLE_DEVICES": UUID.encode()}
    counted = rig.metrics.registry.get_sample_value
    assert counted("koordlet_runtime_hooks_total", {"hook": "PreCreateContainer", "result": "success"}) == 1
    assert counted("koordlet_runtime_hooks_total", {"hook": "PreRunPodSandbox", "result": "success"}) == 1
    assert sent.config.linux.resources.cpuset_cpus == "2-3"  # LS: the shared pool


def test_lsr_pod_starts_on_its_own_cpus_without_quota(rig: Rig) -> None:
    sent = rig.run_and_create(
        sandbox("u-lsr", "LSR", "/kubepods/podu-lsr", {"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-1"}'})
    )
    res = sent.config.linux.resources
    assert (res.cpuset_cpus, res.cpu_quota, res.cpu_shares) == ("0-1", -1, 2)
    assert "NVIDIA_VISIBLE_DEVICES" not in {e.key for e in sent.config.envs}


def test_be_pod_gets_batch_limits_before_its_first_instruction(rig: Rig) -> None:
    pod_dir = "kubepods/besteffort/podu-be"
    for ctrl, name, value in (
        ("cpu", "cpu.shares", "2"),
        ("cpu", "cpu.cfs_quota_us", "-1"),
        ("memory", "memory.limit_in_bytes", "9223372036854771712"),
    ):
        (rig.root / ctrl / pod_dir).mkdir(parents=True, exist_ok=True)
        (rig.root / ctrl / pod_dir / name).write_text(value + "\n")
    spec = {
        "containers": {
            "main": {
                "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
                "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"},
            }
        }
    }
    sent = rig.run_and_create(
        sandbox(
            "u-be",
            "BE",
            "/kubepods/besteffort/podu-be",
            {"node.koordinator.sh/extended-resource-spec": json.dumps(spec)},
        )
    )
    res = sent.config.linux.resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == (512, 100000, 1 << 30)
    assert res.cpuset_cpus == ""  # BE cpusets belong to BE suppression
    # the pod cgroup got its batch values at RunPodSandbox
    assert (rig.root / "cpu" / pod_dir / "cpu.shares").read_text().strip() == "512"
    assert (rig.root / "cpu" / pod_dir / "cpu.cfs_quota_us").read_text().strip() == "100000"
    assert (rig.root / "memory" / pod_dir / "memory.limit_in_bytes").read_text().strip() == str(1 << 30)


def test_malformed_annotations_leave_the_request_alone(rig: Rig) -> None:
    sent = rig.run_and_create(
        sandbox(
            "u-bad",
            "LSR",
            "/kubepods/podu-bad",
            {
                "scheduling.koordinator.sh/device-allocated": "{not json",
                "scheduling.koordinator.sh/resource-status": '{"cpuset": 7}',
            },
        )
    )
    res = sent.config.linux.resources
    assert (res.cpu_shares, res.cpu_quota) == (2, 50000)
    assert [e.key for e in sent.config.envs] == ["PATH"]


def test_kubelet_update_keeps_the_lsr_cpuset(rig: Rig) -> None:
    rig.run_and_create(
        sandbox("u-lsr2", "LSR", "/kubepods/podu-lsr2", {"scheduling.koordinator.sh/resource-status": '{"cpuset":"1"}'})
    )
    update = cri.UpdateContainerResourcesRequest(
        container_id="ctr-1", linux=cri.LinuxContainerResources(cpu_shares=1024, cpu_quota=200000, cpuset_cpus="0-3")
    )
    rig.channel.unary_unary(RS + "UpdateContainerResources")(update.SerializeToString(), timeout=5)
    sent = cri.UpdateContainerResourcesRequest.FromString(rig.backend.calls[-1][1])
    assert (sent.linux.cpuset_cpus, sent.linux.cpu_quota, sent.linux.cpu_shares) == ("1", -1, 1024)


def test_group_identity_is_written_at_run_pod_sandbox_when_the_kernel_has_it(tmp_path: Path) -> None:
    from agent.runtimehooks.hooks import pre_run_pod_sandbox
    from agent.runtimehooks.protocol import hook_pod
    from app.api.slo import CPUQOSCfg, ResourceQOS, ResourceQOSStrategy

    root = tmp_path / "cg"
    pod_dir = root / "cpu" / "kubepods" / "burstable" / "podu-ls"
    pod_dir.mkdir(parents=True)
    (pod_dir / "cpu.bvt_warp_ns").write_text("0\n")
    env = AgentEnv(CgroupLayout.detect(root, "kubepods"))
    env.gi = True
    env.slo = env.slo.model_copy(
        update={
            "resource_qos_strategy": ResourceQOSStrategy(
                ls_class=ResourceQOS(cpu_qos=CPUQOSCfg(enable=True, group_identity=2))
            )
        }
    )
    pod = hook_pod(env, "u-ls", "d", "ls", {"koordinator.sh/qosClass": "LS"}, {}, "/kubepods/burstable/podu-ls", 0.0)
    assert pre_run_pod_sandbox(env, CgroupExecutor(env.layout), pod, 0.0) == 1
    assert (pod_dir / "cpu.bvt_warp_ns").read_text().strip() == "2"
