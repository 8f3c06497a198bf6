"""kube-scheduler's own node fit for the trace pods, vectorised over nodes.

What kube-scheduler checks before it calls the extender, for the resources the trace uses:
NodeResourcesFit (``cpu``, ``memory`` and the extended resources ``nvidia.com/gpu``,
``koordinator.sh/gpu-core``, ``koordinator.sh/gpu-memory-ratio`` against allocatable minus the
requests of the pods bound there) and NodeAffinity (the pod's required GPU models against the
``node.koordinator.sh/gpu-model`` label). Messages are kube-scheduler's: ``Insufficient <resource>``
and ``node(s) didn't match Pod's node affinity/selector``. Units: cpu milli-cores, memory bytes,
``nvidia.com/gpu`` count, gpu-core and gpu-memory-ratio percent of one GPU.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from app.sim.objects import (
    PERCENT_PER_GPU,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_NVIDIA_GPU,
)
from app.sim.trace import MILLI_PER_GPU, TraceNode, TracePod

#: Resource columns, in the order kube-scheduler reports insufficiencies.
RESOURCES: tuple[str, ...] = ("cpu", "memory", RESOURCE_NVIDIA_GPU, RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY_RATIO)
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
MIB = 1 << 20


def pod_vector(pod: TracePod) -> npt.NDArray[np.int64]:
    """The pod's requests over :data:`RESOURCES` (cpu milli, memory bytes, GPU count, percents)."""
    shared = pod.num_gpu == 1 and pod.gpu_milli < MILLI_PER_GPU
    share = pod.gpu_milli * PERCENT_PER_GPU // MILLI_PER_GPU if shared else 0
    whole = 0 if shared else pod.num_gpu
    return np.array([pod.cpu_milli, pod.memory_mib * MIB, whole, share, share], dtype=np.int64)


class NodeFit:
    """Allocatable and requested per node over :data:`RESOURCES`, with a per-constraint model mask.

    Args:
        nodes: the cluster's nodes in row order (row i = ``nodes[i]``).
    """

    def __init__(self, nodes: list[TraceNode]) -> None:
        self.names = [n.name for n in nodes]
        self.models = np.array([n.model for n in nodes], dtype=object)
        self.allocatable = np.array(
            [[n.cpu_milli, n.memory_mib * MIB, n.gpu, PERCENT_PER_GPU * n.gpu, PERCENT_PER_GPU * n.gpu] for n in nodes],
            dtype=np.int64,
        ).reshape(len(nodes), len(RESOURCES))
        self.requested = np.zeros_like(self.allocatable)
        # allocatable - requested kept by add/remove, one contiguous row per resource (``feasible``
        # compares a column per wanted resource: ~10,000 calls per run, each over every node)
        self._free_by_resource = self.allocatable.T.copy(order="C")  # a copy even where .T is contiguous (1 node)
        self._masks: dict[tuple[str, ...], npt.NDArray[np.bool_]] = {}

    def model_mask(self, models: tuple[str, ...] | None) -> npt.NDArray[np.bool_] | None:
        """Nodes whose GPU model is one of ``models`` (None: no constraint), cached per constraint."""
        if models is None:
            return None
        mask = self._masks.get(models)
        if mask is None:
            mask = np.isin(self.models, list(models))
            self._masks[models] = mask
        return mask

    def free_by_resource(self) -> npt.NDArray[np.int64]:
        """Allocatable minus requested, (len(:data:`RESOURCES`), N): row i is resource i over the nodes in row
        order (cpu milli-cores, memory bytes, GPUs, GPU core and memory percent). A read-only view of the
        state ``add`` and ``remove`` keep: valid until the next of them."""
        view = self._free_by_resource.view()
        view.flags.writeable = False
        return view

    def feasible(self, pod: TracePod, vector: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Rows of the nodes where ``pod`` (requests ``vector``) fits, ascending: free >= request on every
        resource the pod requests (> 0), and the model constraint."""
        free = self._free_by_resource
        ok = self.model_mask(pod.gpu_models)
        ok = np.ones(len(self.names), dtype=bool) if ok is None else ok.copy()
        for i, amount in enumerate(vector.tolist()):
            if amount > 0:
                ok &= free[i] >= amount
        return np.flatnonzero(ok)

    def reasons(self, pod: TracePod, vector: npt.NDArray[np.int64]) -> Counter[str]:
        """Per reason, how many nodes fail ``pod`` for it (each node counted once, first failure:
        node affinity, then resources in :data:`RESOURCES` order), as kube-scheduler's
        ``0/N nodes are available: ...`` message counts them."""
        out: Counter[str] = Counter()
        free = self._free_by_resource
        undecided = np.ones(len(self.names), dtype=bool)
        mask = self.model_mask(pod.gpu_models)
        if mask is not None:
            out[REASON_AFFINITY] = int((~mask).sum())
            undecided &= mask
        for i, res in enumerate(RESOURCES):
            if vector[i] <= 0:
                continue
            short = undecided & (free[i] < vector[i])
            if short.any():
                out[f"Insufficient {res}"] = int(short.sum())
                undecided &= ~short
        return out

    def add(self, row: int, vector: npt.NDArray[np.int64]) -> None:
        """Account a pod bound to ``row``."""
        self.requested[row] += vector
        self._free_by_resource[:, row] -= vector

    def remove(self, row: int, vector: npt.NDArray[np.int64]) -> None:
        """Release a departed pod from ``row``."""
        self.requested[row] -= vector
        self._free_by_resource[:, row] += vector
