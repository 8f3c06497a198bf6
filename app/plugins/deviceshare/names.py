"""Koordinator device names: resources, annotations and labels (upstream ``apis/extension/device_share.go``)."""

from __future__ import annotations

#: Device type of GPUs in Device objects and in the device-allocated annotation (``schedulingv1alpha1.GPU``).
GPU = "gpu"
#: Device type of RDMA NICs (``schedulingv1alpha1.RDMA``).
RDMA = "rdma"
#: Device type of FPGAs (``schedulingv1alpha1.FPGA``).
FPGA = "fpga"

RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"
RESOURCE_HYGON_DCU = "dcu.com/gpu"
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

#: Pod annotation written at PreBind (``AnnotationDeviceAllocated``).
ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
#: Node label holding the GPU model (``LabelGPUModel``), usable in node affinity.
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
#: Node label holding the GPU vendor (``LabelGPUVendor``).
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
#: Pod annotation guiding device selection per type (``AnnotationDeviceAllocateHint``).
ANNOTATION_DEVICE_ALLOCATE_HINT = "scheduling.koordinator.sh/device-allocate-hint"
#: Pod annotation asking devices of several types to be allocated together (``AnnotationDeviceJointAllocate``).
ANNOTATION_DEVICE_JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"
