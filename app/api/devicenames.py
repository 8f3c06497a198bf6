"""Koordinator's device names shared by the agent, the manager and the scheduler.

Resource names, device types and labels exactly as upstream spells them (``apis/extension/device_share.go``,
``apis/extension/resource.go``, ``apis/scheduling/v1alpha1/device_types.go``). The node agent, which may
import only :mod:`app.api` and :mod:`app.client`, writes Device objects with them; the manager turns a
Device into node resources with them.
"""

from __future__ import annotations

import re

#: Device types (``schedulingv1alpha1.GPU`` / ``FPGA`` / ``RDMA``).
DEVICE_GPU = "gpu"
DEVICE_FPGA = "fpga"
DEVICE_RDMA = "rdma"

RESOURCE_GPU = "koordinator.sh/gpu"
RESOURCE_GPU_SHARED = "koordinator.sh/gpu.shared"
RESOURCE_GPU_CORE = "koordinator.sh/gpu-core"
RESOURCE_GPU_MEMORY = "koordinator.sh/gpu-memory"
RESOURCE_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
RESOURCE_HUAWEI_NPU_CORE = "huawei.com/npu-core"
RESOURCE_HUAWEI_NPU_CPU = "huawei.com/npu-cpu"
RESOURCE_HUAWEI_NPU_DVPP = "huawei.com/npu-dvpp"
RESOURCE_RDMA = "koordinator.sh/rdma"
RESOURCE_FPGA = "koordinator.sh/fpga"

#: Node / Device labels (``LabelGPUVendor``, ``LabelGPUModel``, ``LabelGPUDriverVersion``).
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"
#: Node labels koord device-daemon writes besides the three above. Upstream's koord-device-daemon writes its
#: prints (``XPUDeviceInfo``) to a file for koordlet and defines no node label of its own, so these names are
#: this rebuild's, in upstream's ``node.koordinator.sh/gpu-*`` style (docs/device-daemon.md).
LABEL_GPU_COUNT = "node.koordinator.sh/gpu-count"
LABEL_GPU_MEMORY = "node.koordinator.sh/gpu-memory"
LABEL_GPU_CUDA_VERSION = "node.koordinator.sh/gpu-cuda-version"
LABEL_RDMA_COUNT = "node.koordinator.sh/rdma-count"
LABEL_DEVICE_DAEMON_TIMESTAMP = "node.koordinator.sh/device-daemon-timestamp"
#: Every label koord device-daemon owns: written when discovered, removed from the Node when not.
DEVICE_DAEMON_LABELS: tuple[str, ...] = (
    LABEL_GPU_VENDOR,
    LABEL_GPU_MODEL,
    LABEL_GPU_DRIVER_VERSION,
    LABEL_GPU_COUNT,
    LABEL_GPU_MEMORY,
    LABEL_GPU_CUDA_VERSION,
    LABEL_RDMA_COUNT,
    LABEL_DEVICE_DAEMON_TIMESTAMP,
)
#: ``GPUVendorNVIDIA``.
GPU_VENDOR_NVIDIA = "nvidia"

#: Pod annotation the scheduler writes at PreBind (``AnnotationDeviceAllocated``).
ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"

#: The device condition type (``DeviceConditionHealthy``).
CONDITION_HEALTHY = "Healthy"

#: Node resources the GPU device resource plugin reconciles from the Device (``gpudeviceresource.ResourceNames``).
GPU_NODE_RESOURCES: tuple[str, ...] = (
    RESOURCE_GPU,
    RESOURCE_GPU_CORE,
    RESOURCE_HUAWEI_NPU_CORE,
    RESOURCE_HUAWEI_NPU_CPU,
    RESOURCE_HUAWEI_NPU_DVPP,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_GPU_SHARED,
)
#: Node resources the RDMA device resource plugin reconciles (``rdmadevicereource.ResourceNames``).
RDMA_NODE_RESOURCES: tuple[str, ...] = (RESOURCE_RDMA,)
#: Node labels copied from the Device (``gpudeviceresource.Labels``).
GPU_NODE_LABELS: tuple[str, ...] = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)


def gpu_model_label(name: str) -> str:
    """The ``node.koordinator.sh/gpu-model`` value of an NVML device name, as upstream normalises it
    (``statesinformer/impl/states_device_linux.go`` ``getGPUDriverAndModel``): the ``NVIDIA `` prefix
    drivers >= 470 add is dropped, spaces become dashes (``NVIDIA H200`` -> ``H200``,
    ``NVIDIA A100 SXM4 80GB`` -> ``A100-SXM4-80GB``, ``Tesla T4`` -> ``Tesla-T4``)."""
    return name.removeprefix("NVIDIA ").replace(" ", "-")


_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def is_label_value(value: str) -> bool:
    """Whether ``value`` is a valid Kubernetes label value (apimachinery ``IsValidLabelValue``: at most 63
    characters, alphanumerics with ``-``, ``_`` or ``.`` inside; empty is valid)."""
    return len(value) <= 63 and _LABEL_VALUE.match(value) is not None
