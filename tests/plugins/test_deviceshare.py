"""DeviceShare: request validation, allocation tables, annotation format, fragmentation, HTTP and REST.

Cases follow upstream ``deviceshare/utils_test.go``, ``plugin_test.go`` and ``device_allocator_test.go``
where they exist (messages, conversions, minor choice), the FGD reference for fragmentation.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from app.cache.snapshot import ClusterCache
from app.framework.config import ArgsError, PluginSpec, SchedulerConfig
from app.framework.handle import Handle
from app.framework.interfaces import NodeBatch
from app.plugins.deviceshare.allocation import GPUAllocation, format_allocations, parse_allocations
from app.plugins.deviceshare.fragmentation import PodShape, Workload, best_placement, node_fragmentation
from app.plugins.deviceshare.names import GPU_RESOURCE_NAMES
from app.plugins.deviceshare.plugin import DeviceShare, new_device_share
from app.plugins.deviceshare.request import DeviceRequestError, gpu_request
from app.sources.events import Event, EventType
from app.sources.files import FileSource
from tests.conftest import LiveServer

GI = 1 << 30
CORE, RATIO, MEM = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio", "koordinator.sh/gpu-memory"
ANN = "scheduling.koordinator.sh/device-allocated"


# ---------------------------------------------------------------------- builders
def node(name: str, gpus: int, model: str = "V100", cpu: str = "64", memory: str = "256Gi") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
    alloc.update({CORE: str(100 * gpus), RATIO: str(100 * gpus), MEM: f"{16 * gpus}Gi"})
    labels = {"node.koordinator.sh/gpu-model": model}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc},
    }


def device(name: str, gpus: int, unhealthy: tuple[int, ...] = (), memory: str = "16Gi") -> dict[str, Any]:
    devs = [
        {
            "type": "gpu",
            "id": f"GPU-{name}-{m}",
            "minor": m,
            "health": m not in unhealthy,
            "resources": {CORE: "100", RATIO: "100", MEM: memory},
        }
        for m in range(gpus)
    ]
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name},
        "spec": {"devices": devs},
    }


def pod(
    name: str, requests: dict[str, str], node_name: str = "", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", **requests}
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def setup(objs: list[dict[str, Any]], args: dict[str, Any] | None = None) -> tuple[ClusterCache, DeviceShare]:
    cache = ClusterCache()
    for obj in objs:
        cache.apply(Event(obj["kind"], EventType.ADDED, obj))
    return cache, new_device_share(args or {}, Handle(cache))


def run_filter(cache: ClusterCache, plugin: DeviceShare, p: dict[str, Any], names: list[str]) -> dict[str, str]:
    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState

    info = parse_pod(p)
    state = CycleState(time.time())
    pre = plugin.pre_filter(state, info)
    if pre.is_skip():  # no GPU request: the framework does not run the plugin's Filter
        return {}
    if not pre.is_success():
        return {name: f"{pre.code.label}: {pre.message}" for name in names}
    rows, _ = cache.table.rows_of(names)
    failed = plugin.filter_nodes(state, info, NodeBatch(rows, names))
    return {names[i]: f"{s.code.label}: {s.message}" for i, s in failed.items()}


def reserve(cache: ClusterCache, plugin: DeviceShare, p: dict[str, Any], node_name: str) -> list[int]:
    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState

    info = parse_pod(p)
    state = CycleState(time.time())
    assert plugin.pre_filter(state, info).is_success()
    assumed = cache.assume(info, node_name)
    status = plugin.reserve(state, assumed, node_name)
    assert status.is_success(), status.message
    held = plugin.devices.allocations_of(assumed.uid)
    assert held is not None
    return [a.minor for a in held[1]]


# ---------------------------------------------------------------------- requests
@pytest.mark.parametrize(
    ("requests", "count", "per_gpu", "shared"),
    [
        ({"nvidia.com/gpu": 2}, 2, {CORE: 100, RATIO: 100}, False),
        ({"koordinator.sh/gpu": 50}, 1, {CORE: 50, RATIO: 50}, True),
        ({"koordinator.sh/gpu": 200}, 2, {CORE: 100, RATIO: 100}, False),
        ({CORE: 50, RATIO: 50}, 1, {CORE: 50, RATIO: 50}, True),
        ({CORE: 200, RATIO: 200}, 2, {CORE: 100, RATIO: 100}, False),
        ({MEM: 8 * GI}, 1, {MEM: 8 * GI}, True),
        ({RATIO: 100}, 1, {RATIO: 100}, False),
        ({"koordinator.sh/gpu.shared": 2, CORE: 100, RATIO: 100}, 2, {CORE: 50, RATIO: 50}, True),
    ],
)
def test_gpu_requests_convert_as_upstream(
    requests: dict[str, int], count: int, per_gpu: dict[str, int], shared: bool
) -> None:
    req = gpu_request(requests)
    assert req is not None
    assert (req.count, req.per_gpu, req.shared) == (count, per_gpu, shared)


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        ({CORE: 50}, "invalid resource device requests: [koordinator.sh/gpu-core]"),
        ({"koordinator.sh/gpu": 150}, "invalid resource unit koordinator.sh/gpu: 150"),
        (
            {CORE: 150, RATIO: 150},
            "invalid resource device requests: [koordinator.sh/gpu-core koordinator.sh/gpu-memory-ratio]",
        ),
        ({"nvidia.com/gpu": 1, CORE: 50}, "invalid resource device requests: [koordinator.sh/gpu-core nvidia.com/gpu]"),
        (
            {"koordinator.sh/gpu.shared": 2, CORE: 101, RATIO: 100},
            "invalid resource device requests: [koordinator.sh/gpu-core koordinator.sh/gpu-memory-ratio "
            "koordinator.sh/gpu.shared]",
        ),
    ],
)
def test_invalid_gpu_requests_get_upstream_messages(requests: dict[str, int], message: str) -> None:
    with pytest.raises(DeviceRequestError) as exc:
        gpu_request(requests)
    assert str(exc.value) == message


def test_no_gpu_request_is_none() -> None:
    assert gpu_request({"cpu": 1000, "memory": GI}) is None
    assert gpu_request({}) is None
    assert gpu_request({"cpu": 1000, "koordinator.sh/gpu-core": 0}) is None  # zero asks for nothing


@pytest.mark.parametrize("name", GPU_RESOURCE_NAMES)
def test_every_gpu_resource_name_is_read(name: str) -> None:
    """The no-GPU shortcut (issue 29) knows every GPU resource name: each, beside cpu and memory, is a GPU
    request (or an invalid one), never None."""
    with contextlib.suppress(DeviceRequestError):
        assert gpu_request({"cpu": 1000, "memory": GI, name: 100}) is not None


# ---------------------------------------------------------------------- annotation format
def test_annotation_format_matches_upstream() -> None:
    allocs = [GPUAllocation(0, {CORE: 100, MEM: 16 * GI, RATIO: 100}, "GPU-8c25")]
    value = format_allocations(allocs)
    assert value == (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"16Gi",'
        '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-8c25"}]}'
    )
    assert parse_allocations(value) == allocs
    assert format_allocations([GPUAllocation(1, {RATIO: 1000, MEM: 1000})]) == (
        '{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-memory":"1000","koordinator.sh/gpu-memory-ratio":"1k"}}]}'
    )


# ---------------------------------------------------------------------- filter / reserve tables
def test_filter_table() -> None:
    objs = [node("n-free", 2), device("n-free", 2), node("n-sick", 2), device("n-sick", 2, unhealthy=(0, 1))]
    objs += [node("n-nodev", 2), node("n-empty", 0), device("n-empty", 0)]
    objs += [node("n-half", 2), device("n-half", 2)]
    objs += [
        pod(
            "user",
            {CORE: "70", RATIO: "70"},
            "n-half",
            {ANN: format_allocations([GPUAllocation(0, {CORE: 70, RATIO: 70})])},
        )
    ]
    cache, plugin = setup(objs)
    names = ["n-free", "n-sick", "n-nodev", "n-empty", "n-half"]
    insufficient = "Unschedulable: Insufficient gpu devices"
    unresolvable = "UnschedulableAndUnresolvable: Insufficient gpu devices"
    # a share fits wherever one healthy GPU has room; unhealthy GPUs never count; no Device = pass
    assert run_filter(cache, plugin, pod("p", {CORE: "50", RATIO: "50"}), names) == {
        "n-sick": insufficient,
        "n-empty": unresolvable,
    }
    # two whole GPUs need two fully free cards: n-half has one card 70% used
    assert run_filter(cache, plugin, pod("p", {"nvidia.com/gpu": "2"}), names) == {
        "n-sick": insufficient,
        "n-empty": unresolvable,
        "n-half": insufficient,
    }
    # invalid requests fail every node with upstream's message
    assert run_filter(cache, plugin, pod("p", {CORE: "50"}), ["n-free"]) == {
        "n-free": "UnschedulableAndUnresolvable: invalid resource device requests: [koordinator.sh/gpu-core]"
    }
    # pods without GPU requests are untouched
    assert run_filter(cache, plugin, pod("p", {}), names) == {}


def test_reserve_spreads_with_least_allocated_and_packs_with_most_allocated() -> None:
    share = {CORE: "30", RATIO: "30"}
    used = {ANN: format_allocations([GPUAllocation(1, {CORE: 50, RATIO: 50, MEM: 8 * GI})])}
    base = [node("n", 4), device("n", 4), pod("old", {CORE: "50", RATIO: "50"}, "n", used)]
    cache, plugin = setup(base)
    assert reserve(cache, plugin, pod("a", share), "n") == [0]  # LeastAllocated (default): emptiest, lowest minor
    cache, plugin = setup(
        base, {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": RATIO, "weight": 1}]}}
    )
    assert reserve(cache, plugin, pod("a", share), "n") == [1]  # binpack onto the used card
    assert reserve(cache, plugin, pod("b", {"nvidia.com/gpu": "2"}), "n") == [0, 2]
    # accounted at once: the next filter sees the card full
    assert run_filter(cache, plugin, pod("c", {"nvidia.com/gpu": "2"}), ["n"]) == {
        "n": "Unschedulable: Insufficient gpu devices"
    }


def test_unreserve_and_deleted_pods_release_gpus() -> None:
    cache, plugin = setup([node("n", 1), device("n", 1)])
    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState

    p = pod("a", {"nvidia.com/gpu": "1"})
    info = parse_pod(p)
    state = CycleState(0.0)
    plugin.pre_filter(state, info)
    assumed = cache.assume(info, "n")
    assert plugin.reserve(state, assumed, "n").is_success()
    assert run_filter(cache, plugin, pod("b", {"nvidia.com/gpu": "1"}), ["n"]) != {}
    plugin.unreserve(state, assumed, "n")
    assert run_filter(cache, plugin, pod("b", {"nvidia.com/gpu": "1"}), ["n"]) == {}
    bound = pod(
        "a", {"nvidia.com/gpu": "1"}, "n", {ANN: format_allocations([GPUAllocation(0, {CORE: 100, RATIO: 100})])}
    )
    cache.apply(Event("Pod", EventType.MODIFIED, bound))
    assert run_filter(cache, plugin, pod("b", {"nvidia.com/gpu": "1"}), ["n"]) != {}
    cache.apply(Event("Pod", EventType.DELETED, bound))
    assert run_filter(cache, plugin, pod("b", {"nvidia.com/gpu": "1"}), ["n"]) == {}


def test_args_validation_messages() -> None:
    cache = ClusterCache()
    with pytest.raises(ArgsError) as exc:
        new_device_share({"scoringStrategy": {"type": "Balanced"}}, Handle(cache))
    assert str(exc.value) == "scoringStrategy.type: scoring strategy Balanced is not supported"
    with pytest.raises(ArgsError) as exc:
        new_device_share(
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": RATIO, "weight": 0}]}}, Handle(cache)
        )
    assert str(exc.value) == f"resources[0].weight: resource weight of {RATIO} not in valid range (0, 100]"
    with pytest.raises(ArgsError, match=r"fragmentationAware\.workload\[0\]\.gpuMilli"):
        new_device_share({"fragmentationAware": {"workload": [{"gpuMilli": 1500}]}}, Handle(cache))


# ---------------------------------------------------------------------- fragmentation
def test_node_fragmentation_follows_the_paper() -> None:
    # one shape: a half GPU with 1 cpu. Node A: GPUs 1000, 300 free -> the 300 is fragment. Node B: 400 and 400.
    wl = Workload.from_shapes([PodShape(1000, GI, 500)])
    free = np.array([[1000, 300], [400, 400], [1000, -1]], dtype=np.int64)
    cpu = np.array([8000, 8000, 0], dtype=np.int64)
    mem = np.array([8 * GI] * 3, dtype=np.int64)
    frag = node_fragmentation(wl, cpu, mem, free, ["V100", "V100", "V100"])
    # A: 300 unusable; B: nothing fits -> all 800; C: no cpu left -> all 1000
    assert frag.tolist() == [300.0, 800.0, 1000.0]
    # model constraint: a shape that needs T4 cannot use V100 nodes at all
    wl_t4 = Workload.from_shapes([PodShape(1000, GI, 500, "T4")])
    assert node_fragmentation(wl_t4, cpu, mem, free, ["V100", "T4", "V100"]).tolist() == [1300.0, 800.0, 1000.0]
    # CPU-only shapes see every idle GPU milli as fragment
    wl_cpu = Workload.from_shapes([PodShape(1000, GI, 0)])
    assert node_fragmentation(wl_cpu, cpu, mem, free, ["V100"] * 3).tolist() == [1300.0, 800.0, 1000.0]


def test_best_placement_prefers_the_gpu_that_keeps_room_for_typical_pods() -> None:
    wl = Workload.from_shapes([PodShape(0, 0, 500)] * 3 + [PodShape(0, 0, 1000)])
    free = np.array([[1000, 700, 500]], dtype=np.int64)
    feasible = free >= 200
    place = best_placement(wl, PodShape(0, 0, 200), np.array([1]), np.array([1]), free, ["V100"], feasible)
    # on the 700 card the rest (500) still fits a typical half pod: no fragmentation growth there
    assert int(place.slot[0]) == 1
    whole = best_placement(wl, PodShape(0, 0, 1000), np.array([1]), np.array([1]), free, ["V100"], feasible)
    assert np.isfinite(whole.delta[0])


# ---------------------------------------------------------------------- over HTTP
def gpu_cluster(tmp: Path, pods: tuple[dict[str, Any], ...] = ()) -> Path:
    objs = [node("gpu-a", 2), device("gpu-a", 2), node("gpu-b", 2, model="T4"), device("gpu-b", 2, unhealthy=(1,))]
    objs += pods  # pending pods to bind: /bind binds only pods the source reported
    (tmp / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


def _config(args: dict[str, Any] | None = None) -> SchedulerConfig:
    return SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare", 1, args or {})))


def test_filter_prioritize_bind_and_rest_over_http(tmp_path: Path) -> None:
    source = FileSource(gpu_cluster(tmp_path, (pod("share", {CORE: "50", RATIO: "50"}),)), poll_interval=0)
    with LiveServer(
        source, _config({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": RATIO, "weight": 1}]}})
    ) as srv:
        c = srv.client
        whole = pod("whole", {"nvidia.com/gpu": "2"})
        r = c.post("/filter", json={"Pod": whole, "NodeNames": ["gpu-a", "gpu-b"]})
        assert r.json()["NodeNames"] == ["gpu-a"]
        assert r.json()["FailedNodes"] == {"gpu-b": "Insufficient gpu devices"}
        bad = pod("bad", {CORE: "50"})
        r = c.post("/filter", json={"Pod": bad, "NodeNames": ["gpu-a"]})
        assert r.json()["FailedAndUnresolvableNodes"] == {
            "gpu-a": "invalid resource device requests: [koordinator.sh/gpu-core]"
        }

        share = pod("share", {CORE: "50", RATIO: "50"})
        r = c.post("/prioritize", json={"Pod": share, "NodeNames": ["gpu-a", "gpu-b"]})
        scores = {h["Host"]: h["Score"] for h in r.json()}
        # MostAllocated over node totals: 50/200 on gpu-a, 50/100 on gpu-b (its unhealthy card has no total)
        assert scores == {"gpu-a": 5, "gpu-b": 10}
        r = c.post(
            "/bind", json={"PodName": "share", "PodNamespace": "default", "PodUID": "uid-share", "Node": "gpu-b"}
        )
        assert r.json() == {"Error": ""}
        expected = format_allocations([GPUAllocation(0, {CORE: 50, RATIO: 50, MEM: 8 * GI}, "GPU-gpu-b-0")])
        deadline = time.monotonic() + 5
        cached: dict[str, Any] = {}
        while time.monotonic() < deadline:
            cached = srv.service.cache.pod_objects.get("uid-share") or {}
            if (cached.get("metadata") or {}).get("annotations", {}).get(ANN) == expected:
                break
            time.sleep(0.02)
        assert cached["metadata"]["annotations"][ANN] == expected
        assert cached["spec"]["nodeName"] == "gpu-b"

        # gpu-b now has 50% used on its only healthy card: MostAllocated prefers it for the next share
        r = c.post(
            "/prioritize", json={"Pod": pod("share2", {CORE: "30", RATIO: "30"}), "NodeNames": ["gpu-a", "gpu-b"]}
        )
        scores = {h["Host"]: h["Score"] for h in r.json()}
        assert scores["gpu-b"] > scores["gpu-a"]
        # a pod without GPU requests is not scored by DeviceShare
        r = c.post("/prioritize", json={"Pod": pod("plain", {}), "NodeNames": ["gpu-a"]})
        assert r.status_code == 200

        r = c.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/gpu-b")
        assert r.status_code == 200
        body = r.json()
        assert body["deviceTotal"] == {CORE: "100", MEM: "16Gi", RATIO: "100"}  # the unhealthy card has no total
        assert body["deviceUsed"] == {CORE: "50", MEM: "8Gi", RATIO: "50"}
        assert body["deviceFreeDetail"]["gpu"]["0"] == {CORE: "50", MEM: "8Gi", RATIO: "50"}
        assert body["deviceTotalDetail"]["gpu"]["1"] == {}
        assert body["allocateSet"] == {"gpu": {"default/share": {"0": {CORE: "50", MEM: "8Gi", RATIO: "50"}}}}
        assert set(c.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries").json()) == {"gpu-a", "gpu-b"}
        r = c.get("/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/nope")
        assert r.status_code == 404
        assert r.json() == {"message": "cannot find node nope"}


def test_fragmentation_aware_over_http_ranks_nodes(tmp_path: Path) -> None:
    objs = [node("frag", 1), device("frag", 1), node("clean", 1), device("clean", 1)]
    objs.append(
        pod(
            "old",
            {CORE: "60", RATIO: "60"},
            "frag",
            {ANN: format_allocations([GPUAllocation(0, {CORE: 60, RATIO: 60})])},
        )
    )
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(objs))
    args = {
        "scoringStrategy": {"type": "FragmentationAware"},
        "fragmentationAware": {"workload": [{"cpu": "1", "memory": "1Gi", "gpuMilli": 500, "weight": 1}]},
    }
    with LiveServer(FileSource(tmp_path, poll_interval=0), _config(args)) as srv:
        r = srv.client.post(
            "/prioritize", json={"Pod": pod("p", {CORE: "40", RATIO: "40"}), "NodeNames": ["frag", "clean"]}
        )
        scores = {h["Host"]: h["Score"] for h in r.json()}
        # filling the 40% hole on "frag" removes fragmentation; "clean" would keep 600 milli usable
        assert scores == {"frag": 10, "clean": 9}


# ---------------------------------------------------------------------- fast-path bookkeeping
def test_gpu_table_keeps_derived_rows_and_stamps() -> None:
    from app.plugins.deviceshare.gputable import GPUTable

    used = {ANN: format_allocations([GPUAllocation(1, {CORE: 30, RATIO: 60, MEM: 4 * GI})])}
    cache, plugin = setup(
        [node("n", 3), device("n", 3, unhealthy=(2,)), pod("u", {CORE: "30", RATIO: "60"}, "n", used)]
    )
    table = plugin.devices.flush()
    row = cache.table.row("n")
    assert row is not None
    rows = np.array([row])
    # free milli: 10 * min(core, ratio) of healthy GPUs, -1 for the unhealthy one
    assert table.free_milli(rows).tolist() == [[1000, 400, -1]]
    assert table.live[row].tolist() == [True, True, False]
    stamp = int(table.version[row])
    assert stamp > 0
    cache.apply(Event("Pod", EventType.DELETED, pod("u", {CORE: "30", RATIO: "60"}, "n", used)))
    table = plugin.devices.flush()
    assert int(table.version[row]) > stamp  # the row was rewritten
    assert table.free_milli(rows).tolist() == [[1000, 1000, -1]]
    empty = GPUTable()
    empty.ensure(2, 1)
    assert empty.free_milli(np.array([0, 1])).tolist() == [[-1], [-1]]


def test_row_memo_recomputes_only_changed_rows_and_resets_on_a_new_workload() -> None:
    from app.plugins.deviceshare.fragmentation import RowMemo, usable

    wl = Workload.from_shapes([PodShape(0, 0, 500), PodShape(0, 0, 1000), PodShape(0, 0, 300)])
    free = np.array([[1000, 300], [500, -1], [0, 0]], dtype=np.int64)
    rows = np.array([4, 0, 2], dtype=np.int64)
    memo = RowMemo()
    stamps = np.array([1, 1, 1], dtype=np.int64)
    got = memo.get(wl, rows, stamps, free)
    want = usable(wl, free)
    assert memo.recomputed == 3
    assert np.array_equal(got.total[got.rows(np.arange(3))], want.total)
    assert np.array_equal(np.take(got.u_t, got.rows(np.arange(3)), axis=1), want.u_t)
    free2 = free.copy()
    free2[1] = [200, -1]
    got = memo.get(wl, rows, np.array([1, 2, 1]), free2)
    assert memo.recomputed == 4  # only the row whose stamp changed
    assert np.array_equal(np.take(got.cnt_t, got.rows(np.arange(3)), axis=1), usable(wl, free2).cnt_t)
    memo.get(Workload.from_shapes([PodShape(0, 0, 500)]), rows, np.array([1, 2, 1]), free2)
    assert memo.recomputed == 7  # a new workload recomputes everything


# ---------------------------------------------------------------------- pods without GPUs under FGD
def _score(cache: ClusterCache, plugin: DeviceShare, p: dict[str, Any], names: list[str]) -> Any:
    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState

    info = parse_pod(p)
    state = CycleState(time.time())
    assert not plugin.pre_filter(state, info).is_rejected()
    rows, _ = cache.table.rows_of(names)
    batch = NodeBatch(rows, names)
    if plugin.pre_score(state, info, batch).is_skip():
        return None  # the framework leaves the plugin out of this pod's scores
    return plugin.score_nodes(state, info, batch)


def test_fragmentation_aware_scores_pods_without_gpus_by_the_cpu_they_take() -> None:
    # "tight" has 10 cores: a 4-core cpu pod leaves 6, too few for the 8-core GPU shape, so its idle
    # GPU would turn into fragment; "roomy" keeps room, "cpu" has no GPU at all (no fragment either way)
    objs = [node("tight", 1, cpu="10"), device("tight", 1), node("roomy", 1), device("roomy", 1), node("cpu", 0)]
    args = {
        "scoringStrategy": {"type": "FragmentationAware"},
        "fragmentationAware": {"workload": [{"cpu": "8", "memory": "1Gi", "gpuMilli": 1000, "weight": 1}]},
    }
    cache, plugin = setup(objs, args)
    cpu_pod = pod("cpu-only", {"cpu": "4"})
    assert run_filter(cache, plugin, cpu_pod, ["tight", "roomy", "cpu"]) == {}
    scores = _score(cache, plugin, cpu_pod, ["tight", "roomy", "cpu"])
    assert scores is not None
    assert scores.tolist() == [90, 100, 100]
    # the upstream strategies keep skipping pods without a GPU request (PreScore Skip)
    for strategy in ("LeastAllocated", "MostAllocated"):
        upstream = {"scoringStrategy": {"type": strategy, "resources": [{"name": RATIO, "weight": 1}]}}
        cache, plugin = setup(objs, upstream)
        assert _score(cache, plugin, cpu_pod, ["tight", "roomy", "cpu"]) is None
    # an invalid GPU request is not a pod without GPUs
    cache, plugin = setup(objs, args)
    from app.cache.podinfo import parse_pod
    from app.framework.cyclestate import CycleState

    bad = parse_pod(pod("bad", {"koordinator.sh/gpu": "150"}))
    state = CycleState(time.time())
    plugin.pre_filter(state, bad)
    rows, _ = cache.table.rows_of(["roomy"])
    assert plugin.pre_score(state, bad, NodeBatch(rows, ["roomy"])).is_skip()


def test_no_gpu_growth_matches_node_fragmentation_before_and_after() -> None:
    from app.plugins.deviceshare.fragmentation import no_gpu_growth

    wl = Workload.from_shapes(
        [PodShape(8000, GI, 1000), PodShape(2000, GI, 500), PodShape(1000, 0, 0), PodShape(6000, 4 * GI, 300)]
    )
    cpu = np.array([10_000, 64_000, 3_000, 9_000], dtype=np.int64)
    mem = np.array([8 * GI, 64 * GI, 8 * GI, 5 * GI], dtype=np.int64)
    free = np.array([[1000, 400], [1000, 1000], [700, -1], [-1, -1]], dtype=np.int64)
    models = ["V100", "V100", "T4", ""]
    shape = PodShape(3000, 2 * GI, 0)
    got = no_gpu_growth(wl, shape, cpu, mem, free, models)
    want = node_fragmentation(wl, cpu - 3000, mem - 2 * GI, free, models) - node_fragmentation(
        wl, cpu, mem, free, models
    )
    assert np.allclose(got, want)
    assert (got >= 0).all() and got[3] == 0.0 and got[1] == 0.0


def test_sigmoid_rank_keeps_the_reference_ties_and_order() -> None:
    """Default FragmentationAware mapping: the FGD reference's integer score int(sigmoid(-growth/1000)*100),
    whose distinct levels are ranked 100, 90, ...: growths 5 and 30 both score 49 in the reference, so they
    tie here too; exact ranking (``Rank``) would separate them."""
    strategy = {"type": "FragmentationAware", "resources": [{"name": RATIO, "weight": 1}]}
    delta = np.array([0.0, 5.0, 30.0, 2500.0, np.inf])
    default = new_device_share({"scoringStrategy": strategy}, Handle(ClusterCache()))
    assert default.args.score_mapping == "SigmoidRank"
    assert default._map_delta(delta).tolist() == [100, 90, 90, 80, 0]
    exact = new_device_share(
        {"scoringStrategy": strategy, "fragmentationAware": {"scoreMapping": "Rank"}}, Handle(ClusterCache())
    )
    assert exact._map_delta(delta).tolist() == [100, 90, 80, 70, 0]
    raw = new_device_share(
        {"scoringStrategy": strategy, "fragmentationAware": {"scoreMapping": "Sigmoid"}}, Handle(ClusterCache())
    )
    assert raw._map_delta(delta).tolist() == [50, 49, 49, 7, 0]


def test_share_goes_to_the_gpu_the_fgd_reference_picks() -> None:
    """The reference (``calculateGpuShareFragExtendScore``) keeps the first GPU with the highest integer
    score. Here GPU 0 (idle) grows fragmentation by 0 and GPU 1 (200 milli free) by -12.5: both score 50,
    so the reference, and the default mapping, take minor 0; exact ranking (``Rank``) takes minor 1."""
    used = {ANN: format_allocations([GPUAllocation(1, {CORE: 80, RATIO: 80, MEM: 13 * GI})])}
    objs = [node("n", 2), device("n", 2), pod("old", {CORE: "80", RATIO: "80"}, "n", used)]
    workload = [
        {"cpu": "1", "memory": "0Mi", "gpuMilli": 200, "weight": 14},
        {"cpu": "1", "memory": "0Mi", "gpuMilli": 250, "weight": 18},
    ]
    strategy = {"type": "FragmentationAware", "resources": [{"name": RATIO, "weight": 1}]}
    share = {CORE: "10", RATIO: "10"}
    cache, plugin = setup(objs, {"scoringStrategy": strategy, "fragmentationAware": {"workload": workload}})
    assert reserve(cache, plugin, pod("a", share), "n") == [0]
    frag = {"workload": workload, "scoreMapping": "Rank"}
    cache, plugin = setup(objs, {"scoringStrategy": strategy, "fragmentationAware": frag})
    assert reserve(cache, plugin, pod("a", share), "n") == [1]


def test_slot_growth_is_per_gpu_and_refuses_whole_gpus() -> None:
    from app.plugins.deviceshare.fragmentation import sigmoid_score, slot_growth

    wl = Workload.from_counts({PodShape(1000, 0, 200): 14.0, PodShape(1000, 0, 250): 18.0})
    free = np.array([1000, 200, 50, -1], dtype=np.int64)
    feasible = np.array([True, True, True, False])
    growth = slot_growth(wl, PodShape(1000, 0, 100), 8000, GI, free, "", feasible)
    assert growth[:2].tolist() == [0.0, -12.5]
    assert np.isinf(growth[2:]).all()  # 50 milli free is too little; slot 3 is no GPU
    assert sigmoid_score(growth).tolist() == [50, 50, 0, 0]
    with pytest.raises(ValueError, match="needs a share of one GPU, got 1000 milli"):
        slot_growth(wl, PodShape(1000, 0, 1000), 8000, GI, free, "", feasible)


def test_share_gpu_choice_counts_the_assumed_pods_cpu_once() -> None:
    """At Reserve the pod is already assumed on the node; its cpu must not be taken twice. With 10 cores
    free and a 4-core pod, 6 remain: the 5-core typical shapes still fit, and GPU 1 (200 milli free)
    grows fragmentation least. Counting the pod twice (2 cores left) would pick GPU 0 instead."""
    held = [GPUAllocation(0, {CORE: 50, RATIO: 50, MEM: 8 * GI}), GPUAllocation(1, {CORE: 80, RATIO: 80, MEM: 13 * GI})]
    used = {ANN: format_allocations(held)}
    objs = [node("n", 2, cpu="10"), device("n", 2), pod("old", {"cpu": "0", CORE: "130", RATIO: "130"}, "n", used)]
    workload = [
        {"cpu": "5", "memory": "0Mi", "gpuMilli": 300, "weight": 4},
        {"cpu": "5", "memory": "0Mi", "gpuMilli": 1000, "weight": 12},
    ]
    strategy = {"type": "FragmentationAware", "resources": [{"name": RATIO, "weight": 1}]}
    cache, plugin = setup(objs, {"scoringStrategy": strategy, "fragmentationAware": {"workload": workload}})
    assert reserve(cache, plugin, pod("a", {"cpu": "4", CORE: "10", RATIO: "10"}), "n") == [1]


def test_explain_never_passes_a_gpu_pod_another_plugin_finds_short(tmp_path: Path) -> None:
    """A node without a Device: NodeResourcesFit finds nvidia.com/gpu short and DeviceShare says it did not
    judge (Skip, with why) instead of "pass"; nodes with a Device keep DeviceShare's own verdict."""
    from tests.conftest import filter_body

    plain = node("plain", 0)
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump_all([node("g1", 2), device("g1", 2), node("g2", 1), device("g2", 1), plain])
    )
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        body = filter_body(pod("p", {"nvidia.com/gpu": "2"}), ["g1", "g2", "plain"])
        nodes = srv.client.post("/apis/v1/explain", json=body).json()["nodes"]
    assert nodes["g1"]["filter"]["DeviceShare"]["status"] == "Success" and nodes["g1"]["feasible"]
    assert nodes["g2"]["filter"]["DeviceShare"]["status"] == "Unschedulable"
    verdicts = nodes["plain"]["filter"]
    assert verdicts["NodeResourcesFit"] == {"status": "Unschedulable", "reason": "Insufficient nvidia.com/gpu"}
    assert verdicts["DeviceShare"]["status"] == "Skip" and "no Device" in verdicts["DeviceShare"]["reason"]
    for info in nodes.values():  # never one plugin short of GPUs while another passes
        statuses = {v["status"] for name, v in info["filter"].items() if name in ("NodeResourcesFit", "DeviceShare")}
        assert not ({"Success"} <= statuses and "Unschedulable" in statuses), info["filter"]


def test_gpu_allocation_metrics_on_metrics(tmp_path: Path) -> None:
    """/metrics: gpu-core total and allocated per node and GPUs free / partial / full (partial: fragmentation)."""
    from prometheus_client.parser import text_string_to_metric_families

    half = {ANN: format_allocations([GPUAllocation(0, {CORE: 70, RATIO: 70})])}
    whole = {ANN: format_allocations([GPUAllocation(1, {CORE: 100, RATIO: 100})])}
    objs = [node("n-half", 3), device("n-half", 3), node("n-nodev", 2)]
    objs += [pod("user", {CORE: "70", RATIO: "70"}, "n-half", half), pod("big", {CORE: "100"}, "n-half", whole)]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(objs))
    with LiveServer(FileSource(tmp_path, poll_interval=0)) as srv:
        text = srv.client.get("/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        if f.name.startswith("koord_deviceshare")
        for s in f.samples
    }
    assert samples[("koord_deviceshare_gpu_core_total", (("node", "n-half"),))] == 300
    assert samples[("koord_deviceshare_gpu_core_allocated", (("node", "n-half"),))] == 170
    states = {dict(k[1])["state"]: v for k, v in samples.items() if k[0] == "koord_deviceshare_gpus"}
    assert states == {"free": 1, "partial": 1, "full": 1}
    assert not any(dict(k[1]).get("node") == "n-nodev" for k in samples)  # no Device: not DeviceShare's
