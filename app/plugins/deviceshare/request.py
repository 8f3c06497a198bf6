"""A pod's GPU request: validation and conversion as upstream ``deviceshare/utils.go`` and ``devicehandler_gpu.go``.

Steps (``GetPodDeviceRequests`` then ``calcDesiredRequestsAndCountForGPU``):

1. keep the pod's non-zero requests of GPU resource names;
2. validate values (``koordinator.sh/gpu`` above 100 must be a multiple of 100) and the combination
   of names (``gpu-core`` alone, or whole-GPU names mixed with share names, are invalid);
3. convert: ``nvidia.com/gpu: N`` (also amd/dcu) => gpu-core = gpu-memory-ratio = 100*N;
   ``koordinator.sh/gpu: X`` => gpu-core = gpu-memory-ratio = X; other combinations pass through;
4. split into N GPUs: N = ``gpu.shared`` when > 0, else ratio/100 when ratio > 100 and divisible, else 1;
   each resource is divided by N (integer division); the request is "shared" when the per-GPU ratio is
   below 100 or memory is asked in bytes only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.plugins.deviceshare import names as n

# Combination flags, as upstream's bit set.
_FLAGS: dict[str, int] = {
    n.RESOURCE_NVIDIA_GPU: 1 << 0,
    n.RESOURCE_AMD_GPU: 1 << 1,
    n.RESOURCE_HYGON_DCU: 1 << 2,
    n.RESOURCE_GPU: 1 << 3,
    n.RESOURCE_GPU_SHARED: 1 << 4,
    n.RESOURCE_GPU_CORE: 1 << 5,
    n.RESOURCE_GPU_MEMORY: 1 << 6,
    n.RESOURCE_GPU_MEMORY_RATIO: 1 << 7,
    n.RESOURCE_HUAWEI_NPU_CORE: 1 << 8,
    n.RESOURCE_HUAWEI_NPU_CPU: 1 << 9,
    n.RESOURCE_HUAWEI_NPU_DVPP: 1 << 10,
}


def _f(*names: str) -> int:
    out = 0
    for name in names:
        out |= _FLAGS[name]
    return out


_WHOLE = "whole"
_PERCENT = "percent"
_SHARED = "shared"
_HUAWEI = "huawei"

#: Valid combinations -> which value check applies (``ValidDeviceResourceCombinations``).
_COMBINATIONS: dict[int, str] = {
    _f(n.RESOURCE_NVIDIA_GPU): _WHOLE,
    _f(n.RESOURCE_AMD_GPU): _WHOLE,
    _f(n.RESOURCE_HYGON_DCU): _WHOLE,
    _f(n.RESOURCE_GPU): _WHOLE,
    _f(n.RESOURCE_GPU_MEMORY): _PERCENT,
    _f(n.RESOURCE_GPU_MEMORY_RATIO): _PERCENT,
    _f(n.RESOURCE_GPU_CORE, n.RESOURCE_GPU_MEMORY): _PERCENT,
    _f(n.RESOURCE_GPU_CORE, n.RESOURCE_GPU_MEMORY_RATIO): _PERCENT,
    _f(n.RESOURCE_HUAWEI_NPU_CORE, n.RESOURCE_GPU_MEMORY_RATIO): _PERCENT,
    _f(n.RESOURCE_GPU_SHARED, n.RESOURCE_GPU_MEMORY): _SHARED,
    _f(n.RESOURCE_GPU_SHARED, n.RESOURCE_GPU_MEMORY_RATIO): _SHARED,
    _f(n.RESOURCE_GPU_SHARED, n.RESOURCE_GPU_CORE, n.RESOURCE_GPU_MEMORY): _SHARED,
    _f(n.RESOURCE_GPU_SHARED, n.RESOURCE_GPU_CORE, n.RESOURCE_GPU_MEMORY_RATIO): _SHARED,
    _f(n.RESOURCE_GPU_SHARED, n.RESOURCE_HUAWEI_NPU_CORE, n.RESOURCE_HUAWEI_NPU_CPU, n.RESOURCE_GPU_MEMORY): _HUAWEI,
    _f(
        n.RESOURCE_GPU_SHARED,
        n.RESOURCE_HUAWEI_NPU_CORE,
        n.RESOURCE_HUAWEI_NPU_CPU,
        n.RESOURCE_HUAWEI_NPU_DVPP,
        n.RESOURCE_GPU_MEMORY,
    ): _HUAWEI,
}

#: Resources divided per GPU, in ``calcDesiredRequestsAndCountForGPU`` order.
_PER_GPU = (
    n.RESOURCE_GPU_CORE,
    n.RESOURCE_HUAWEI_NPU_CORE,
    n.RESOURCE_HUAWEI_NPU_CPU,
    n.RESOURCE_HUAWEI_NPU_DVPP,
)


class DeviceRequestError(ValueError):
    """The pod's device request is invalid; the message is upstream's (answered UnschedulableAndUnresolvable)."""


@dataclass(frozen=True, slots=True)
class GPURequest:
    """What one pod asks of the GPUs of one node.

    Attributes:
        count: number of GPUs (>= 1).
        per_gpu: request on each of those GPUs: ``koordinator.sh/gpu-core`` (percent of a card),
            ``koordinator.sh/gpu-memory-ratio`` (percent) and/or ``koordinator.sh/gpu-memory`` (bytes).
        shared: True for a share of one card (per-GPU ratio < 100, or memory in bytes only).
        converted: the whole-pod request after conversion (before the split), upstream's ``podRequests[gpu]``.
    """

    count: int
    per_gpu: dict[str, int]
    shared: bool
    converted: dict[str, int] = field(default_factory=dict)

    @property
    def core(self) -> int:
        """Per-GPU gpu-core percent (0 when not requested)."""
        return self.per_gpu.get(n.RESOURCE_GPU_CORE, 0)

    @property
    def ratio(self) -> int:
        """Per-GPU gpu-memory-ratio percent (0 when not requested)."""
        return self.per_gpu.get(n.RESOURCE_GPU_MEMORY_RATIO, 0)

    @property
    def memory(self) -> int:
        """Per-GPU gpu-memory bytes (0 when not requested)."""
        return self.per_gpu.get(n.RESOURCE_GPU_MEMORY, 0)

    def milli(self) -> int:
        """The request in GPU milli as the fragmentation model counts it: ``count*1000`` for whole GPUs,
        else ``10 * max(core, ratio)`` (a share of one card; 0 when only bytes are asked)."""
        per = max(self.core, self.ratio) * 10
        return per * self.count if per >= 1000 else per


def _percentage_ok(value: int) -> bool:
    """``ValidatePercentageResource``: values above 100 must be whole devices."""
    return not (value > 100 and value % 100 != 0)


def _combination_ok(kind: str, req: dict[str, int]) -> bool:
    core = req.get(n.RESOURCE_GPU_CORE)
    ratio = req.get(n.RESOURCE_GPU_MEMORY_RATIO)
    if kind == _PERCENT:
        return (core is None or _percentage_ok(core)) and (ratio is None or _percentage_ok(ratio))
    if kind == _SHARED:
        shared = req.get(n.RESOURCE_GPU_SHARED, 0)
        if shared <= 0:
            return False
        for value in (core, ratio):
            if value is not None and (value % shared != 0 or value // shared > 100):
                return False
        return True
    if kind == _HUAWEI:
        if req.get(n.RESOURCE_GPU_SHARED, 0) > 1:
            return False
        dvpp = req.get(n.RESOURCE_HUAWEI_NPU_DVPP)
        return dvpp is None or dvpp <= 100
    return True


def _convert(req: dict[str, int]) -> dict[str, int]:
    """``ConvertDeviceRequest``: whole-GPU names become gpu-core + gpu-memory-ratio percents."""
    for whole in (n.RESOURCE_NVIDIA_GPU, n.RESOURCE_AMD_GPU, n.RESOURCE_HYGON_DCU):
        if whole in req:
            return {n.RESOURCE_GPU_CORE: req[whole] * 100, n.RESOURCE_GPU_MEMORY_RATIO: req[whole] * 100}
    if n.RESOURCE_GPU in req:
        return {n.RESOURCE_GPU_CORE: req[n.RESOURCE_GPU], n.RESOURCE_GPU_MEMORY_RATIO: req[n.RESOURCE_GPU]}
    return dict(req)


def _split(converted: dict[str, int]) -> tuple[dict[str, int], int, bool]:
    """``calcDesiredRequestsAndCountForGPU``: per-GPU request, number of GPUs, shared."""
    count = 1
    shared_n = converted.get(n.RESOURCE_GPU_SHARED, 0)
    ratio = converted.get(n.RESOURCE_GPU_MEMORY_RATIO)
    if shared_n > 0:
        count = shared_n
    elif ratio is not None and ratio > 100 and ratio % 100 == 0:
        count = ratio // 100
    per: dict[str, int] = {}
    for name in _PER_GPU:
        if name in converted:
            per[name] = converted[name] // count
    shared = False
    if ratio is not None:
        per[n.RESOURCE_GPU_MEMORY_RATIO] = ratio // count
        shared = per[n.RESOURCE_GPU_MEMORY_RATIO] < 100
    elif n.RESOURCE_GPU_MEMORY in converted:
        shared = True
        per[n.RESOURCE_GPU_MEMORY] = converted[n.RESOURCE_GPU_MEMORY] // count
    return per, count, shared


#: Every GPU resource name (what :func:`gpu_request` reads), for its no-GPU test.
_GPU_NAMES = frozenset(n.GPU_RESOURCE_NAMES)


def gpu_request(requests: dict[str, int]) -> GPURequest | None:
    """The pod's GPU request from its pod-level ``requests`` (base units: percents, bytes, counts).

    Returns None when the pod asks for no GPU resource (the plugin then skips the pod).

    Raises:
        DeviceRequestError: ``invalid resource unit koordinator.sh/gpu: 150`` or
            ``invalid resource device requests: [koordinator.sh/gpu-core]`` (names sorted), as upstream.
    """
    if _GPU_NAMES.isdisjoint(requests):
        return None  # most pods: one pass over their few requests, not a look-up per GPU resource name
    req = {name: requests[name] for name in n.GPU_RESOURCE_NAMES if requests.get(name, 0) > 0}
    if not req:
        return None
    combination = 0
    for name, value in req.items():
        combination |= _FLAGS[name]
        if name == n.RESOURCE_GPU and not _percentage_ok(value):
            raise DeviceRequestError(f"invalid resource unit {name}: {value}")
    kind = _COMBINATIONS.get(combination)
    if kind is None or not _combination_ok(kind, req):
        raise DeviceRequestError(f"invalid resource device requests: [{' '.join(sorted(req))}]")
    converted = _convert(req)
    per, count, shared = _split(converted)
    return GPURequest(count=count, per_gpu=per, shared=shared, converted=converted)


def secondary_requests(requests: dict[str, int]) -> dict[str, int]:
    """The pod's RDMA and FPGA requests: device type -> requested value (``koordinator.sh/rdma`` /
    ``koordinator.sh/fpga``, percent of one device, or a count under ``RequestsAsCount``); empty when none.

    Raises:
        DeviceRequestError: ``invalid resource unit koordinator.sh/rdma: 150`` (a value above 100 must be
            whole devices, ``ValidatePercentageResource``).
    """
    out: dict[str, int] = {}
    for kind, name in n.SECONDARY_RESOURCES.items():
        value = requests.get(name, 0)
        if value <= 0:
            continue
        if not _percentage_ok(value):
            raise DeviceRequestError(f"invalid resource unit {name}: {value}")
        out[kind] = value
    return out
