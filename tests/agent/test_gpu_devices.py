"""GPU and RDMA discovery, health flips and the Device object: the fake NVML driven by the real H200 capture
and by a made-up 8-GPU / 4-NIC node, sysfs trees built in tmp, writers against the HTTP fake API server."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.collectors.gpu import GPUCollector
from agent.collectors.nvml import NVMLError, RecordedNVML, load_nvml
from agent.collectors.pci import sysfs_bus_id
from agent.collectors.rdma import discover_rdma, rdma_minor
from agent.states.device import APIDeviceWriter, DeviceReportError, FileDeviceWriter, device_object
from app.api.devicenames import gpu_model_label
from app.api.manifests import load_objects
from app.client.config import load_configuration
from app.client.sync import Client
from tests.agent.fake_nvml import (
    A100_MEMORY,
    H200_MEMORY,
    H200_UUID,
    FakeNVML,
    eight_gpu_capture,
    eight_gpu_sys,
    gpu_bus,
    h200_capture,
    h200_sys,
    nic_bus,
)
from tests.client.fake_apiserver import FakeAPIServer, status

DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- names and PCI ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("A100 SXM4 80GB", "A100-SXM4-80GB"),
        ("Tesla T4", "Tesla-T4"),
        ("GeForce RTX 2080 Ti", "GeForce-RTX-2080-Ti"),
    ],
)
def test_gpu_model_label_is_normalised_as_upstream(name: str, label: str) -> None:
    assert gpu_model_label(name) == label


def test_bus_ids_take_the_sysfs_form_and_bad_ones_are_refused() -> None:
    assert sysfs_bus_id("00000000:00:06.0") == "0000:00:06.0"
    assert sysfs_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert sysfs_bus_id("3b:00.1") == "0000:3b:00.1"
    with pytest.raises(ValueError, match="not a PCI bus id"):
        sysfs_bus_id("GPU-0")
    assert rdma_minor("mlx5_1") == 1 and rdma_minor("irdma0") == 0 and rdma_minor("ib") is None


# -- the H200 capture ---------------------------------------------------------------------------------------------


def test_h200_capture_gives_the_device_upstream_would_write(tmp_path: Path) -> None:
    h200_sys(tmp_path)
    collector = GPUCollector(FakeNVML(h200_capture()), sys_root=tmp_path)
    [gpu] = collector.discover()
    assert (gpu.uuid, gpu.minor, gpu.model, gpu.memory_total) == (H200_UUID, 0, "NVIDIA H200", H200_MEMORY)
    assert (gpu.bus_id, gpu.numa_node, gpu.pcie_root, gpu.healthy) == ("0000:00:06.0", -1, "pci0000:00", True)
    assert collector.driver_version == "580.159.04"
    obj = device_object("gpu-node", "uid-node", collector.gpus, discover_rdma(tmp_path), collector.driver_version)
    assert obj == {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {
            "name": "gpu-node",
            "labels": {
                "node.koordinator.sh/gpu-vendor": "nvidia",
                "node.koordinator.sh/gpu-model": "H200",
                "node.koordinator.sh/gpu-driver-version": "580.159.04",
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": "gpu-node",
                    "uid": "uid-node",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "id": H200_UUID,
                    "minor": 0,
                    "health": True,
                    # 150,754,820,096 bytes = 143,771 MiB, what nvidia-smi shows; no topology: NUMA unknown
                    "resources": {
                        "koordinator.sh/gpu-core": "100",
                        "koordinator.sh/gpu-memory": "143771Mi",
                        "koordinator.sh/gpu-memory-ratio": "100",
                    },
                }
            ]
        },
    }


def test_numa_node_comes_from_nvml_before_sysfs(tmp_path: Path) -> None:
    capture = h200_capture()
    capture["devices"][0]["numa_node"] = 1
    h200_sys(tmp_path)
    [gpu] = GPUCollector(FakeNVML(capture), sys_root=tmp_path).discover()
    assert gpu.numa_node == 1
    entry = device_object("n", None, [gpu], [], "")["spec"]["devices"][0]
    assert entry["topology"] == {"socketID": -1, "nodeID": 1, "pcieID": "pci0000:00", "busID": "0000:00:06.0"}


# -- the made-up 8-GPU / 4-NIC node -------------------------------------------------------------------------------


def test_eight_gpus_and_four_nics_sorted_by_type_then_minor(tmp_path: Path) -> None:
    eight_gpu_sys(tmp_path)
    collector = GPUCollector(FakeNVML(eight_gpu_capture()), sys_root=tmp_path)
    gpus = collector.discover()
    assert [g.minor for g in gpus] == list(range(8))
    nics = discover_rdma(tmp_path)
    assert [(n.minor, n.bus_id, n.ibdevs) for n in nics] == [(j, nic_bus(j), (f"mlx5_{j}",)) for j in range(4)]
    obj = device_object("big", None, gpus, nics, collector.driver_version)
    assert "ownerReferences" not in obj["metadata"]  # no Node uid known (embedded files)
    assert obj["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "A100-SXM4-80GB"
    devices = obj["spec"]["devices"]
    expected_order = [("gpu", m) for m in range(8)] + [("rdma", m) for m in range(4)]
    assert [(d["type"], d["minor"]) for d in devices] == expected_order
    minor0 = devices[0]  # NVML index 7: the last root (pci0000:80), NUMA node 1
    assert minor0["id"] == "GPU-00000007-aaaa-bbbb-cccc-dddddddddddd"
    assert minor0["resources"]["koordinator.sh/gpu-memory"] == "80Gi"
    assert minor0["topology"] == {"socketID": -1, "nodeID": 1, "pcieID": "pci0000:80", "busID": gpu_bus(7)}
    rdma = {d["minor"]: d for d in devices if d["type"] == "rdma"}
    assert rdma[0] == {
        "type": "rdma",
        "id": nic_bus(0),
        "minor": 0,
        "health": True,
        "resources": {"koordinator.sh/rdma": "100"},
        "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:17", "busID": nic_bus(0)},
    }
    vfs = [{"minor": -1, "busID": "0000:3f:00.2"}, {"minor": -1, "busID": "0000:3f:00.3"}]
    assert rdma[1]["vfGroups"] == [{"vfs": vfs}]
    assert rdma[2]["topology"]["nodeID"] == 1 and "vfGroups" not in rdma[2]
    assert rdma[3]["health"] is False  # port DOWN


# -- health -------------------------------------------------------------------------------------------------------


def test_a_gpu_that_stops_answering_is_unhealthy_until_it_answers_again(tmp_path: Path) -> None:
    eight_gpu_sys(tmp_path)
    nvml = FakeNVML(eight_gpu_capture())
    collector = GPUCollector(nvml, sys_root=tmp_path)
    collector.discover()
    nvml.failing = {7}  # minor 0
    gpus = collector.discover()
    assert [g.minor for g in gpus if not g.healthy] == [0]
    assert gpus[0].uuid == "GPU-00000007-aaaa-bbbb-cccc-dddddddddddd" and gpus[0].reason == "NVMLError"
    entry = device_object("n", None, gpus, [], "", now=0)["spec"]["devices"][0]
    assert entry["health"] is False
    assert entry["conditions"] == [
        {
            "type": "Healthy",
            "status": "False",
            "lastTransitionTime": "1970-01-01T00:00:00Z",
            "reason": "NVMLError",
            "message": "GPU 7: NVML_ERROR_GPU_IS_LOST",
        }
    ]
    nvml.failing = set()
    gpus = collector.discover()
    assert all(g.healthy for g in gpus)
    assert "conditions" not in device_object("n", None, gpus, [], "")["spec"]["devices"][0]


def test_critical_xid_marks_unhealthy_for_the_recovery_time_application_xids_do_not(tmp_path: Path) -> None:
    h200_sys(tmp_path)
    nvml = FakeNVML(h200_capture())
    clock = Clock()
    collector = GPUCollector(nvml, sys_root=tmp_path, clock=clock, xid_recovery_seconds=60)
    collector.discover()
    nvml.xid(H200_UUID, 13)  # graphics engine exception: the application's fault
    assert collector.discover()[0].healthy
    nvml.xid(H200_UUID, 79)  # fallen off the bus
    [gpu] = collector.discover()
    assert (gpu.healthy, gpu.reason) == (False, "Xid79")
    clock.now += 59
    assert not collector.discover()[0].healthy
    clock.now += 2
    assert collector.discover()[0].healthy
    nvml.xid("", 48)  # no device named: every GPU
    assert collector.discover()[0].reason == "Xid48"


def test_nvml_failing_altogether_keeps_known_gpus_as_unhealthy(tmp_path: Path) -> None:
    eight_gpu_sys(tmp_path)
    nvml = FakeNVML(eight_gpu_capture())
    collector = GPUCollector(nvml, sys_root=tmp_path)
    collector.discover()
    nvml.all_fail = True
    gpus = collector.discover()
    assert len(gpus) == 8 and not any(g.healthy for g in gpus)
    nvml.all_fail = False
    assert all(g.healthy for g in collector.discover())


def test_a_gpu_never_seen_answering_is_not_reported(tmp_path: Path) -> None:
    eight_gpu_sys(tmp_path)
    nvml = FakeNVML(eight_gpu_capture())
    nvml.failing = {0}
    gpus = GPUCollector(nvml, sys_root=tmp_path).discover()
    assert len(gpus) == 7 and 7 not in [g.minor for g in gpus]


def test_usage_sums_processes_per_gpu_and_per_pod(tmp_path: Path) -> None:
    h200_sys(tmp_path / "sys")
    capture = h200_capture()
    capture["devices"][0]["processes"] = [
        {"pid": 101, "used_memory": 1 << 30, "sm_util": 30},
        {"pid": 102, "used_memory": 2 << 30, "sm_util": 20},
        {"pid": 103, "used_memory": 1 << 20, "sm_util": 1},  # not in a pod
    ]
    proc = tmp_path / "proc"
    uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    for pid, line in (
        (101, f"0::/kubepods.slice/kubepods-pod{uid.replace('-', '_')}.slice/cri-containerd-abc.scope\n"),
        (102, f"12:cpu,cpuacct:/kubepods/besteffort/pod{uid}/def\n"),
        (103, "0::/system.slice/sshd.service\n"),
    ):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(line)
    collector = GPUCollector(FakeNVML(capture), sys_root=tmp_path / "sys", proc_root=proc)
    collector.discover()
    sample = collector.usage()
    assert sample.node == {0: (51, (3 << 30) + (1 << 20))}
    assert sample.pods == {uid: {0: (50, 3 << 30)}}


# -- NVML loading -------------------------------------------------------------------------------------------------


def test_load_nvml_without_the_package_or_the_driver_answers_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    nvml, why = load_nvml()
    assert nvml is None and "nvidia-ml-py is not installed" in why and "koordinator-py[gpu]" in why

    class NoDriver:
        class NVMLError(Exception):
            pass

        @staticmethod
        def nvmlInit() -> None:
            raise NoDriver.NVMLError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", NoDriver)
    nvml, why = load_nvml()
    assert nvml is None and "NVML is not available (NVML Shared Library Not Found)" in why


def test_recorded_nvml_refuses_a_capture_without_devices() -> None:
    with pytest.raises(ValueError, match="'devices' must be a list"):
        RecordedNVML({"driver": "1"})
    with pytest.raises(ValueError, match=r"devices\[0\]: missing uuid"):
        RecordedNVML({"devices": [{"minor": 0, "name": "x", "memory": {}, "pci_bus_id": "0:0.0"}]})
    with pytest.raises(NVMLError, match="no GPU at index 3"):
        RecordedNVML(h200_capture()).uuid(3)


def test_agent_without_nvidia_ml_py_runs_and_logs_one_line(tmp_path: Path) -> None:
    """The agent as a process, with pynvml unimportable: it keeps ticking, reports its NodeMetric, and says
    once why there are no GPUs."""
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    (cluster / "node.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
    (tmp_path / "cg" / "kubepods").mkdir(parents=True)
    code = "import sys; sys.modules['pynvml'] = None; sys.argv[0] = 'agent'; from agent.__main__ import main; main()"
    args = [
        "--node-name", "n1", "--cluster", str(cluster), "--nodemetric-dir", str(cluster / "metrics"),
        "--cgroup-root", str(tmp_path / "cg"), "--port", "0", "--interval", "0.2", "--report-interval", "0.5",
        "--sys-root", str(tmp_path / "sys"),
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (cluster / "metrics" / "nodemetric-n1.yaml").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert (cluster / "metrics" / "nodemetric-n1.yaml").exists(), err
    lines = [line for line in err.splitlines() if "GPU" in line or "nvidia-ml-py" in line]
    assert len(lines) == 1 and "GPU discovery off: nvidia-ml-py is not installed" in lines[0], err
    assert "Traceback" not in err
    assert not (cluster / "metrics" / "device-n1.yaml").exists()  # no devices, no writer call with content


# -- writers ------------------------------------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[FakeAPIServer, Client]]:
    from tests.client.conftest import write_kubeconfig

    fake = FakeAPIServer(tokens={"t0k3n"})
    cfg = load_configuration(write_kubeconfig(tmp_path / "kubeconfig", fake.url))
    with Client(cfg, timeout=5) as client:
        yield fake, client
    fake.close()


def _h200_device(tmp_path: Path, nvml: FakeNVML | None = None) -> tuple[GPUCollector, dict[str, Any]]:
    h200_sys(tmp_path)
    collector = GPUCollector(nvml or FakeNVML(h200_capture()), sys_root=tmp_path)
    collector.discover()
    return collector, device_object("gpu-node", "uid-1", collector.gpus, [], collector.driver_version, now=100)


def test_api_writer_creates_then_writes_only_changes_and_keeps_transition_times(
    tmp_path: Path, api: tuple[FakeAPIServer, Client]
) -> None:
    fake, client = api
    writer = APIDeviceWriter(client, sleep=lambda _s: None)
    nvml = FakeNVML(h200_capture())
    collector, obj = _h200_device(tmp_path, nvml)
    assert writer.write(obj) is True
    stored = fake.store[DEVICES]["gpu-node"]
    assert stored["spec"] == obj["spec"] and stored["metadata"]["labels"] == obj["metadata"]["labels"]
    assert [c.method for c in fake.calls()] == ["GET", "POST"]
    assert writer.write(device_object("gpu-node", "uid-1", collector.gpus, [], "580.159.04", now=200)) is False
    assert [c.method for c in fake.calls()] == ["GET", "POST", "GET"]
    nvml.failing = {0}
    collector.discover()
    assert writer.write(device_object("gpu-node", "uid-1", collector.gpus, [], "580.159.04", now=300)) is True
    stored = fake.store[DEVICES]["gpu-node"]
    assert stored["spec"]["devices"][0]["health"] is False
    assert stored["spec"]["devices"][0]["conditions"][0]["lastTransitionTime"] == "1970-01-01T00:05:00Z"
    # still unhealthy later: the condition keeps its transition time and nothing is written
    assert writer.write(device_object("gpu-node", "uid-1", collector.gpus, [], "580.159.04", now=900)) is False
    assert fake.calls()[-1].method == "GET"


def test_api_writer_retries_conflicts_and_429_and_reports_refusals(
    tmp_path: Path, api: tuple[FakeAPIServer, Client]
) -> None:
    fake, client = api
    _, obj = _h200_device(tmp_path)
    fake.seed(DEVICES, {**obj, "spec": {"devices": []}})
    path = f"{DEVICES}/gpu-node"
    fake.fail_once[("PUT", path)] = (409, status(409, "Conflict", "the object has been modified"), {})
    writer = APIDeviceWriter(client, sleep=lambda _s: None)
    assert writer.write(obj) is True
    assert [c.method for c in fake.calls()] == ["GET", "PUT", "GET", "PUT"]
    assert fake.store[DEVICES]["gpu-node"]["spec"] == obj["spec"]
    fake.fail_once[("GET", path)] = (429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "1"})
    obj2 = {**obj, "metadata": {**obj["metadata"], "labels": {}}}
    assert writer.write(obj2) is True
    assert "labels" not in fake.store[DEVICES]["gpu-node"]["metadata"]
    # created before the Node's uid was known: the owner is added even though the devices did not change
    del fake.store[DEVICES]["gpu-node"]["metadata"]["ownerReferences"]
    assert writer.write(obj2) is True
    assert fake.store[DEVICES]["gpu-node"]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert writer.write(obj2) is False
    fake.fail[("GET", path)] = (403, status(403, "Forbidden", 'devices "gpu-node" is forbidden'), {})
    with pytest.raises(DeviceReportError, match=r"Device gpu-node: HTTP 403: devices \"gpu-node\" is forbidden"):
        writer.write(obj)
    del fake.fail[("GET", path)]
    fake.fail[("PUT", path)] = (409, status(409, "Conflict", "the object has been modified"), {})
    with pytest.raises(DeviceReportError, match="conflict persisted after 5 tries"):
        writer.write(obj)


def test_file_writer_writes_next_to_the_nodemetric_only_when_changed(tmp_path: Path) -> None:
    collector, obj = _h200_device(tmp_path / "sys")
    out = tmp_path / "cluster" / "metrics"
    writer = FileDeviceWriter(out)
    assert writer.write(obj) is True
    stamp = (out / "device-gpu-node.yaml").stat().st_mtime_ns
    assert writer.write(device_object("gpu-node", "uid-1", collector.gpus, [], "580.159.04")) is False
    assert (out / "device-gpu-node.yaml").stat().st_mtime_ns == stamp
    loaded = load_objects(tmp_path / "cluster")["Device"]["gpu-node"]
    assert loaded["spec"]["devices"][0]["id"] == H200_UUID
    # a restarted agent reads the file back and does not rewrite an unchanged Device
    assert FileDeviceWriter(out).write(device_object("gpu-node", "uid-1", collector.gpus, [], "580.159.04")) is False
    (out / "device-gpu-node.yaml").unlink()
    assert writer.write(obj) is True


def test_file_writer_reports_an_unwritable_directory(tmp_path: Path) -> None:
    _, obj = _h200_device(tmp_path / "sys")
    (tmp_path / "file").write_text("x")
    with pytest.raises(DeviceReportError, match="cannot write"):
        FileDeviceWriter(tmp_path / "file" / "sub").write(obj)


def test_memory_total_is_reported_exactly(tmp_path: Path) -> None:
    eight_gpu_sys(tmp_path)
    gpus = GPUCollector(FakeNVML(eight_gpu_capture()), sys_root=tmp_path).discover()
    assert {g.memory_total for g in gpus} == {A100_MEMORY}
    logging.getLogger(__name__).debug("ok")


# -- the agent loop -----------------------------------------------------------------------------------------------


def test_agent_writes_the_device_and_reports_gpu_usage_in_its_nodemetric(tmp_path: Path) -> None:
    """Embedded mode: the Device file beside the NodeMetric; nodeUsage.devices and the pod's podUsage.devices
    carry SM utilisation, memory and its ratio of the GPU's total, as upstream's NodeMetric does."""
    import json

    from agent.daemon import Agent, AgentConfig
    from agent.evictor import RecordingEvictor
    from agent.reporter import FileMetricWriter
    from agent.states.providers import FileStates
    from tests.agent.test_units import v2_tree

    layout = v2_tree(tmp_path / "cg")
    uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "ml", "uid": uid},
        "spec": {"nodeName": "gpu-node", "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "qosClass": "BestEffort"},
    }
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node", "uid": "uid-gpu-node"}}
    (cluster / "objs.json").write_text(json.dumps({"kind": "List", "items": [node, pod]}))
    pod_dir = tmp_path / "cg" / "kubepods" / "besteffort" / f"pod{uid}"
    pod_dir.mkdir(parents=True)
    (pod_dir / "cpu.stat").write_text("usage_usec 1000\n")
    (pod_dir / "memory.current").write_text("1048576\n")
    (pod_dir / "memory.stat").write_text("inactive_anon 0\nactive_anon 1048576\nunevictable 0\ninactive_file 0\n")
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text(f"0::/kubepods/besteffort/pod{uid}/ctr\n")
    capture = h200_capture()
    capture["devices"][0]["processes"] = [{"pid": 4242, "used_memory": H200_MEMORY // 4, "sm_util": 40}]
    h200_sys(tmp_path / "sys")
    gpu = GPUCollector(FakeNVML(capture), sys_root=tmp_path / "sys", proc_root=proc)
    metrics_dir = cluster / "metrics"
    config = AgentConfig(node_name="gpu-node", states_interval=0, features=set(), sys_root=tmp_path / "sys")
    agent = Agent(
        config, layout, FileStates("gpu-node", cluster), FileMetricWriter(metrics_dir), RecordingEvictor("n", None),
        gpu=gpu, device_writer=FileDeviceWriter(metrics_dir),
    )  # fmt: skip
    for t in range(5):
        agent.tick(1000.0 + t)
    assert agent.report(1005.0, force=True)
    device = yaml.safe_load((metrics_dir / "device-gpu-node.yaml").read_text())
    assert device["metadata"]["ownerReferences"][0]["uid"] == "uid-gpu-node"
    assert device["spec"]["devices"][0]["id"] == H200_UUID
    metric = yaml.safe_load((metrics_dir / "nodemetric-gpu-node.yaml").read_text())
    expected = {
        "type": "gpu",
        "id": H200_UUID,
        "minor": 0,
        "health": True,
        "resources": {
            "koordinator.sh/gpu-core": "40",
            "koordinator.sh/gpu-memory": "36805376Ki",  # a quarter of 150,754,820,096 bytes
            "koordinator.sh/gpu-memory-ratio": "25",
        },
    }
    assert metric["status"]["nodeMetric"]["nodeUsage"]["devices"] == [expected]
    [pod_metric] = metric["status"]["podsMetric"]
    assert pod_metric["podUsage"]["devices"] == [expected]


def test_aggregated_node_usages_carry_gpu_entries_by_aggregation() -> None:
    """Upstream's queryNodeMetric adds the GPU entries to every aggregation (avg, p50, ..., p99) once the
    window is past its cold start."""
    from agent.collectors.gpu import GPUInfo
    from agent.metriccache import MetricCache
    from agent.qos.context import NODE_CPU, NODE_MEMORY
    from agent.reporter import CollectPolicy, build_status, gpu_memory_key, gpu_sm_key

    gpu = GPUInfo(0, H200_UUID, 0, "NVIDIA H200", H200_MEMORY, "0000:00:06.0", -1, "pci0000:00")
    cache = MetricCache(1.0, 1000.0)
    for t in range(400):
        cache.append(NODE_CPU, 1000.0 + t, 1.0)
        cache.append(NODE_MEMORY, 1000.0 + t, 1 << 30)
        cache.append(gpu_sm_key(0), 1000.0 + t, float(t % 100))  # 0..99, four times
        cache.append(gpu_memory_key(0), 1000.0 + t, H200_MEMORY / 2)
    status = build_status(cache, [], 1399.0, CollectPolicy(durations=("5m0s", "30m0s")), None, [gpu])
    assert status is not None
    five, thirty = status["nodeMetric"]["aggregatedNodeUsages"]
    p90 = five["usage"]["p90"]["devices"]
    assert [(d["id"], d["minor"]) for d in p90] == [(H200_UUID, 0)]
    assert int(p90[0]["resources"]["koordinator.sh/gpu-core"]) >= 85
    assert p90[0]["resources"]["koordinator.sh/gpu-memory-ratio"] == "50"
    assert int(five["usage"]["avg"]["devices"][0]["resources"]["koordinator.sh/gpu-core"]) < 60
    assert thirty["usage"]["avg"] == {}  # 400 s of samples: a 30 m window is still cold
    assert status["nodeMetric"]["nodeUsage"]["devices"][0]["resources"]["koordinator.sh/gpu-memory"] == "73610752Ki"
