"""NodeResourcesFit over Koordinator-managed and extended resources.

kube-scheduler already checks cpu, memory, ephemeral-storage and pod count itself before it
calls the extender; this plugin checks everything else the pod requests
(``kubernetes.io/batch-cpu``, ``kubernetes.io/batch-memory``, ``kubernetes.io/mid-*``, device and
other extended resources) against allocatable minus requested, where requested includes pods
assumed through this service. Messages follow kube-scheduler's ``Insufficient <resource>``
(pkg/scheduler/framework/plugins/noderesources/fit.go). A node whose allocatable is below the
request even when empty can never fit and is UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from app.cache.podinfo import PodInfo
from app.framework.config import ArgsError
from app.framework.cyclestate import CycleState
from app.framework.handle import Handle
from app.framework.interfaces import FilterFailures, FilterPlugin, NodeBatch
from app.framework.status import Status

NAME = "NodeResourcesFit"

#: Resources kube-scheduler's own NodeResourcesFit handles before calling us.
KUBE_CHECKED = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


def managed_requests(pod: PodInfo) -> dict[str, int]:
    """The pod's non-zero requests this plugin checks (all but cpu/memory/ephemeral-storage/pods/hugepages)."""
    return {
        name: value
        for name, value in pod.requests.items()
        if value > 0 and name not in KUBE_CHECKED and not name.startswith("hugepages-")
    }


class NodeResourcesFit(FilterPlugin):
    """Filter: the pod's managed requests fit the node's free allocatable.

    Units: cpu-like resources in milli (batch-cpu is already milli), others in base units.
    """

    #: Upstream's plugin name (the Go package's ``Name``): the registry key and what ``name`` answers.
    NAME: ClassVar[str] = NAME
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        """Failing positions with ``Insufficient <resource>`` reasons (sorted by resource name)."""
        wanted = managed_requests(pod)
        if not wanted or len(nodes) == 0:
            return {}
        snapshot = self.handle.snapshot
        insufficient: list[tuple[str, np.ndarray]] = []
        never = np.zeros(len(nodes), dtype=bool)
        for name in sorted(wanted):
            alloc, requested = snapshot.allocatable_and_requested(name, nodes.rows)
            if nodes.removed is not None:
                freed = np.array(
                    [sum(p.requests.get(name, 0) for p in victims) for victims in nodes.removed], dtype=np.int64
                )
                requested = requested - freed
            short = wanted[name] > alloc - requested
            if short.any():
                insufficient.append((name, short))
                never |= wanted[name] > alloc
        if not insufficient:
            return {}
        failed_any = np.zeros(len(nodes), dtype=bool)
        for _, short in insufficient:
            failed_any |= short
        out: FilterFailures = {}
        for pos in np.flatnonzero(failed_any).tolist():
            reasons = tuple(f"Insufficient {name}" for name, short in insufficient if short[pos])
            out[pos] = Status.unresolvable(*reasons) if never[pos] else Status.unschedulable(*reasons)
        return out


def new_node_resources_fit(args: dict[str, Any], handle: Handle) -> NodeResourcesFit:
    """Factory: NodeResourcesFit takes no args here.

    Raises:
        ArgsError: any arg is given (this plugin has none).
    """
    if args:
        raise ArgsError(sorted(args)[0], "unknown field (NodeResourcesFit takes no args)")
    return NodeResourcesFit(handle)


def kube_scheduler_fit(pod: PodInfo, allocatable: dict[str, int], requested: dict[str, int], pods: int) -> Status:
    """kube-scheduler's own NodeResourcesFit verdict (pkg/scheduler/framework/plugins/noderesources/fit.go,
    ``fitsRequest``) on what it checks before calling the extender: the pod count, cpu, memory,
    ephemeral-storage and ``hugepages-*``. For ``koord explain`` only: the extender never answers for it.

    Args:
        pod: the pod (requests: cpu in milli, others in base units).
        allocatable: the node's allocatable, same units; ``pods`` is the pod capacity.
        requested: summed requests of the pods already on the node (the pod itself excluded).
        pods: how many pods are on the node (the pod itself excluded).

    Returns:
        Success, or Unschedulable with ``Too many pods`` / ``Insufficient <resource>`` reasons in
        upstream's order (pod count, cpu, memory, ephemeral-storage, then the rest by name).
    """
    reasons: list[str] = []
    if pods + 1 > allocatable.get("pods", 0):
        reasons.append("Too many pods")
    order = ["cpu", "memory", "ephemeral-storage"]
    order += sorted(n for n in pod.requests if n.startswith("hugepages-"))
    for name in order:
        wanted = pod.requests.get(name, 0)
        if wanted > 0 and wanted > allocatable.get(name, 0) - requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return Status.unschedulable(*reasons) if reasons else Status()
