"""Kubernetes objects for the trace: Nodes and Devices as koordlet and koord-manager report them, Pods.

- Node: ``status.allocatable`` / ``capacity`` with ``cpu``, ``memory``, ``nvidia.com/gpu`` (the NVIDIA
  device plugin's count) and, as koord-manager's gpudeviceresource plugin sums them from the
  Device (upstream ``pkg/slo-controller/noderesource/plugins/gpudeviceresource``),
  ``koordinator.sh/gpu-core``, ``koordinator.sh/gpu-memory``, ``koordinator.sh/gpu-memory-ratio``
  and ``koordinator.sh/gpu`` (100 per healthy GPU); labels ``node.koordinator.sh/gpu-model`` and
  ``node.koordinator.sh/gpu-vendor: nvidia``.
- Device (one per GPU node, named after it): GPUs minor 0..n-1, each with a stable UUID, health
  true, and resources gpu-core 100, gpu-memory by model, gpu-memory-ratio 100, as koordlet's
  states informer builds them (upstream ``pkg/koordlet/statesinformer/impl/states_device_linux.go``).
- Pod (issue #3's trace mapping): cpu and memory requests; one shared GPU (``gpu_milli`` < 1000)
  as ``koordinator.sh/gpu-core`` = ``koordinator.sh/gpu-memory-ratio`` = ``gpu_milli / 10``;
  whole GPUs as ``nvidia.com/gpu``; ``gpu_spec`` as required node affinity on the GPU model
  label; the trace's LS/BE qos as the ``koordinator.sh/qosClass`` label (Guaranteed gets
  limits equal to requests, Burstable requests only).
"""

from __future__ import annotations

import uuid
from typing import Any

from app.sim.trace import MILLI_PER_GPU, TraceNode, TracePod

RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_GPU = "koordinator.sh/gpu"
RESOURCE_GPU_CORE = "koordinator.sh/gpu-core"
RESOURCE_GPU_MEMORY = "koordinator.sh/gpu-memory"
RESOURCE_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
GPU_VENDOR_NVIDIA = "nvidia"
LABEL_POD_QOS = "koordinator.sh/qosClass"
ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
#: Namespace of every simulated pod.
NAMESPACE = "default"

#: GPU memory per model in GiB. Public models by their datasheets; G1..G3 are undisclosed in the
#: trace and assumed here (only the device-allocated annotation's gpu-memory depends on it, since
#: trace pods request gpu-memory-ratio).
GPU_MEMORY_GIB: dict[str, int] = {
    "P100": 16,
    "T4": 16,
    "V100M16": 16,
    "V100M32": 32,
    "A10": 24,
    "A100": 80,
    "G1": 16,
    "G2": 32,
    "G3": 32,
}
#: GiB assumed for a model missing from :data:`GPU_MEMORY_GIB`.
DEFAULT_GPU_MEMORY_GIB = 16
#: Percent units of one whole device (koordinator.sh/gpu-core of one GPU).
PERCENT_PER_GPU = 100
_UUID_NS = uuid.UUID("6f1d5a8e-2b0c-4c1e-9f3a-6b7d2e5c4a10")


def gpu_memory_bytes(model: str) -> int:
    """Memory of one GPU of ``model`` in bytes (:data:`GPU_MEMORY_GIB`, else the default)."""
    return GPU_MEMORY_GIB.get(model, DEFAULT_GPU_MEMORY_GIB) << 30


def gpu_uuid(node: str, minor: int) -> str:
    """A stable NVIDIA-style UUID (``GPU-xxxxxxxx-...``) for GPU ``minor`` of ``node``."""
    return f"GPU-{uuid.uuid5(_UUID_NS, f'{node}/{minor}')}"


def node_object(node: TraceNode) -> dict[str, Any]:
    """The v1 Node of a trace node (allocatable = capacity; GPU resources only when it has GPUs)."""
    resources: dict[str, str] = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi"}
    labels = {"kubernetes.io/hostname": node.name}
    if node.gpu > 0:
        percent = str(PERCENT_PER_GPU * node.gpu)
        resources |= {
            RESOURCE_NVIDIA_GPU: str(node.gpu),
            RESOURCE_GPU: percent,
            RESOURCE_GPU_CORE: percent,
            RESOURCE_GPU_MEMORY: str(gpu_memory_bytes(node.model) * node.gpu),
            RESOURCE_GPU_MEMORY_RATIO: percent,
        }
        labels |= {LABEL_GPU_MODEL: node.model, LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels},
        "status": {"capacity": dict(resources), "allocatable": resources},
    }


def device_object(node: TraceNode) -> dict[str, Any] | None:
    """The Device of a GPU node (None for a node without GPUs)."""
    if node.gpu == 0:
        return None
    memory = f"{gpu_memory_bytes(node.model) >> 30}Gi"
    devices = [
        {
            "type": "gpu",
            "id": gpu_uuid(node.name, minor),
            "minor": minor,
            "health": True,
            "resources": {
                RESOURCE_GPU_CORE: str(PERCENT_PER_GPU),
                RESOURCE_GPU_MEMORY: memory,
                RESOURCE_GPU_MEMORY_RATIO: str(PERCENT_PER_GPU),
            },
        }
        for minor in range(node.gpu)
    ]
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": node.name, "labels": {LABEL_GPU_MODEL: node.model, LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA}},
        "spec": {"devices": devices},
    }


def pod_gpu_requests(pod: TracePod) -> dict[str, str]:
    """The GPU part of a trace pod's requests (empty for a CPU pod)."""
    if pod.num_gpu == 0:
        return {}
    if pod.num_gpu == 1 and pod.gpu_milli < MILLI_PER_GPU:
        share = str(pod.gpu_milli * PERCENT_PER_GPU // MILLI_PER_GPU)
        return {RESOURCE_GPU_CORE: share, RESOURCE_GPU_MEMORY_RATIO: share}
    return {RESOURCE_NVIDIA_GPU: str(pod.num_gpu)}


def pod_object(pod: TracePod, name: str, uid: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A minimal valid v1 Pod for ``pod`` named ``name`` (resampled copies get their own name and uid),
    with ``annotations`` (e.g. a gang's, :func:`app.sim.gangs.gang_annotations`) when given."""
    gpu = pod_gpu_requests(pod)
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi", **gpu}
    resources: dict[str, Any] = {"requests": requests}
    if pod.qos == "Guaranteed":
        resources["limits"] = dict(requests)
    elif gpu:
        resources["limits"] = dict(gpu)  # extended resources must be limited (and equal) in Kubernetes
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": resources}],
    }
    if pod.gpu_models is not None:
        term = {"matchExpressions": [{"key": LABEL_GPU_MODEL, "operator": "In", "values": list(pod.gpu_models)}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    labels = {LABEL_POD_QOS: pod.qos} if pod.qos in ("LS", "BE", "LSR", "LSE", "SYSTEM") else {}
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "uid": uid, "labels": labels}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
