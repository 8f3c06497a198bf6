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


def _device_exists(cache: ClusterCache, rows: dict[str, int]) -> npt.NDArray[np.bool_]:
    """(N, 8) bool: the minor is a healthy GPU of the node's Device."""
    exists = np.zeros((len(rows), MAX_GPUS), dtype=bool)
    for name, device in cache.objects.get("Device", {}).items():
        row = rows.get(name)
        if row is None:
            continue
        for minor, healthy in _device_slots(device).items():
            if 0 <= minor < MAX_GPUS:
                exists[row, minor] = healthy
    return exists


#: One bound GPU pod's share of the slots: (row, minor, milli) triples, or None (no annotation).
PodSlots = list[tuple[int, int, int]] | None


def _pod_slots(
    cache: ClusterCache, uid: str, rows: dict[str, int], exists: npt.NDArray[np.bool_], problems: list[str]
) -> tuple[bool, PodSlots]:
    """(counts, slots) of the pod ``uid`` in the cache: ``counts`` False for a pod the GPU usage
    ignores (unknown, not bound to a node of ``rows``, no GPU, terminated); ``slots`` None when a
    counted pod has no device-allocated annotation. Problems are appended to ``problems``."""
    pod = cache.pods.get(uid)
    if pod is None:
        return False, None
    row = rows.get(pod.node_name) if pod.node_name else None
    percent = _pod_gpu_percent(pod.requests)
    if row is None or percent == 0 or pod.terminated:
        return False, None
    raw = pod.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if raw is None:
        return True, None
    return True, _annotation_slots(problems, pod.key, pod.node_name, row, exists, raw, percent)


def read_gpu_usage(cache: ClusterCache, rows: dict[str, int]) -> GpuUsage:
    """Per-slot usage over the nodes ``rows`` (name -> row) from the bound pods' annotations.

    Checks, each failure becoming one line of ``problems``: an annotation is valid JSON with
    integer minors of a healthy GPU of the node's Device, each slot's use stays within 1000 milli,
    and each pod's annotated gpu-core adds up to what it requested. Call it on the server's loop.
    """
    exists = _device_exists(cache, rows)
    usage = GpuUsage(np.zeros((len(rows), MAX_GPUS), dtype=np.int64), exists)
    for uid in cache.pods:
        counts, slots = _pod_slots(cache, uid, rows, exists, usage.problems)
        if not counts:
            continue
        if slots is None:
            usage.unannotated_pods += 1
            continue
        usage.annotated_pods += 1
        for row, minor, milli in slots:
            usage.used_milli[row, minor] += milli
    over = np.argwhere(usage.used_milli > MILLI_PER_GPU)
    names = {r: nm for nm, r in rows.items()}
    for r, minor in over.tolist():
        usage.problems.append(f"node {names[r]} GPU {minor}: {usage.used_milli[r, minor]} milli allocated, above 1000")
    return usage


class GpuUsageTracker:
    """:func:`read_gpu_usage`'s per-slot use, kept up to date pod by pod instead of re-read whole.

    The fragmentation metric needs the slots' use after hundreds of arrivals; re-reading every
    bound pod's annotation each time costs O(pods) per sample. The tracker reads only the pods the
    caller names as changed (bound or deleted since the last :meth:`update`) and keeps each pod's
    share, so a sample costs O(changes). It counts exactly the pods :func:`read_gpu_usage` counts
    (a pod's annotation is written once, at bind), so :meth:`update` returns the same ``used_milli``,
    ``exists`` and pod counts; its ``problems`` cover the changed pods only (the end-of-run
    :func:`check_allocations` still reads everything).

    Args:
        rows: node name -> row (N nodes).
    """

    def __init__(self, rows: dict[str, int]) -> None:
        self.rows = rows
        self._exists: npt.NDArray[np.bool_] | None = None
        self._used = np.zeros((len(rows), MAX_GPUS), dtype=np.int64)
        self._slots: dict[str, PodSlots] = {}  # counted pod uid -> its slots (None: unannotated)
        self._unannotated = 0

    def update(self, cache: ClusterCache, changed: list[str]) -> GpuUsage:
        """Re-read the pods ``changed`` (uids bound or deleted since the last call) and return the
        usage now. Call it on the server's loop."""
        if self._exists is None:
            self._exists = _device_exists(cache, self.rows)
        problems: list[str] = []
        for uid in changed:
            if uid in self._slots:
                old = self._slots.pop(uid)
                if old is None:
                    self._unannotated -= 1
                else:
                    for row, minor, milli in old:
                        self._used[row, minor] -= milli
            counts, slots = _pod_slots(cache, uid, self.rows, self._exists, problems)
            if not counts:
                continue
            self._slots[uid] = slots
            if slots is None:
                self._unannotated += 1
                continue
            for row, minor, milli in slots:
                self._used[row, minor] += milli
        return GpuUsage(
            self._used.copy(),
            self._exists.copy(),
            problems,
            annotated_pods=len(self._slots) - self._unannotated,
            unannotated_pods=self._unannotated,
        )


def _annotation_slots(
    problems: list[str], key: str, node: str, row: int, exists: npt.NDArray[np.bool_], raw: str, percent: int
) -> list[tuple[int, int, int]]:
    """The (row, minor, milli) slots of one pod's device-allocated annotation ``raw``; what is
    wrong with it is appended to ``problems`` (a malformed annotation gives no slots)."""
    slots: list[tuple[int, int, int]] = []
    try:
        data = orjson.loads(raw)
        entries = data.get("gpu") or []
        total = 0
        for entry in entries:
            minor = int(entry["minor"])
            core = int(parse(entry["resources"][RESOURCE_GPU_CORE]))
            if not 0 <= minor < MAX_GPUS or not exists[row, minor]:
                problems.append(f"pod {key}: minor {minor} is not a healthy GPU of node {node}")
                continue
            slots.append((row, minor, core * MILLI_PER_PERCENT))
            total += core
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError, QuantityError) as exc:
        problems.append(f"pod {key}: malformed {ANNOTATION_DEVICE_ALLOCATED} {raw!r}: {exc}")
        return slots  # what was read before the error, as the slots were always accounted
    if total != percent:
        problems.append(f"pod {key}: annotation allocates {total} gpu-core in total, the pod requested {percent}")
    return slots


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
