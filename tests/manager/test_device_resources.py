"""The manager's device resource plugins: node capacity/allocatable of koordinator.sh/gpu-* and rdma from the
healthy devices of the Device object, GPU labels onto the Node, removal when the devices go away; the
patches checked on the HTTP fake API server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.cache.snapshot import ClusterCache
from app.manager.cli import MANAGER_KINDS
from app.manager.controllers import SLOControllers
from app.manager.deviceresource import DeviceResourceError, DeviceResources, device_resources, node_patches
from app.sources.kubernetes import KubernetesSource
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer

DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
GI = 1 << 30


def gpu(minor: int, health: bool = True, memory: str = "80Gi") -> dict[str, Any]:
    return {
        "type": "gpu",
        "id": f"GPU-{minor}",
        "minor": minor,
        "health": health,
        "resources": {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": memory,
            "koordinator.sh/gpu-memory-ratio": "100",
        },
    }


def rdma(minor: int, health: bool = True) -> dict[str, Any]:
    return {"type": "rdma", "id": f"0000:{minor:02x}:00.0", "minor": minor, "health": health,
            "resources": {"koordinator.sh/rdma": "100"}}  # fmt: skip


def device(name: str, devices: list[dict[str, Any]], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": meta,
            "spec": {"devices": devices}}  # fmt: skip


LABELS = {
    "node.koordinator.sh/gpu-vendor": "nvidia",
    "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
    "node.koordinator.sh/gpu-driver-version": "535.129.03",
}


def test_healthy_gpus_and_nics_are_summed_unhealthy_ones_left_out() -> None:
    devices = [gpu(m, health=m != 3) for m in range(8)] + [rdma(m, health=m != 2) for m in range(4)]
    got = device_resources(device("n1", devices, LABELS))
    assert got.resources == {
        "koordinator.sh/gpu": 700,
        "koordinator.sh/gpu-core": 700,
        "koordinator.sh/gpu-memory": 7 * 80 * GI,
        "koordinator.sh/gpu-memory-ratio": 700,
        "koordinator.sh/rdma": 300,
    }
    assert got.labels == LABELS


def test_no_device_or_no_healthy_gpu_removes_every_gpu_resource() -> None:
    for dev in (None, device("n1", [gpu(0, health=False), rdma(0)])):
        got = device_resources(dev)
        assert {k for k, v in got.resources.items() if v is None} >= {
            "koordinator.sh/gpu",
            "koordinator.sh/gpu-core",
            "koordinator.sh/gpu-memory",
            "koordinator.sh/gpu-memory-ratio",
            "koordinator.sh/gpu.shared",
            "huawei.com/npu-core",
        }
        assert got.labels == {}
    assert device_resources(None).resources["koordinator.sh/rdma"] is None
    assert device_resources(device("n1", [rdma(0)])).resources["koordinator.sh/rdma"] == 100


def test_koordinator_gpu_only_for_nvidia_or_unlabelled_devices() -> None:
    assert "koordinator.sh/gpu" in device_resources(device("n", [gpu(0)])).resources
    huawei = device_resources(device("n", [gpu(0)], {"node.koordinator.sh/gpu-vendor": "huawei"}))
    assert "koordinator.sh/gpu" not in huawei.resources and huawei.resources["koordinator.sh/gpu-core"] == 100


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"devices": {"gpu": 1}}, r"Device n spec.devices: expected a list"),
        ({"devices": ["gpu"]}, r"Device n spec.devices\[0\]: expected an object"),
        ({"devices": [gpu(0, memory="lots")]}, r"Device n gpu minor 0.*koordinator.sh/gpu-memory"),
    ],
)
def test_a_malformed_device_is_refused_with_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(DeviceResourceError, match=message):
        device_resources({"metadata": {"name": "n"}, "spec": spec})


def test_patches_mention_only_what_differs() -> None:
    desired = DeviceResources({"koordinator.sh/gpu-core": 100, "koordinator.sh/rdma": None}, {"a": "b"})
    status, meta = node_patches(desired, {"koordinator.sh/gpu-core": 100}, {"koordinator.sh/gpu-core": 100}, {"a": "b"})
    assert status is None and meta is None
    status, meta = node_patches(desired, {"koordinator.sh/rdma": 100}, {}, {})
    assert status == {
        "status": {
            "allocatable": {"koordinator.sh/gpu-core": "100", "koordinator.sh/rdma": None},
            "capacity": {"koordinator.sh/gpu-core": "100", "koordinator.sh/rdma": None},
        }
    }
    assert meta == {"metadata": {"labels": {"a": "b"}}}


# -- against the fake API server ------------------------------------------------------------------------------------


async def _reconcile(fake: FakeAPIServer, tmp_path: Path) -> None:
    """One manager round on a fresh list of the fake's objects."""
    source = KubernetesSource(
        MANAGER_KINDS, kubeconfig=write_kubeconfig(tmp_path / "kubeconfig", fake.url), backoff_initial=0.1
    )
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


async def test_manager_patches_node_status_and_labels_from_the_device_then_removes_them(tmp_path: Path) -> None:
    fake = FakeAPIServer(tokens={TOKEN})
    try:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-node", "labels": {"kubernetes.io/hostname": "gpu-node"}},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}, "capacity": {"cpu": "16", "memory": "64Gi"}},
        }
        fake.seed("/api/v1/nodes", node)
        fake.seed(DEVICES, device("gpu-node", [gpu(0), gpu(1, health=False), rdma(0)], LABELS))
        await _reconcile(fake, tmp_path)
        patches = [c for c in fake.calls("PATCH")]
        assert [(c.path, c.headers["content-type"]) for c in patches] == [
            ("/api/v1/nodes/gpu-node/status", "application/merge-patch+json"),
            ("/api/v1/nodes/gpu-node", "application/merge-patch+json"),
        ]
        values = {
            "koordinator.sh/gpu": "100",
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "80Gi",
            "koordinator.sh/gpu-memory-ratio": "100",
            "koordinator.sh/rdma": "100",
        }
        assert patches[0].body == {"status": {"allocatable": values, "capacity": values}}
        assert patches[1].body == {"metadata": {"labels": LABELS}}
        stored = fake.store["/api/v1/nodes"]["gpu-node"]
        assert stored["status"]["allocatable"] == {"cpu": "16", "memory": "64Gi", **values}
        assert stored["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "A100-SXM4-80GB"

        # nothing changed: nothing written
        fake.requests.clear()
        await _reconcile(fake, tmp_path)
        assert fake.calls("PATCH") == []

        # the Device is gone (node drained of its GPUs): every device resource removed, labels kept (upstream)
        del fake.store[DEVICES]["gpu-node"]
        fake.requests.clear()
        await _reconcile(fake, tmp_path)
        [patch] = fake.calls("PATCH")
        removed = dict.fromkeys(values)
        assert patch.body == {"status": {"allocatable": removed, "capacity": removed}}
        assert fake.store["/api/v1/nodes"]["gpu-node"]["status"]["allocatable"] == {"cpu": "16", "memory": "64Gi"}
        assert fake.store["/api/v1/nodes"]["gpu-node"]["metadata"]["labels"]["node.koordinator.sh/gpu-model"]
    finally:
        fake.close()


async def test_a_malformed_device_leaves_its_node_alone_and_others_flow(tmp_path: Path) -> None:
    fake = FakeAPIServer(tokens={TOKEN})
    try:
        for name in ("bad", "good"):
            fake.seed("/api/v1/nodes", {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4"}}})
        fake.seed(DEVICES, {"metadata": {"name": "bad"}, "spec": {"devices": "gpu0"}})
        fake.seed(DEVICES, device("good", [gpu(0)]))
        await _reconcile(fake, tmp_path)
        paths = [c.path for c in fake.calls("PATCH")]
        assert paths == ["/api/v1/nodes/good/status"]
    finally:
        fake.close()
