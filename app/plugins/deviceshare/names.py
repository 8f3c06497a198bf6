"""Koordinator device names: resources, annotations and labels (upstream ``apis/extension/device_share.go``).

The names the agent and the manager share with the scheduler live in :mod:`app.api.devicenames`; this module
re-exports them under DeviceShare's names and adds the scheduler-only ones (request resource sets, hint
annotations).
"""

from __future__ import annotations

from app.api.devicenames import ANNOTATION_DEVICE_ALLOCATED as ANNOTATION_DEVICE_ALLOCATED
from app.api.devicenames import DEVICE_FPGA, DEVICE_GPU, DEVICE_RDMA
from app.api.devicenames import LABEL_GPU_MODEL as LABEL_GPU_MODEL
from app.api.devicenames import LABEL_GPU_VENDOR as LABEL_GPU_VENDOR
from app.api.devicenames import RESOURCE_FPGA as RESOURCE_FPGA
from app.api.devicenames import RESOURCE_GPU as RESOURCE_GPU
from app.api.devicenames import RESOURCE_GPU_CORE as RESOURCE_GPU_CORE
from app.api.devicenames import RESOURCE_GPU_MEMORY as RESOURCE_GPU_MEMORY
from app.api.devicenames import RESOURCE_GPU_MEMORY_RATIO as RESOURCE_GPU_MEMORY_RATIO
from app.api.devicenames import RESOURCE_GPU_SHARED as RESOURCE_GPU_SHARED
from app.api.devicenames import RESOURCE_HUAWEI_NPU_CORE as RESOURCE_HUAWEI_NPU_CORE
from app.api.devicenames import RESOURCE_HUAWEI_NPU_CPU as RESOURCE_HUAWEI_NPU_CPU
from app.api.devicenames import RESOURCE_HUAWEI_NPU_DVPP as RESOURCE_HUAWEI_NPU_DVPP
from app.api.devicenames import RESOURCE_RDMA as RESOURCE_RDMA

#: Device types in Device objects and in the device-allocated annotation (``schedulingv1alpha1.GPU`` ...).
GPU = DEVICE_GPU
RDMA = DEVICE_RDMA
FPGA = DEVICE_FPGA

RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"
RESOURCE_HYGON_DCU = "dcu.com/gpu"

#: Resource names that make up a GPU request (``DeviceResourceNames[GPU]`` in ``deviceshare/utils.go``).
GPU_RESOURCE_NAMES: tuple[str, ...] = (
    RESOURCE_NVIDIA_GPU,
    RESOURCE_AMD_GPU,
    RESOURCE_HYGON_DCU,
    RESOURCE_GPU,
    RESOURCE_GPU_SHARED,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_HUAWEI_NPU_CORE,
    RESOURCE_HUAWEI_NPU_CPU,
    RESOURCE_HUAWEI_NPU_DVPP,
)

#: Resource name of each secondary device type (``DeviceResourceNames`` for rdma and fpga).
SECONDARY_RESOURCES: dict[str, str] = {RDMA: RESOURCE_RDMA, FPGA: RESOURCE_FPGA}

#: Pod annotation guiding device selection per type (``AnnotationDeviceAllocateHint``).
ANNOTATION_DEVICE_ALLOCATE_HINT = "scheduling.koordinator.sh/device-allocate-hint"
#: Pod annotation asking devices of several types to be allocated together (``AnnotationDeviceJointAllocate``).
ANNOTATION_DEVICE_JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"
