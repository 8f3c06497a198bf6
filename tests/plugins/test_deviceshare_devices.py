"""DeviceShare beyond GPUs: RDMA and FPGA allocation, VFs, joint GPU+RDMA allocation, GPU topology scopes.

Table cases follow upstream ``deviceshare/device_allocator_test.go`` (``TestAutopilotAllocator`` and
``...WithExclusivePolicyAndRequiredScope``): the same node (8 GPUs, two per PCIe root, roots 0-1 on NUMA
node 0 and 2-3 on NUMA node 1; RDMA NICs minors 1-4, one per root, each with SR-IOV VFs), the same
hints. Each expected allocation is worked out by hand in the case's comment. Where upstream's newest
GPU allocator bin-packs by PCIe root without being asked (its ``allocateByDeviceTopology``), ours keeps
the existing GPU choice (score, then minor) unless the pod asks ``requiredTopologyScope``; those cases
say so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from app.cache.podinfo import parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.config import PluginSpec, SchedulerConfig
from app.framework.cyclestate import CycleState
from app.framework.interfaces import NodeBatch
from app.plugins.deviceshare.allocation import (
    AllocationError,
    GPUAllocation,
    format_device_allocations,
    parse_device_allocations,
)
from app.plugins.deviceshare.devices import DeviceError, VirtualFunction, parse_device_infos
from app.plugins.deviceshare.hints import HintError, parse_hints, parse_joint_allocate
from app.plugins.deviceshare.plugin import DeviceShare, _parse_pod
from app.plugins.deviceshare.request import DeviceRequestError, secondary_requests
from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.test_deviceshare import node, pod, setup

CORE, RATIO, MEM = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio", "koordinator.sh/gpu-memory"
RDMA, FPGA = "koordinator.sh/rdma", "koordinator.sh/fpga"
ANN = "scheduling.koordinator.sh/device-allocated"
HINT = "scheduling.koordinator.sh/device-allocate-hint"
JOINT = "scheduling.koordinator.sh/device-joint-allocate"
GI = 1 << 30
NIC_BUS = {1: "1f", 2: "90", 3: "51", 4: "b9"}


# ---------------------------------------------------------------------- builders
def rdma_nic(minor: int, pcie: str, numa: int, vfs: int = 4, healthy: bool = True) -> dict[str, Any]:
    bus = NIC_BUS.get(minor, f"{minor:02x}")
    dev: dict[str, Any] = {
        "type": "rdma",
        "labels": {"type": "fakeW"},
        "id": f"0000:{bus}:00.0",
        "minor": minor,
        "health": healthy,
        "resources": {RDMA: "100"},
        "topology": {"socketID": numa, "nodeID": numa, "pcieID": pcie},
    }
    if vfs:
        dev["vfGroups"] = [
            {
                "labels": {"type": "general"},
                "vfs": [{"minor": k, "busID": f"0000:{bus}:00.{k + 2}"} for k in range(vfs)],
            }
        ]
    return dev


def gpu_dev(minor: int, pcie: str, numa: int) -> dict[str, Any]:
    return {
        "type": "gpu",
        "id": f"GPU-{minor}",
        "minor": minor,
        "health": True,
        "resources": {CORE: "100", RATIO: "100", MEM: "80Gi"},
        "topology": {"socketID": numa, "nodeID": numa, "pcieID": pcie},
    }


def upstream_device(name: str = "n1", vfs: dict[int, int] | None = None, gpus: int = 8) -> dict[str, Any]:
    """``fakeDeviceCR``: 8 GPUs two per PCIe root 0..3 (roots 0,1 on NUMA 0, roots 2,3 on NUMA 1), RDMA
    NICs 1..4 one per root; ``vfs`` overrides the VF count per NIC minor (default 4)."""
    vfs = vfs or {}
    devs = [rdma_nic(m, str(m - 1), 0 if m <= 2 else 1, vfs.get(m, 4)) for m in range(1, 5)]
    devs += [gpu_dev(m, str(m // 2), 0 if m < 4 else 1) for m in range(gpus)]
    return device_obj(name, devs)


def device_obj(name: str, devs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name},
        "spec": {"devices": devs},
    }


def hints(rdma: dict[str, Any] | None = None, gpu: dict[str, Any] | None = None, **more: Any) -> str:
    out: dict[str, Any] = {}
    if rdma is not None:
        out["rdma"] = rdma
    if gpu is not None:
        out["gpu"] = gpu
    out.update(more)
    return orjson.dumps(out).decode()


def vf_hint(vf_type: str = "fakeG", **extra: Any) -> dict[str, Any]:
    """``setDefaultTestAllocateHints`` + ``allocateHintWithVFType``: NICs labelled fakeW, VFs general/<type>."""
    return {
        "selector": {"matchLabels": {"type": "fakeW"}},
        "vfSelector": {"matchExpressions": [{"key": "type", "operator": "In", "values": ["general", vf_type]}]},
        **extra,
    }


JOINT_GPU_RDMA = orjson.dumps({"deviceTypes": ["gpu", "rdma"]}).decode()


def allocate(cache: ClusterCache, plugin: DeviceShare, p: dict[str, Any], node_name: str) -> dict[str, Any]:
    """PreFilter, Filter on ``node_name``, Reserve there: the device-allocated value as parsed JSON (the
    Filter must agree with the Reserve)."""
    info = parse_pod(p)
    state = CycleState(time.time())
    pre = plugin.pre_filter(state, info)
    assert pre.is_success(), pre.message
    rows, _ = cache.table.rows_of([node_name])
    failed = plugin.filter_nodes(state, info, NodeBatch(rows, [node_name]))
    assert failed == {}, {k: v.message for k, v in failed.items()}
    assumed = cache.assume(info, node_name)
    status = plugin.reserve(state, assumed, node_name)
    assert status.is_success(), status.message
    entry = state.get("DeviceShare/allocation")
    return dict(orjson.loads(format_device_allocations({"gpu": entry[1], **entry[2]})))


def refused(cache: ClusterCache, plugin: DeviceShare, p: dict[str, Any], node_name: str) -> str:
    """The Filter answer on ``node_name`` as ``<code>: <reason>`` ("" when it passes)."""
    info = parse_pod(p)
    state = CycleState(time.time())
    pre = plugin.pre_filter(state, info)
    if not pre.is_success():
        return f"{pre.code.label}: {pre.message}"
    rows, _ = cache.table.rows_of([node_name])
    failed = plugin.filter_nodes(state, info, NodeBatch(rows, [node_name]))
    return "" if not failed else f"{failed[0].code.label}: {failed[0].message}"


def gpu_entry(minor: int) -> dict[str, Any]:
    return {"minor": minor, "resources": {CORE: "100", MEM: "80Gi", RATIO: "100"}, "id": f"GPU-{minor}"}


def rdma_entry(minor: int, vf: str | None = None, amount: str = "1", vf_minor: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"minor": minor, "resources": {RDMA: amount}, "id": f"0000:{NIC_BUS[minor]}:00.0"}
    if vf is not None:
        entry: dict[str, Any] = {"busID": vf}
        if vf_minor:
            entry = {"minor": vf_minor, "busID": vf}
        out["extension"] = {"vfs": [entry]}
    return out


def bound(name: str, node_name: str, value: dict[str, Any], requests: dict[str, str]) -> dict[str, Any]:
    return pod(name, requests, node_name=node_name, annotations={ANN: orjson.dumps(value).decode()})


# ---------------------------------------------------------------------- parsing
def test_device_infos_keep_topology_labels_and_vf_groups() -> None:
    infos = parse_device_infos(upstream_device())
    assert sorted(infos) == ["gpu", "rdma"]
    nic = infos["rdma"][2]
    assert (nic.id, nic.labels, nic.total()) == ("0000:90:00.0", {"type": "fakeW"}, {RDMA: 100})
    assert nic.topology is not None and (nic.topology.node_id, nic.topology.pcie_id) == (0, "1")
    assert [vf.bus_id for vf in nic.vf_groups[0].vfs][:2] == ["0000:90:00.2", "0000:90:00.3"]
    assert infos["gpu"][5].topology is not None and infos["gpu"][5].topology.pcie_id == "2"
    fpga = parse_device_infos(
        device_obj("f", [{"type": "fpga", "minor": 0, "health": False, "resources": {FPGA: "100"}}])
    )
    assert fpga["fpga"][0].total() == {}  # unhealthy: never allocated


@pytest.mark.parametrize(
    ("dev", "message"),
    [
        ({"type": "rdma", "minor": "1"}, "spec.devices[0].minor: expected an integer, got '1'"),
        ({"type": "rdma", "minor": 1, "topology": {"nodeID": "x"}}, "spec.devices[0].topology.nodeID"),
        ({"type": "rdma", "minor": 1, "vfGroups": {"vfs": []}}, "spec.devices[0].vfGroups: expected a list"),
        ({"type": "fpga", "minor": 1, "resources": {FPGA: "lots"}}, "spec.devices[0].resources"),
    ],
)
def test_malformed_device_entries_are_named(dev: dict[str, Any], message: str) -> None:
    with pytest.raises(DeviceError, match="Device d " + message.replace("[", r"\[").replace("]", r"\]")):
        parse_device_infos(device_obj("d", [dev]))


def test_annotation_writes_every_type_as_upstream_json_marshal() -> None:
    value = format_device_allocations(
        {
            "rdma": [GPUAllocation(1, {RDMA: 1}, "0000:1f:00.0", (VirtualFunction(0, "0000:1f:00.2"),))],
            "gpu": [GPUAllocation(0, {CORE: 100, RATIO: 100, MEM: 80 * GI}, "GPU-0")],
            "fpga": [GPUAllocation(3, {FPGA: 100}, "fpga-3")],
        }
    )
    # map keys sorted (fpga, gpu, rdma); fields minor, resources, id, extension; VF minor 0 omitted
    assert value == (
        '{"fpga":[{"minor":3,"resources":{"koordinator.sh/fpga":"100"},"id":"fpga-3"}],'
        '"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"80Gi",'
        '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-0"}],'
        '"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"1"},"id":"0000:1f:00.0",'
        '"extension":{"vfs":[{"busID":"0000:1f:00.2"}]}}]}'
    )
    parsed = parse_device_allocations(value)
    assert parsed["rdma"][0].vfs == (VirtualFunction(0, "0000:1f:00.2"),)
    assert parsed["fpga"][0].resources == {FPGA: 100}
    with pytest.raises(AllocationError, match=r"rdma\[0\].extension.vfs: expected a list"):
        parse_device_allocations('{"rdma":[{"minor":1,"extension":{"vfs":{}}}]}')


def test_secondary_requests_validate_whole_devices() -> None:
    assert secondary_requests({RDMA: 1, FPGA: 200, "cpu": 1000}) == {"rdma": 1, "fpga": 200}
    with pytest.raises(DeviceRequestError, match=r"^invalid resource unit koordinator\.sh/rdma: 150$"):
        secondary_requests({RDMA: 150})


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({HINT: "{not json"}, "invalid DeviceAllocateHint annotation, err: "),
        ({HINT: "[1]"}, "invalid DeviceAllocateHint annotation, err: expected a JSON object"),
        ({HINT: '{"rdma": 3}'}, "invalid DeviceAllocateHint annotation, err: rdma: expected an object"),
        ({HINT: '{"rdma": {"allocateStrategy": 1}}'}, "invalid DeviceAllocateHint annotation, err: allocateStrategy"),
        (
            {HINT: '{"rdma": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}'},
            'invalid Selector of DeviceHint, deviceType: rdma, err: "Near" is not a valid label selector operator',
        ),
        (
            {HINT: '{"rdma": {"vfSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}}'},
            "invalid VFSelector of DeviceHint, deviceType: rdma, err: for 'in', 'notin' operators",
        ),
        ({JOINT: "nope"}, "invalid DeviceJointAllocate annotation, err: "),
        ({JOINT: '{"deviceTypes": "gpu"}'}, "invalid DeviceJointAllocate annotation, err: deviceTypes"),
    ],
)
def test_malformed_hints_raise_upstream_messages(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(HintError) as exc:
        parse_hints(annotations)
        parse_joint_allocate(annotations)
    assert str(exc.value).startswith(message)


# ---------------------------------------------------------------------- TestAutopilotAllocator
def _autopilot_pod(name: str, gpus: int, rdma: int = 1, host_network: bool = False) -> dict[str, Any]:
    """The pod of upstream's table: ``rdma: 1`` (``100*rdmaWanted``), ``nvidia.com/gpu: gpus``; hints as
    its ``setDefaultTestAllocateHints``; joint [gpu, rdma] when it asks GPUs."""
    requests = {RDMA: str(rdma)}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    if host_network:
        ann = {HINT: hints(rdma={"selector": {"matchLabels": {"type": "fakeW"}}, "allocateStrategy": "ApplyForAll"})}
        ann[JOINT] = JOINT_GPU_RDMA
    elif gpus:
        ann = {HINT: hints(rdma=vf_hint("fakeG")), JOINT: JOINT_GPU_RDMA}
    else:
        ann = {HINT: hints(rdma=vf_hint("fakeC"))}
    return pod(name, requests, annotations=ann)


@pytest.mark.parametrize(
    ("gpus", "want_gpu", "want_rdma"),
    [
        # no GPU: the first NIC by score (all equal) then minor, its lowest VF bus id
        (0, [], [rdma_entry(1, "0000:1f:00.2")]),
        # GPU 0 on root 0: the NIC on root 0
        (1, [0], [rdma_entry(1, "0000:1f:00.2")]),
        # GPUs 0,1 on root 0: one root, one NIC
        (2, [0, 1], [rdma_entry(1, "0000:1f:00.2")]),
        # GPUs 0,1,2 span roots 0 and 1: up to one NIC per preferred root (maxDesiredCount 2)
        (3, [0, 1, 2], [rdma_entry(1, "0000:1f:00.2"), rdma_entry(2, "0000:90:00.2")]),
        (4, [0, 1, 2, 3], [rdma_entry(1, "0000:1f:00.2"), rdma_entry(2, "0000:90:00.2")]),
        (
            6,
            [0, 1, 2, 3, 4, 5],
            [rdma_entry(1, "0000:1f:00.2"), rdma_entry(2, "0000:90:00.2"), rdma_entry(3, "0000:51:00.2")],
        ),
        (
            8,
            list(range(8)),
            [rdma_entry(m, f"0000:{NIC_BUS[m]}:00.2") for m in range(1, 5)],
        ),
    ],
)
def test_autopilot_allocator_table(gpus: int, want_gpu: list[int], want_rdma: list[dict[str, Any]]) -> None:
    cache, plugin = setup([node("n1", 8), upstream_device()])
    got = allocate(cache, plugin, _autopilot_pod("p", gpus), "n1")
    want: dict[str, Any] = {"rdma": want_rdma}
    if want_gpu:
        want["gpu"] = [gpu_entry(m) for m in want_gpu]
    assert got == want


def test_autopilot_with_assigned_devices_takes_the_next_vf() -> None:
    # upstream "allocate 3 GPU and 2 VF with assigned devices": GPU 0 and NIC 1's first VF are taken;
    # GPUs 1,2,3 (roots 0,1) -> NICs 1 and 2; NIC 1 gives its next VF (bus .3, VF minor 1). The entries
    # keep the allocation order, as upstream writes them: NIC 2 (unused, LeastAllocated 100) before NIC 1 (99)
    assigned = {"gpu": [gpu_entry(0)], "rdma": [rdma_entry(1, "0000:1f:00.2")]}
    cache, plugin = setup(
        [node("n1", 8), upstream_device(), bound("old", "n1", assigned, {"nvidia.com/gpu": "1", RDMA: "1"})]
    )
    got = allocate(cache, plugin, _autopilot_pod("p", 3), "n1")
    assert got == {
        "gpu": [gpu_entry(1), gpu_entry(2), gpu_entry(3)],
        "rdma": [rdma_entry(2, "0000:90:00.2"), rdma_entry(1, "0000:1f:00.3", vf_minor=1)],
    }


def test_autopilot_two_gpus_with_assigned_gpu0_keeps_the_gpu_choice_unless_a_scope_is_required() -> None:
    # upstream "allocate 2 GPU and 1 VF with assigned devices" wants GPUs 2,3 (its GPU allocator bin-packs by
    # PCIe root unasked); ours keeps the plain GPU choice 1,2 (score, then minor) and so NICs on roots 0 and 1
    assigned = {"gpu": [gpu_entry(0)], "rdma": [rdma_entry(1, "0000:1f:00.2")]}
    objs = [node("n1", 8), upstream_device(), bound("old", "n1", assigned, {"nvidia.com/gpu": "1", RDMA: "1"})]
    cache, plugin = setup(objs)
    got = allocate(cache, plugin, _autopilot_pod("p", 2), "n1")
    assert [g["minor"] for g in got["gpu"]] == [1, 2]
    assert [r["minor"] for r in got["rdma"]] == [2, 1]  # allocation order: the unused NIC 2 scores higher
    # asked for one PCIe root, the GPUs are those of root 1 (root 0 has one free GPU), the NIC is root 1's
    cache, plugin = setup(objs)
    p = _autopilot_pod("q", 2)
    p["metadata"]["annotations"][HINT] = hints(rdma=vf_hint("fakeG"), gpu={"requiredTopologyScope": "PCIe"})
    got = allocate(cache, plugin, p, "n1")
    assert got == {"gpu": [gpu_entry(2), gpu_entry(3)], "rdma": [rdma_entry(2, "0000:90:00.2")]}


def test_autopilot_only_one_nic_has_vfs() -> None:
    # upstream "Only 1 RDMA and 4 PCIE with 2 GPUs Per PCIE": GPUs 0-3 prefer NICs 1 and 2, NIC 2 has no VF
    cache, plugin = setup([node("n1", 8), upstream_device(vfs={2: 0, 3: 0, 4: 0})])
    got = allocate(cache, plugin, _autopilot_pod("p", 4), "n1")
    assert got == {"gpu": [gpu_entry(m) for m in range(4)], "rdma": [rdma_entry(1, "0000:1f:00.2")]}


def test_autopilot_host_network_applies_for_all_nics() -> None:
    # upstream "1 GPU with hostNetwork and apply for all RDMAs": ApplyForAll leaves the joint group, every
    # NIC matching the selector is given rdma 1, no VF
    cache, plugin = setup([node("n1", 8), upstream_device()])
    got = allocate(cache, plugin, _autopilot_pod("p", 4, host_network=True), "n1")
    assert got == {"gpu": [gpu_entry(m) for m in range(4)], "rdma": [rdma_entry(m) for m in range(1, 5)]}


def test_pcie_level_exclusive_skips_roots_in_use() -> None:
    # "...WithExclusivePolicyAndRequiredScope": a pod holds a VF of NIC 1; with exclusivePolicy PCIeLevel
    # root 0 is not wholly free, so the next pod gets NIC 2 although NIC 1 still has VFs
    assigned = {"rdma": [rdma_entry(1, "0000:1f:00.2")]}
    cache, plugin = setup([node("n1", 8), upstream_device(), bound("old", "n1", assigned, {RDMA: "1"})])
    p = pod("p", {RDMA: "1"}, annotations={HINT: hints(rdma=vf_hint("fakeC", exclusivePolicy="PCIeLevel"))})
    assert allocate(cache, plugin, p, "n1") == {"rdma": [rdma_entry(2, "0000:90:00.2")]}
    # without the policy the least allocated NIC is still NIC 2 (LeastAllocated), but NIC 1 stays eligible:
    # a selector leaving only NIC 1 gets its next VF
    q = pod(
        "q",
        {RDMA: "1"},
        annotations={HINT: hints(rdma=vf_hint("fakeC") | {"selector": {"matchLabels": {"type": "fakeW"}}})},
    )
    cache2, plugin2 = setup(
        [node("n1", 8), upstream_device(vfs={2: 0, 3: 0, 4: 0}), bound("old", "n1", assigned, {RDMA: "1"})]
    )
    assert allocate(cache2, plugin2, q, "n1") == {"rdma": [rdma_entry(1, "0000:1f:00.3", vf_minor=1)]}


# ---------------------------------------------------------------------- strategies, shares, FPGA
def nic_node(name: str, nics: int = 2, vfs: int = 0) -> list[dict[str, Any]]:
    devs = [rdma_nic(m, str(m - 1), 0, vfs) for m in range(1, nics + 1)]
    return [node(name, 0), device_obj(name, devs)]


def test_whole_devices_shares_and_requests_as_count() -> None:
    cache, plugin = setup(nic_node("n1", nics=3))
    # 200 = two whole NICs of 100 each (LeastAllocated: all equal, by minor)
    assert allocate(cache, plugin, pod("a", {RDMA: "200"}), "n1") == {
        "rdma": [rdma_entry(1, amount="100"), rdma_entry(2, amount="100")]
    }
    # a share of 30: only NIC 3 is free
    assert allocate(cache, plugin, pod("b", {RDMA: "30"}), "n1") == {"rdma": [rdma_entry(3, amount="30")]}
    # no NIC has 100 left
    assert refused(cache, plugin, pod("c", {RDMA: "100"}), "n1") == "Unschedulable: Insufficient rdma devices"
    # RequestsAsCount: 1 device with 1 each (only NIC 3 has room)
    counted = {HINT: hints(rdma={"allocateStrategy": "RequestsAsCount"})}
    assert allocate(cache, plugin, pod("d", {RDMA: "1"}, annotations=counted), "n1") == {"rdma": [rdma_entry(3)]}
    # two devices asked, one has room
    assert refused(cache, plugin, pod("e", {RDMA: "2"}, annotations=counted), "n1") == (
        "Unschedulable: Insufficient rdma devices"
    )
    # DeviceLevel exclusive: 100 each
    cache, plugin = setup(nic_node("n1", nics=3))
    whole = {HINT: hints(rdma={"allocateStrategy": "RequestsAsCount", "exclusivePolicy": "DeviceLevel"})}
    assert allocate(cache, plugin, pod("f", {RDMA: "2"}, annotations=whole), "n1") == {
        "rdma": [rdma_entry(1, amount="100"), rdma_entry(2, amount="100")]
    }


def test_fpga_shares_and_unhealthy_devices() -> None:
    devs = [
        {"type": "fpga", "id": f"fpga-{m}", "minor": m, "health": m != 0, "resources": {FPGA: "100"}} for m in range(3)
    ]
    cache, plugin = setup([node("f1", 0), device_obj("f1", devs)])
    # minor 0 is unhealthy; LeastAllocated spreads shares over 1 and 2
    assert allocate(cache, plugin, pod("a", {FPGA: "60"}), "f1") == {
        "fpga": [{"minor": 1, "resources": {FPGA: "60"}, "id": "fpga-1"}]
    }
    assert allocate(cache, plugin, pod("b", {FPGA: "60"}), "f1") == {
        "fpga": [{"minor": 2, "resources": {FPGA: "60"}, "id": "fpga-2"}]
    }
    assert refused(cache, plugin, pod("c", {FPGA: "60"}), "f1") == "Unschedulable: Insufficient fpga devices"
    assert refused(cache, plugin, pod("d", {FPGA: "150"}), "f1") == (
        "UnschedulableAndUnresolvable: invalid resource unit koordinator.sh/fpga: 150"
    )


def test_nodes_without_the_type_or_without_vfs() -> None:
    cache, plugin = setup([*nic_node("n1", vfs=0), node("gpu-only", 2), upstream_device("gpu-only")])
    gpu_only_dev = device_obj("bare", [gpu_dev(0, "0", 0)])
    cache2, plugin2 = setup([node("bare", 1), gpu_only_dev, node("nodev", 0)])
    assert refused(cache2, plugin2, pod("a", {RDMA: "1"}), "bare") == (
        "UnschedulableAndUnresolvable: Insufficient rdma devices"
    )
    assert refused(cache2, plugin2, pod("a", {RDMA: "1"}), "nodev") == ""  # no Device: left to kubelet
    vf = pod("v", {RDMA: "1"}, annotations={HINT: hints(rdma={"vfSelector": {}})})
    assert refused(cache, plugin, vf, "n1") == "UnschedulableAndUnresolvable: Insufficient rdma VirtualFunctions"


def test_vfs_run_out() -> None:
    cache, plugin = setup(nic_node("n1", nics=1, vfs=2))
    ann = {HINT: hints(rdma={"vfSelector": {}})}
    assert allocate(cache, plugin, pod("a", {RDMA: "1"}, annotations=ann), "n1") == {
        "rdma": [rdma_entry(1, "0000:1f:00.2")]
    }
    assert allocate(cache, plugin, pod("b", {RDMA: "1"}, annotations=ann), "n1") == {
        "rdma": [rdma_entry(1, "0000:1f:00.3", vf_minor=1)]
    }
    assert refused(cache, plugin, pod("c", {RDMA: "1"}, annotations=ann), "n1") == (
        "Unschedulable: Insufficient rdma devices"
    )


# ---------------------------------------------------------------------- joint allocation
SAME_PCIE = orjson.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}).decode()


def test_same_pcie_joint_allocation_gives_one_nic_per_gpu_root() -> None:
    cache, plugin = setup([node("n1", 8), upstream_device()])
    # GPUs 0-3 sit on roots 0 and 1: SamePCIe raises the NIC count from 1 to 2, one per root
    p = pod("p", {"nvidia.com/gpu": "4", RDMA: "1"}, annotations={JOINT: SAME_PCIE})
    assert allocate(cache, plugin, p, "n1") == {
        "gpu": [gpu_entry(m) for m in range(4)],
        "rdma": [rdma_entry(1), rdma_entry(2)],
    }


def test_same_pcie_joint_allocation_violation() -> None:
    # NIC 2 (root 1) is unhealthy: GPUs 0-3 need NICs on roots 0 and 1, the second NIC comes from root 2
    dev = upstream_device()
    dev["spec"]["devices"][1]["health"] = False
    cache, plugin = setup([node("n1", 8), dev])
    p = pod("p", {"nvidia.com/gpu": "4", RDMA: "1"}, annotations={JOINT: SAME_PCIE})
    assert refused(cache, plugin, p, "n1") == "Unschedulable: node(s) Device Joint-Allocate rules violation"
    # without requiredScope the preference is best effort: NIC 1 is enough
    q = pod("q", {"nvidia.com/gpu": "4", RDMA: "1"}, annotations={JOINT: JOINT_GPU_RDMA})
    assert allocate(cache, plugin, q, "n1")["rdma"] == [rdma_entry(1), rdma_entry(3)]


def test_rdma_primary_joint_allocation_keeps_the_gpu_choice() -> None:
    cache, plugin = setup([node("n1", 8), upstream_device()])
    p = pod(
        "p",
        {"nvidia.com/gpu": "1", RDMA: "1"},
        annotations={JOINT: orjson.dumps({"deviceTypes": ["rdma", "gpu"]}).decode()},
    )
    assert allocate(cache, plugin, p, "n1") == {"gpu": [gpu_entry(0)], "rdma": [rdma_entry(1)]}


# ---------------------------------------------------------------------- GPU topology scopes
def test_gpu_required_topology_scope() -> None:
    # GPUs 0 and 2 are taken: root 0 has GPU 1 free, root 1 GPU 3, NUMA 0 has 1 and 3, NUMA 1 has 4-7
    used = {"gpu": [gpu_entry(0), gpu_entry(2)]}
    objs = [node("n1", 8), upstream_device(), bound("old", "n1", used, {"nvidia.com/gpu": "2"})]

    def gpus(scope: str, count: int) -> list[int] | str:
        cache, plugin = setup(objs)
        p = pod("p", {"nvidia.com/gpu": str(count)}, annotations={HINT: hints(gpu={"requiredTopologyScope": scope})})
        reason = refused(cache, plugin, p, "n1")
        if reason:
            return reason
        return [g["minor"] for g in allocate(cache, plugin, p, "n1")["gpu"]]

    # two GPUs under one root: roots 0, 1 have one free each; root 2 (GPUs 4,5) is the first whole one
    assert gpus("PCIe", 2) == [4, 5]
    # two GPUs in one NUMA node: a deeper scope beats bin packing; NUMA 0 only fits at its own level
    # (GPUs 1 and 3, depth 2), NUMA 1 fits inside root 2 (depth 3), so GPUs 4, 5
    assert gpus("NUMANode", 2) == [4, 5]
    # three GPUs in one NUMA node: NUMA 0 has two free, NUMA 1 gives its first three
    assert gpus("NUMANode", 3) == [4, 5, 6]
    # one GPU: the deepest scope wins, the first used root (root 0, GPU 1)
    assert gpus("PCIe", 1) == [1]
    # five GPUs cannot fit one NUMA node (4 each)
    assert gpus("NUMANode", 5) == "Unschedulable: Insufficient Topology Scoped GPU Devices"
    assert gpus("Node", 6) == [1, 3, 4, 5, 6, 7]
    # a GPU without topology
    dev = upstream_device()
    del dev["spec"]["devices"][-1]["topology"]
    cache, plugin = setup([node("n1", 8), dev])
    p = pod("p", {"nvidia.com/gpu": "1"}, annotations={HINT: hints(gpu={"requiredTopologyScope": "PCIe"})})
    assert refused(cache, plugin, p, "n1") == "UnschedulableAndUnresolvable: node(s) missing GPU Device Topology Tree"


def test_gpu_selector_hint_narrows_the_gpus() -> None:
    dev = upstream_device()
    for d in dev["spec"]["devices"]:
        if d["type"] == "gpu":
            d["labels"] = {"link": "nvlink" if d["minor"] >= 6 else "pcie"}
    cache, plugin = setup([node("n1", 8), dev])
    ann = {HINT: hints(gpu={"selector": {"matchLabels": {"link": "nvlink"}}})}
    assert [
        g["minor"] for g in allocate(cache, plugin, pod("p", {"nvidia.com/gpu": "2"}, annotations=ann), "n1")["gpu"]
    ] == [6, 7]
    assert refused(cache, plugin, pod("q", {"nvidia.com/gpu": "1"}, annotations=ann), "n1") == (
        "Unschedulable: Insufficient gpu devices"
    )


def test_plain_gpu_pods_do_not_take_the_per_node_path() -> None:
    # a GPU pod without RDMA/FPGA and without a narrowing GPU hint keeps the vectorised path
    assert _parse_pod(parse_pod(pod("p", {"nvidia.com/gpu": "1"}))).extra is None
    rdma_only_hint = {HINT: hints(rdma=vf_hint())}
    assert _parse_pod(parse_pod(pod("p", {"nvidia.com/gpu": "1"}, annotations=rdma_only_hint))).extra is None
    assert _parse_pod(parse_pod(pod("p", {"nvidia.com/gpu": "1", RDMA: "1"}))).extra is not None


# ---------------------------------------------------------------------- accounting
def test_bound_pods_hold_their_nics_and_vfs_until_they_go() -> None:
    assigned = {"rdma": [rdma_entry(1, "0000:1f:00.2"), rdma_entry(2, "0000:90:00.2")]}
    _, plugin = setup([node("n1", 8), upstream_device(), bound("old", "n1", assigned, {RDMA: "1"})])
    nd = plugin.devices.nodes["n1"]
    assert nd.other_used["rdma"] == {1: {RDMA: 1}, 2: {RDMA: 1}}
    assert nd.vf_used["rdma"] == {1: {"0000:1f:00.2"}, 2: {"0000:90:00.2"}}
    plugin.devices.release("uid-old")
    assert nd.other_used["rdma"] == {} and nd.vf_used["rdma"] == {}


# ---------------------------------------------------------------------- over HTTP
def test_rdma_and_joint_allocation_over_http(tmp_path: Path) -> None:
    n1 = node("n1", 8)
    n1["status"]["allocatable"][RDMA] = "400"  # as koord-manager advertises the healthy NICs
    joint = pod(
        "joint",
        {"nvidia.com/gpu": "2", RDMA: "1"},
        annotations={HINT: hints(rdma=vf_hint("fakeG")), JOINT: SAME_PCIE},
    )
    # the pending pod is in the cluster file: /bind binds only pods the source reported
    objs = [n1, upstream_device("n1"), node("plain", 2), device_obj("plain", [gpu_dev(0, "0", 0)]), joint]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(objs))
    # DeviceShare alone: NodeResourcesFit would refuse "plain" first (no koordinator.sh/rdma allocatable)
    config = SchedulerConfig((PluginSpec("DeviceShare", 1, {}),))
    with LiveServer(FileSource(tmp_path, poll_interval=0), config) as srv:
        c = srv.client
        r = c.post("/filter", json={"Pod": joint, "NodeNames": ["n1", "plain"]})
        assert r.status_code == 200
        body = r.json()
        assert body["NodeNames"] == ["n1"], body
        assert body["FailedAndUnresolvableNodes"] == {"plain": "Insufficient rdma devices"}, body
        r = c.post("/prioritize", json={"Pod": joint, "NodeNames": ["n1"]})
        assert r.status_code == 200
        r = c.post("/bind", json={"PodName": "joint", "PodNamespace": "default", "PodUID": "uid-joint", "Node": "n1"})
        assert r.json() == {"Error": ""}
        expected = (
            '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"80Gi",'
            '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-0"},{"minor":1,"resources":{"koordinator.sh/gpu-core":'
            '"100","koordinator.sh/gpu-memory":"80Gi","koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-1"}],'
            '"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"1"},"id":"0000:1f:00.0",'
            '"extension":{"vfs":[{"busID":"0000:1f:00.2"}]}}]}'
        )
        deadline = time.monotonic() + 5
        cached: dict[str, Any] = {}
        while time.monotonic() < deadline:
            cached = srv.service.cache.pod_objects.get("uid-joint") or {}
            if (cached.get("metadata") or {}).get("annotations", {}).get(ANN) == expected:
                break
            time.sleep(0.02)
        assert cached["metadata"]["annotations"][ANN] == expected

        # the next VF pod sees GPU 0,1 and NIC 1's first VF taken
        second = pod("second", {"nvidia.com/gpu": "2", RDMA: "1"}, annotations=joint["metadata"]["annotations"])
        r = c.post("/bind", json={"PodName": "second", "PodNamespace": "default", "PodUID": "uid-second", "Node": "n1"})
        assert r.json()["Error"]  # not in the cluster: bind refuses, nothing changes
        r = c.post("/filter", json={"Pod": second, "NodeNames": ["n1"]})
        assert r.json()["NodeNames"] == ["n1"], r.json()

        summary = c.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/n1").json()
        assert summary["allocateSet"]["rdma"] == {"default/joint": {"1": {RDMA: "1"}}}
        assert summary["deviceUsed"][RDMA] == "1"
        assert summary["deviceTotal"][RDMA] == "400"
        assert summary["deviceFreeDetail"]["rdma"]["1"] == {RDMA: "99"}

        # bad annotations: a clear Filter reason for every node, never a 500
        for ann, reason in [
            ({HINT: "{oops"}, "invalid DeviceAllocateHint annotation, err: "),
            ({JOINT: '{"deviceTypes": [1]}'}, "invalid DeviceJointAllocate annotation, err: deviceTypes"),
        ]:
            bad = pod("bad", {"nvidia.com/gpu": "1", RDMA: "1"}, annotations=ann)
            r = c.post("/filter", json={"Pod": bad, "NodeNames": ["n1", "plain"]})
            assert r.status_code == 200
            failed = r.json()["FailedAndUnresolvableNodes"]
            assert set(failed) == {"n1", "plain"}
            assert failed["n1"].startswith(reason)
            r = c.post("/prioritize", json={"Pod": bad, "NodeNames": ["n1"]})
            assert r.status_code == 200


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_filter_batch_picks_the_gpus_reserve_picks(strategy: str) -> None:
    # Filter chooses a joint pod's GPUs for the whole batch at once; on every node that must be the
    # choice Reserve makes node by node (random shares already placed)
    import random

    rng = random.Random(7)
    objs: list[dict[str, Any]] = []
    names = [f"n{i}" for i in range(12)]
    for i, name in enumerate(names):
        objs += [node(name, 8), upstream_device(name)]
        for k in range(rng.randrange(0, 6)):
            share = rng.choice([25, 50, 100])
            minor = rng.randrange(8)
            value = {"gpu": [{"minor": minor, "resources": {CORE: str(share), RATIO: str(share)}}]}
            objs.append(bound(f"old-{i}-{k}", name, value, {CORE: str(share), RATIO: str(share)}))
    args = {
        "scoringStrategy": {"type": strategy, "resources": [{"name": RATIO, "weight": 1}, {"name": RDMA, "weight": 1}]}
    }
    cache, plugin = setup(objs, args)
    asks = [{"nvidia.com/gpu": "2"}, {CORE: "25", RATIO: "25"}, {CORE: "50", RATIO: "50"}, {RATIO: "200"}]
    for gpus in asks:
        p = pod("p", {**gpus, RDMA: "1"}, annotations={JOINT: JOINT_GPU_RDMA})
        info = parse_pod(p)
        state = CycleState(time.time())
        assert plugin.pre_filter(state, info).is_success()
        rows, _ = cache.table.rows_of(names)
        batch = NodeBatch(rows, names)
        ps = plugin._pod_state(state, info)
        batched = plugin._batched_gpu_slots(state, info, ps, batch, None)
        assert batched is not None and ps.request is not None
        for pos, name in enumerate(names):
            assert batched[pos] == plugin._choose(info, ps.request, name, int(rows[pos])), (gpus, name)


def test_gpu_pods_with_malformed_annotations_fail_on_every_node() -> None:
    cache, plugin = setup([node("n1", 8), upstream_device()])
    for ann, reason in [
        ({JOINT: "nope"}, "UnschedulableAndUnresolvable: invalid DeviceJointAllocate annotation, err: "),
        ({HINT: '{"gpu": []}'}, "UnschedulableAndUnresolvable: invalid DeviceAllocateHint annotation, err: gpu: "),
    ]:
        assert refused(cache, plugin, pod("p", {"nvidia.com/gpu": "1"}, annotations=ann), "n1").startswith(reason)
    # a pod asking no device is not judged: its annotations are not read (upstream skips it at PreFilter)
    assert refused(cache, plugin, pod("cpu", {}, annotations={HINT: "{"}), "n1") == "Skip: "


def test_preemption_dry_run_counts_victims_nics_and_vfs_as_free() -> None:
    # one NIC with one VF, held by a victim; a preemptor asking the NIC (and a VF) fits only without it
    held = {"gpu": [gpu_entry(0)], "rdma": [rdma_entry(1, "0000:1f:00.2", amount="100")]}
    objs = [node("n1", 1), device_obj("n1", [gpu_dev(0, "0", 0), rdma_nic(1, "0", 0, vfs=1)])]
    objs.append(bound("victim", "n1", held, {"nvidia.com/gpu": "1", RDMA: "100"}))
    cache, plugin = setup(objs)
    p = pod(
        "p",
        {"nvidia.com/gpu": "1", RDMA: "100"},
        annotations={HINT: hints(rdma={"vfSelector": {}}), JOINT: SAME_PCIE},
    )
    info = parse_pod(p)
    state = CycleState(time.time())
    assert plugin.pre_filter(state, info).is_success()
    rows, _ = cache.table.rows_of(["n1"])
    assert plugin.filter_nodes(state, info, NodeBatch(rows, ["n1"]))[0].message == "Insufficient gpu devices"
    victim = parse_pod(objs[-1])
    assert plugin.filter_nodes(state, info, NodeBatch(rows, ["n1"], [[victim]])) == {}
    # the GPU alone given back is not enough: the NIC is still full
    gpu_victim_only = bound("gpu-victim", "n1", {"gpu": [gpu_entry(0)]}, {"nvidia.com/gpu": "1"})
    cache2, plugin2 = setup([*objs[:2], gpu_victim_only, bound("nic", "n1", {"rdma": held["rdma"]}, {RDMA: "100"})])
    state = CycleState(time.time())
    assert plugin2.pre_filter(state, info).is_success()
    rows, _ = cache2.table.rows_of(["n1"])
    failed = plugin2.filter_nodes(state, info, NodeBatch(rows, ["n1"], [[parse_pod(gpu_victim_only)]]))
    assert failed[0].message == "Insufficient rdma devices"
