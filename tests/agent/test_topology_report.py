"""The NodeResourceTopology the agent publishes: its content (hand-worked on the fake sysfs shapes), the
embedded file and the API object, each written only when it changed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from agent.cgroups import CgroupLayout
from agent.collectors.cputopology import MachineTopology, read_machine_topology
from agent.cpumanagerstate import CPUManagerStateError, pod_cpu_allocs, read_cpu_manager_entries
from agent.daemon import Agent, AgentConfig
from agent.evictor import RecordingEvictor
from agent.kubeletconfig import parse_kubelet_config
from agent.reporter import ReportError
from agent.states.providers import StatesProvider
from agent.topologyreport import (
    APITopologyWriter,
    FileTopologyWriter,
    TopologyStatus,
    build_topology_status,
)
from app.api.topology import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_RESOURCE_STATUS,
    parse_node_resource_topology,
)
from app.client.sync import Client
from tests.agent.fakesysfs import four_numa_no_ht, one_socket_eight_cores_ht, two_sockets_two_numa_ht
from tests.client.fake_apiserver import FakeAPIServer

NRT_PATH = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
NODE = {"metadata": {"name": "n1", "uid": "node-uid-1", "annotations": {}}}


def _machine(tmp_path: Path, shape: Any) -> MachineTopology:
    return read_machine_topology(shape(tmp_path / "sys"), tmp_path)


def _pod(name: str, cpuset: str | None) -> dict[str, Any]:
    annotations = {}
    if cpuset is not None:
        annotations["scheduling.koordinator.sh/resource-status"] = json.dumps({"cpuset": cpuset})
    return {"metadata": {"name": name, "namespace": "d", "uid": name, "annotations": annotations}}


def test_one_socket_report_is_upstreams_shape(tmp_path: Path) -> None:
    status = build_topology_status(_machine(tmp_path, one_socket_eight_cores_ht), None, [], None)
    detail = [{"id": i, "core": i % 8, "socket": 0, "node": 0} for i in range(16)]
    assert status.annotations == {
        "node.koordinator.sh/cpu-basic-info": '{"cpuModel":"unknown","hyperThreadEnabled":true}',
        "node.koordinator.sh/cpu-topology": json.dumps({"detail": detail}, separators=(",", ":")),
        "node.koordinator.sh/cpu-shared-pools": '[{"socket":0,"node":0,"cpuset":"0-15"}]',
        "kubelet.koordinator.sh/cpu-manager-policy": "{}",
        "node.koordinator.sh/pod-cpu-allocs": "null",
        "node.koordinator.sh/reservation": "{}",
        "node.koordinator.sh/system-qos-resource": "{}",
    }
    assert status.topology_policy == "None"
    q16, mem = {"capacity": "16", "allocatable": "16", "available": "16"}, "32Gi"
    assert status.zones == [
        {
            "name": "node-0",
            "type": "Node",
            "resources": [
                {"name": "cpu", **q16},
                {"name": "hugepages-1Gi", "capacity": "0", "allocatable": "0", "available": "0"},
                {"name": "hugepages-2Mi", "capacity": "0", "allocatable": "0", "available": "0"},
                {"name": "memory", "capacity": mem, "allocatable": mem, "available": mem},
            ],
        }
    ]


def test_two_numa_nodes_pools_leave_out_pod_cpusets_and_node_reserved_cpus(tmp_path: Path) -> None:
    machine = _machine(tmp_path, two_sockets_two_numa_ht)
    kubelet = parse_kubelet_config(
        {
            "cpuManagerPolicy": "static",
            "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
            "kubeReserved": {"cpu": "2"},
            "topologyManagerPolicy": "restricted",
        }
    )
    node = {"metadata": {"name": "n1", "annotations": {"node.koordinator.sh/reservation": '{"reservedCPUs":"31"}'}}}
    # "broken" and "half-read" are skipped: the annotation is read whole, as the cpuset strategy and the container
    # hooks read it (upstream's GetResourceStatus unmarshals it whole), so cpus 8-9 stay in node 1's pool
    half_read = _pod("half-read", "8-9")
    half_read["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = '{"cpuset":"8-9","numaNodeResources":"x"}'
    pods = [_pod("lsr", "2-3,18-19"), _pod("ls", None), _pod("broken", "nonsense"), half_read]
    status = build_topology_status(machine, kubelet, pods, node)
    # node 0 = cpus 0-7,16-23 less the LSR pod's; node 1 = 8-15,24-31 less the node's reserved cpu 31.
    # The kubelet's reserved cpus (0 and its sibling 16) stay in the pool, as upstream keeps them.
    assert json.loads(status.annotations[ANNOTATION_NODE_CPU_SHARED_POOLS]) == [
        {"socket": 0, "node": 0, "cpuset": "0-1,4-7,16-17,20-23"},
        {"socket": 1, "node": 1, "cpuset": "8-15,24-30"},
    ]
    assert status.annotations[ANNOTATION_KUBELET_CPU_MANAGER_POLICY] == (
        '{"policy":"static","options":{"full-pcpus-only":"true"},"reservedCPUs":"0,16"}'
    )
    assert status.annotations["node.koordinator.sh/reservation"] == '{"reservedCPUs":"31"}'
    assert status.topology_policy == "RestrictedContainerLevel"
    assert [(z["name"], z["resources"][0]["capacity"], z["resources"][3]["capacity"]) for z in status.zones] == [
        ("node-0", "16", "64Gi"),
        ("node-1", "16", "32Gi"),
    ]
    detail = json.loads(status.annotations[ANNOTATION_NODE_CPU_TOPOLOGY])["detail"]
    assert detail[24] == {"id": 24, "core": 8, "socket": 1, "node": 1}


def test_four_numa_nodes_and_a_reservation_by_cpu_count(tmp_path: Path) -> None:
    machine = _machine(tmp_path, four_numa_no_ht)
    node = {"metadata": {"annotations": {"node.koordinator.sh/reservation": '{"resources":{"cpu":"1500m"}}'}}}
    status = build_topology_status(machine, None, [], node)
    # ceil(1.5) = 2 cpus taken by topology: cores 0 and 1 (no hyper-threads)
    assert status.annotations["node.koordinator.sh/reservation"] == '{"resources":{"cpu":"1500m"},"reservedCPUs":"0-1"}'
    assert json.loads(status.annotations[ANNOTATION_NODE_CPU_SHARED_POOLS]) == [
        {"socket": 0, "node": 0, "cpuset": "2-3"},
        {"socket": 0, "node": 1, "cpuset": "4-7"},
        {"socket": 1, "node": 2, "cpuset": "8-11"},
        {"socket": 1, "node": 3, "cpuset": "12-15"},
    ]
    assert status.annotations["node.koordinator.sh/cpu-basic-info"] == '{"cpuModel":"unknown"}'
    assert [z["resources"][3]["capacity"] for z in status.zones] == ["16Gi", "16Gi", "16Gi", "8Gi"]


def test_the_published_object_parses_back_to_the_machine(tmp_path: Path) -> None:
    machine = _machine(tmp_path, two_sockets_two_numa_ht)
    status = build_topology_status(machine, None, [], NODE)
    writer = FileTopologyWriter(tmp_path / "out")
    assert writer.publish("n1", status, NODE)
    obj = yaml.safe_load(writer.path("n1").read_text())
    assert obj["apiVersion"] == "topology.node.k8s.io/v1alpha1" and obj["kind"] == "NodeResourceTopology"
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Koordinator"}
    assert obj["metadata"]["ownerReferences"][0]["uid"] == "node-uid-1"
    topo = parse_node_resource_topology(obj)
    assert (len(topo.cpus), topo.sockets, topo.cores, topo.threads_per_core) == (32, 2, 16, 2)
    assert topo.numa_nodes[1].cpus == machine.cpus_of_node(1)
    assert topo.numa_nodes[0].capacity["memory"] == 64 * 1024**3
    assert topo.numa_nodes[0].capacity["cpu"] == 16000


def test_the_file_is_written_only_when_it_changed(tmp_path: Path) -> None:
    machine = _machine(tmp_path, one_socket_eight_cores_ht)
    writer = FileTopologyWriter(tmp_path / "out")
    first = build_topology_status(machine, None, [], NODE)
    assert writer.publish("n1", first, NODE)
    path = writer.path("n1")
    inode = path.stat().st_ino
    assert not writer.publish("n1", build_topology_status(machine, None, [], NODE), NODE)
    assert path.stat().st_ino == inode  # not replaced
    # someone else's annotation on the file is kept through a real change
    obj = yaml.safe_load(path.read_text())
    obj["metadata"]["annotations"]["team"] = "x"
    path.write_text(yaml.safe_dump(obj))
    assert writer.publish("n1", build_topology_status(machine, None, [_pod("lse", "0-1")], NODE), NODE)
    obj = yaml.safe_load(path.read_text())
    assert obj["metadata"]["annotations"]["team"] == "x"
    assert json.loads(obj["metadata"]["annotations"][ANNOTATION_NODE_CPU_SHARED_POOLS])[0]["cpuset"] == "2-15"


def test_an_unwritable_directory_is_a_report_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    status = build_topology_status(_machine(tmp_path, one_socket_eight_cores_ht), None, [], None)
    with pytest.raises(ReportError, match="cannot write"):
        FileTopologyWriter(tmp_path / "file" / "sub").publish("n1", status, None)


# -- against the fake API server -------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[tuple[FakeAPIServer, Client]]:
    fake = FakeAPIServer()
    cfg = kubernetes.client.Configuration()
    cfg.host = fake.url
    try:
        with Client(cfg) as client:
            yield fake, client
    finally:
        fake.close()


def _writes(fake: FakeAPIServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests if r.method != "GET"]


def test_api_creates_the_object_then_writes_only_on_change(tmp_path: Path, api: tuple[FakeAPIServer, Client]) -> None:
    fake, client = api
    machine = _machine(tmp_path, two_sockets_two_numa_ht)
    writer = APITopologyWriter(client)
    assert writer.publish("n1", build_topology_status(machine, None, [], NODE), NODE)
    assert _writes(fake) == [("POST", NRT_PATH)]
    stored = fake.store[NRT_PATH]["n1"]
    assert stored["topologyPolicies"] == ["None"]
    assert [z["name"] for z in stored["zones"]] == ["node-0", "node-1"]
    assert stored["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": "node-uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    # the same status again: one GET, no write
    assert not writer.publish("n1", build_topology_status(machine, None, [], NODE), NODE)
    assert _writes(fake) == [("POST", NRT_PATH)]
    # a pod's cpuset changes the pools: a PUT with the stored resourceVersion; another reporter's zone stays
    with fake.lock:
        fake.store[NRT_PATH]["n1"]["zones"].append({"name": "gpu-0", "type": "Device"})
    changed = build_topology_status(machine, None, [_pod("lsr", "0-1")], NODE)
    assert writer.publish("n1", changed, NODE)
    assert _writes(fake) == [("POST", NRT_PATH), ("PUT", f"{NRT_PATH}/n1")]
    stored = fake.store[NRT_PATH]["n1"]
    assert json.loads(stored["metadata"]["annotations"][ANNOTATION_NODE_CPU_SHARED_POOLS])[0]["cpuset"] == ("2-7,16-23")
    assert [z["name"] for z in stored["zones"]] == ["gpu-0", "node-0", "node-1"]


def test_api_conflict_is_retried_once_and_errors_carry_the_status(
    tmp_path: Path, api: tuple[FakeAPIServer, Client]
) -> None:
    fake, client = api
    machine = _machine(tmp_path, one_socket_eight_cores_ht)
    writer = APITopologyWriter(client)
    writer.publish("n1", build_topology_status(machine, None, [], NODE), NODE)
    conflict = {"kind": "Status", "status": "Failure", "reason": "Conflict", "code": 409, "message": "modified"}
    fake.fail_once[("PUT", f"{NRT_PATH}/n1")] = (409, conflict, {})
    assert writer.publish("n1", build_topology_status(machine, None, [_pod("p", "0")], NODE), NODE)
    assert [m for m, _ in _writes(fake)] == ["POST", "PUT", "PUT"]
    forbidden = {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403, "message": "no way"}
    fake.fail[("GET", f"{NRT_PATH}/n1")] = (403, forbidden, {})
    with pytest.raises(ReportError, match=r"HTTP 403: .*no way"):
        writer.publish("n1", build_topology_status(machine, None, [], NODE), NODE)


# -- the agent loop ------------------------------------------------------------------------------------------


class _States(StatesProvider):
    def __init__(self) -> None:
        super().__init__("n1")
        self.node = dict(NODE)

    def refresh(self) -> bool:
        return False

    @property
    def description(self) -> str:
        return "test"


class _CountingWriter(FileTopologyWriter):
    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.calls: list[TopologyStatus] = []

    def publish(self, node_name: str, status: TopologyStatus, node: dict[str, Any] | None) -> bool:
        self.calls.append(status)
        return super().publish(node_name, status, node)


def test_the_agent_reports_on_state_changes_and_resyncs(tmp_path: Path) -> None:
    sys_root = four_numa_no_ht(tmp_path / "sys")
    (tmp_path / "cg" / "cpu").mkdir(parents=True)
    layout = CgroupLayout.detect(tmp_path / "cg", "kubepods")
    writer = _CountingWriter(tmp_path / "out")
    states = _States()
    config = AgentConfig(node_name="n1", sys_root=sys_root, proc=tmp_path)
    agent = Agent(config, layout, states, None, RecordingEvictor("n1", None, True), topology_writer=writer)
    assert agent.report_topology(1000.0)
    assert writer.path("n1").exists()
    assert not agent.report_topology(1001.0) and len(writer.calls) == 1  # nothing changed: not even compared
    states.pods = [_pod("lsr", "4-5")]
    agent.generation += 1
    assert agent.report_topology(1002.0) and len(writer.calls) == 2
    agent.generation += 1  # states rebuilt, same content: no publish
    assert not agent.report_topology(1003.0) and len(writer.calls) == 2
    # after the resync interval the stored object is compared again (and repaired if someone edited it)
    writer.path("n1").unlink()
    assert agent.report_topology(1002.0 + 601) and len(writer.calls) == 3
    assert agent.metrics.topology_reports.labels(result="written")._value.get() == 3


# -- koord agent, embedded ------------------------------------------------------------------------------------


def test_cli_refuses_a_bad_kubelet_config(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli.main import cli

    bad = tmp_path / "kubelet.yaml"
    bad.write_text("cpuManagerPolicy: dynamic\n")
    res = CliRunner().invoke(
        cli, ["agent", "--node-name", "n1", "--cluster", str(tmp_path), "--kubelet-config", str(bad), "--port", "0"]
    )
    assert res.exit_code == 2
    assert "--kubelet-config" in res.output and "cpuManagerPolicy: expected none or static" in res.output


def test_embedded_agent_writes_the_file_the_scheduler_reads(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    sys_root = two_sockets_two_numa_ht(tmp_path / "sys")
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    (cluster / "node.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node", **NODE}))
    (tmp_path / "cg" / "cpu").mkdir(parents=True)
    kubelet = tmp_path / "kubelet.yaml"
    kubelet.write_text("kind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: 0-1\n")
    args = [sys.executable, "-m", "agent", "--node-name", "n1", "--cluster", str(cluster), "--nodemetric-dir",
            str(cluster), "--sys-root", str(sys_root), "--kubelet-config", str(kubelet), "--cgroup-root",
            str(tmp_path / "cg"), "--proc-root", str(tmp_path), "--port", "0", "--interval", "0.2"]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path = cluster / "noderesourcetopology-n1.yaml"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not path.exists() and proc.poll() is None:
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=20)[0]
    assert path.exists(), out
    topo = parse_node_resource_topology(yaml.safe_load(path.read_text()))
    assert (topo.sockets, topo.cores, topo.threads_per_core, sorted(topo.numa_nodes)) == (2, 16, 2, [0, 1])
    assert topo.kubelet_policy.policy == "static" and topo.kubelet_reserved == {0, 1}


# -- cpus of the kubelet's static CPU manager ----------------------------------------------------------------


def _state_file(root: Path, entries: dict[str, dict[str, str]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    body = {"policyName": "static", "defaultCpuSet": "0-1,6-19,22-31", "entries": entries, "checksum": 1}
    (root / "cpu_manager_state").write_text(json.dumps(body))


def test_kubelet_allocations_are_reported_and_leave_the_pool(tmp_path: Path) -> None:
    machine = _machine(tmp_path, two_sockets_two_numa_ht)
    _state_file(
        tmp_path / "kubelet",
        {
            "g1": {"app": "4-5", "sidecar": "20-21"},  # a Guaranteed pod of the kubelet's static policy
            "lsr": {"app": "2-3"},  # Koordinator's own cpuset pod: not the kubelet's
            "ls": {"app": "9"},  # LS pods share the pool: not the kubelet's either
            "zz-gone": {"app": "10-11", "bad": "x-y"},  # no such pod (yet): still held
        },
    )
    lsr = _pod("lsr", "2-3")
    ls = _pod("ls", None)
    ls["metadata"]["labels"] = {"koordinator.sh/qosClass": "LS"}
    pods = [_pod("g1", None), lsr, ls]
    entries = read_cpu_manager_entries(tmp_path / "kubelet")
    allocs = pod_cpu_allocs(entries, pods)
    assert allocs == [
        {"namespace": "d", "name": "g1", "uid": "g1", "cpuset": "4-5,20-21", "managedByKubelet": True},
        {"uid": "zz-gone", "cpuset": "10-11", "managedByKubelet": True},
    ]
    status = build_topology_status(machine, parse_kubelet_config({"cpuManagerPolicy": "static"}), pods, None, allocs)
    assert json.loads(status.annotations["node.koordinator.sh/pod-cpu-allocs"]) == allocs
    assert json.loads(status.annotations[ANNOTATION_NODE_CPU_SHARED_POOLS]) == [
        {"socket": 0, "node": 0, "cpuset": "0-1,6-7,16-19,22-23"},
        {"socket": 1, "node": 1, "cpuset": "8-9,12-15,24-31"},
    ]


def test_missing_or_empty_state_is_no_allocation_and_garbage_is_an_error(tmp_path: Path) -> None:
    assert read_cpu_manager_entries(tmp_path / "nowhere") == {}
    (tmp_path / "cpu_manager_state").write_text("")
    assert read_cpu_manager_entries(tmp_path) == {}
    (tmp_path / "cpu_manager_state").write_text('{"policyName":"none","defaultCpuSet":"","checksum":1}')
    assert read_cpu_manager_entries(tmp_path) == {}
    (tmp_path / "cpu_manager_state").write_text("{oops")
    with pytest.raises(CPUManagerStateError, match="cpu_manager_state: not JSON"):
        read_cpu_manager_entries(tmp_path)
    (tmp_path / "cpu_manager_state").write_text('{"entries":{"u":"0-1"}}')
    with pytest.raises(CPUManagerStateError, match="entries must map pod uids"):
        read_cpu_manager_entries(tmp_path)


def test_the_agent_reads_the_state_under_the_static_policy_only(tmp_path: Path) -> None:
    sys_root = one_socket_eight_cores_ht(tmp_path / "sys")
    (tmp_path / "cg" / "cpu").mkdir(parents=True)
    layout = CgroupLayout.detect(tmp_path / "cg", "kubepods")
    kubelet_root = tmp_path / "kubelet"
    _state_file(kubelet_root, {"g1": {"app": "6-7"}})
    config = AgentConfig(node_name="n1", sys_root=sys_root, proc=tmp_path, kubelet_root=kubelet_root)
    writer = FileTopologyWriter(tmp_path / "out")
    static = parse_kubelet_config({"cpuManagerPolicy": "static"})
    evictor = RecordingEvictor("n1", None, True)
    agent = Agent(config, layout, _States(), None, evictor, topology_writer=writer, kubelet_config=static)
    assert agent.report_topology(1000.0)
    annotations = yaml.safe_load(writer.path("n1").read_text())["metadata"]["annotations"]
    assert json.loads(annotations["node.koordinator.sh/pod-cpu-allocs"])[0]["cpuset"] == "6-7"
    # a corrupt checkpoint fails the round (as upstream) and is retried; the last object stays
    (kubelet_root / "cpu_manager_state").write_text("{oops")
    agent.generation += 1
    assert not agent.report_topology(1001.0)
    assert agent.metrics.topology_reports.labels(result="failed")._value.get() == 1
    # under the none policy the checkpoint is not read at all
    none = Agent(
        config, layout, _States(), None, evictor, topology_writer=writer, kubelet_config=parse_kubelet_config({})
    )
    assert none.report_topology(1002.0)
    annotations = yaml.safe_load(writer.path("n1").read_text())["metadata"]["annotations"]
    assert annotations["node.koordinator.sh/pod-cpu-allocs"] == "null"


def test_system_qos_cpus_are_published_and_leave_the_shared_pool_when_exclusive(tmp_path: Path) -> None:
    """Node annotation system-qos-resource {"cpuset":"0-1"}: published normalised, and cpus 0-1 leave the pool
    (exclusive by default); with cpusetExclusive false they stay shared; a malformed one is ignored as {}."""
    machine = _machine(tmp_path, one_socket_eight_cores_ht)

    def status_for(value: str) -> dict[str, str]:
        node = {"metadata": {"name": "n1", "annotations": {"node.koordinator.sh/system-qos-resource": value}}}
        return build_topology_status(machine, None, [], node).annotations

    exclusive = status_for('{"cpuset":"1,0"}')
    assert exclusive["node.koordinator.sh/system-qos-resource"] == '{"cpuset":"0-1"}'
    assert exclusive["node.koordinator.sh/cpu-shared-pools"] == '[{"socket":0,"node":0,"cpuset":"2-15"}]'
    shared = status_for('{"cpuset":"0-1","cpusetExclusive":false}')
    assert shared["node.koordinator.sh/cpu-shared-pools"] == '[{"socket":0,"node":0,"cpuset":"0-15"}]'
    assert status_for('{"cpuset":"1-0"}')["node.koordinator.sh/system-qos-resource"] == "{}"


def test_cpu_basic_info_names_the_cpu_as_upstream(tmp_path: Path) -> None:
    """Not ``{}`` on a real host: model and vendor from /proc/cpuinfo, turbo from intel_pstate, as CPUBasicInfo."""
    (tmp_path / "cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz\n\n"
        "processor\t: 1\nvendor_id\t: OtherVendor\nmodel name\t: Other\n"
    )
    sys_root = one_socket_eight_cores_ht(tmp_path / "sys")
    (sys_root / "devices/system/cpu/intel_pstate").mkdir(parents=True)
    (sys_root / "devices/system/cpu/intel_pstate/no_turbo").write_text("0\n")
    status = build_topology_status(read_machine_topology(sys_root, tmp_path), None, [], None)
    assert json.loads(status.annotations["node.koordinator.sh/cpu-basic-info"]) == {
        "cpuModel": "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz",
        "hyperThreadEnabled": True,
        "turboEnabled": True,
        "vendorID": "GenuineIntel",
    }
