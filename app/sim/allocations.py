"""Per-GPU allocations as the service recorded them, and the simulator's correctness check.

The DeviceShare plugin writes each bound pod's ``scheduling.koordinator.sh/device-allocated``
annotation (upstream ``apis/extension/device_share.go``): ``{"gpu": [{"minor": m, "resources":
{"koordinator.sh/gpu-core": "46", ...}, "id": uuid}]}``. Reading those annotations back from the
cache gives the used milli-GPU of every GPU slot, which the fragmentation metric needs and which
must agree with what the cache accounted on each node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from app.api.quantity import QuantityError, parse
from app.cache.snapshot import ClusterCache
from app.sim.objects import (
    ANNOTATION_DEVICE_ALLOCATED,
    PERCENT_PER_GPU,
    RESOURCE_GPU_CORE,
    RESOURCE_NVIDIA_GPU,
)
from app.sim.trace import MAX_GPUS, MILLI_PER_GPU

MILLI_PER_PERCENT = MILLI_PER_GPU // PERCENT_PER_GPU


@dataclass(slots=True)
class GpuUsage:
    """GPU usage per node row and minor, read from the cache.

    Attributes:
        used_milli: (N, 8) int64 milli-GPU used per slot (from annotations).
        exists: (N, 8) bool, the minor is in the node's Device and healthy.
        problems: what is inconsistent (empty when everything agrees).
        annotated_pods: GPU pods bound with a device-allocated annotation.
        unannotated_pods: GPU pods bound without one.
    """

    used_milli: npt.NDArray[np.int64]
    exists: npt.NDArray[np.bool_]
    problems: list[str] = field(default_factory=list)
    annotated_pods: int = 0
    unannotated_pods: int = 0

    def gpu_free_milli(self) -> npt.NDArray[np.int64]:
        """(N, 8) free milli per slot, -1 where no healthy GPU exists (the fragmentation interface's input)."""
        return np.where(self.exists, MILLI_PER_GPU - self.used_milli, -1).astype(np.int64)


def _pod_gpu_percent(requests: dict[str, int]) -> int:
    """GPU percent requested: ``nvidia.com/gpu`` x 100 plus ``koordinator.sh/gpu-core`` (a trace pod has one of
    them; a node's requested total has both)."""
    return requests.get(RESOURCE_NVIDIA_GPU, 0) * PERCENT_PER_GPU + requests.get(RESOURCE_GPU_CORE, 0)


def _device_slots(device: dict[str, Any]) -> dict[int, bool]:
    """minor -> healthy for the GPUs of a Device object."""
    out: dict[int, bool] = {}
    for dev in (device.get("spec") or {}).get("devices") or []:
        if isinstance(dev, dict) and dev.get("type") == "gpu" and isinstance(dev.get("minor"), int):
            out[dev["minor"]] = bool(dev.get("health"))
    return out


def read_gpu_usage(cache: ClusterCache, rows: dict[str, int]) -> GpuUsage:
    """Per-slot usage over the nodes ``rows`` (name -> row) from the bound pods' annotations.

    Checks, each failure becoming one line of ``problems``: an annotation is valid JSON with
    integer minors of a healthy GPU of the node's Device, each slot's use stays within 1000 milli,
    and each pod's annotated gpu-core adds up to what it requested. Call it on the server's loop.
    """
    n = len(rows)
    used = np.zeros((n, MAX_GPUS), dtype=np.int64)
    exists = np.zeros((n, MAX_GPUS), dtype=bool)
    usage = GpuUsage(used, exists)
    for name, device in cache.objects.get("Device", {}).items():
        row = rows.get(name)
        if row is None:
            continue
        for minor, healthy in _device_slots(device).items():
            if 0 <= minor < MAX_GPUS:
                exists[row, minor] = healthy
    for uid, pod in cache.pods.items():
        row = rows.get(pod.node_name) if pod.node_name else None
        percent = _pod_gpu_percent(pod.requests)
        if row is None or percent == 0 or pod.terminated:
            continue
        obj = cache.pod_objects.get(uid) or {}
        raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_DEVICE_ALLOCATED)
        if raw is None:
            raw = pod.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
        if raw is None:
            usage.unannotated_pods += 1
            continue
        usage.annotated_pods += 1
        _account_annotation(usage, pod.key, pod.node_name, row, raw, percent)
    over = np.argwhere(used > MILLI_PER_GPU)
    names = {r: nm for nm, r in rows.items()}
    for r, minor in over.tolist():
        usage.problems.append(f"node {names[r]} GPU {minor}: {used[r, minor]} milli allocated, above 1000")
    return usage


def _account_annotation(usage: GpuUsage, key: str, node: str, row: int, raw: str, percent: int) -> None:
    try:
        data = orjson.loads(raw)
        entries = data.get("gpu") or []
        total = 0
        for entry in entries:
            minor = int(entry["minor"])
            core = int(parse(entry["resources"][RESOURCE_GPU_CORE]))
            if not 0 <= minor < MAX_GPUS or not usage.exists[row, minor]:
                usage.problems.append(f"pod {key}: minor {minor} is not a healthy GPU of node {node}")
                continue
            usage.used_milli[row, minor] += core * MILLI_PER_PERCENT
            total += core
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError, QuantityError) as exc:
        usage.problems.append(f"pod {key}: malformed {ANNOTATION_DEVICE_ALLOCATED} {raw!r}: {exc}")
        return
    if total != percent:
        usage.problems.append(f"pod {key}: annotation allocates {total} gpu-core in total, the pod requested {percent}")


def check_allocations(cache: ClusterCache, rows: dict[str, int], gpus: npt.NDArray[np.int64]) -> list[str]:
    """Everything wrong with the service's GPU accounting (empty list when consistent).

    ``gpus`` (N,) is each node's GPU count. Besides :func:`read_gpu_usage`'s checks: no node has
    more GPU percent requested (cache, ``nvidia.com/gpu`` x 100 + ``koordinator.sh/gpu-core``)
    than it has GPUs, and, when annotations are written, per node the annotated use equals the
    cache's requested total. Call it on the server's loop.
    """
    usage = read_gpu_usage(cache, rows)
    problems = list(usage.problems)
    for name, row in rows.items():
        node = cache.nodes.get(name)
        if node is None:
            problems.append(f"node {name}: missing from the cache")
            continue
        requested = _pod_gpu_percent(node.requested) * MILLI_PER_PERCENT
        capacity = int(gpus[row]) * MILLI_PER_GPU
        if requested > capacity:
            problems.append(f"node {name}: {requested} milli-GPU requested, capacity {capacity}")
        annotated = int(usage.used_milli[row].sum())
        if usage.unannotated_pods == 0 and annotated != requested:
            problems.append(f"node {name}: annotations allocate {annotated} milli-GPU, the cache accounts {requested}")
    return problems
