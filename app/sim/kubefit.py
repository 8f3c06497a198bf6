"""kube-scheduler's own filters for a what-if run over real cluster objects (not trace pods).

Before it calls the extender, kube-scheduler filters nodes with its in-tree plugins; a what-if run must
do the same for the extender to see the nodes it would see. Checked here, in kube-scheduler's order,
with its messages (pkg/scheduler/framework/plugins):

- ``NodeUnschedulable``: ``spec.unschedulable`` without a toleration of
  ``node.kubernetes.io/unschedulable:NoSchedule`` (``node(s) were unschedulable``);
- ``NodeName``: ``spec.nodeName`` of a pod that names its node (``node(s) didn't match the requested node name``);
- ``TaintToleration``: a NoSchedule/NoExecute taint the pod does not tolerate
  (``node(s) had untolerated taint {key: value}``);
- ``NodeAffinity``: nodeSelector and required node affinity (``node(s) didn't match Pod's node affinity/selector``);
- ``NodeResourcesFit``: pod count, cpu, memory, ephemeral-storage, ``hugepages-*``
  (:func:`app.plugins.noderesources.fit.kube_scheduler_fit`'s set: ``Too many pods``, ``Insufficient cpu``),
  against the service cache's own accounting (assumed pods included).

Node labels, taints and ``unschedulable`` do not change during a run, so the first four are computed
once per distinct pod placement constraints (:func:`constraints_key`) and kept. Inter-pod affinity,
topology spread and ports are not checked (the snapshot keeps no ports; ``koord sim whatif`` says so).

As kube-scheduler, the search stops once enough feasible nodes are found
(:func:`num_feasible_nodes_to_find`, ``percentageOfNodesToScore``: adaptive by default, 10 % of 5,000 nodes)
and the next pod's search starts where this one's stopped (``nextStartNodeIndex``); only those nodes go to
the extender (pkg/scheduler/schedule_one.go ``findNodesThatPassFilters``, ``numFeasibleNodesToFind``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from app.api.nodeaffinity import required_affinity_matches
from app.api.tolerations import UNSCHEDULABLE_TAINT, tolerates, untolerated_taint
from app.cache.podinfo import PodInfo
from app.cache.snapshot import ClusterCache

REASON_UNSCHEDULABLE = "NodeUnschedulable: node(s) were unschedulable"
REASON_NODE_NAME = "NodeName: node(s) didn't match the requested node name"
REASON_AFFINITY = "NodeAffinity: node(s) didn't match Pod's node affinity/selector"
#: kube-scheduler's ``minFeasibleNodesToFind`` and ``minFeasibleNodesPercentageToFind``.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for among ``nodes`` before it stops
    (``numFeasibleNodesToFind``): all below 100 nodes; else ``percentage`` of them (0: adaptive,
    ``50 - nodes/125`` percent, at least 5), at least 100.

    Raises:
        ValueError: ``percentage`` outside [0, 100].
    """
    if not 0 <= percentage <= 100:
        raise ValueError(f"percentageOfNodesToScore must be in [0, 100], got {percentage}")
    if nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return nodes
    if percentage == 0:
        percentage = max(50 - nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


#: Resources kube-scheduler's NodeResourcesFit checks before the extender (besides ``hugepages-*``).
FIT_RESOURCES: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage")


def constraints_key(spec: dict[str, Any]) -> bytes:
    """What of a pod ``spec`` the static filters read (nodeName, nodeSelector, affinity, tolerations), as
    canonical JSON: pods with equal keys pass the same nodes."""
    parts = {k: spec.get(k) for k in ("nodeName", "nodeSelector", "affinity", "tolerations")}
    return orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)


def _taint_reason(taint: dict[str, Any]) -> str:
    """kube-scheduler's ``node(s) had untolerated taint {key: value}``."""
    return f"TaintToleration: node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


class KubeFit:
    """kube-scheduler's filters over the nodes of ``cache`` (names in ``names`` order, fixed for the run).

    Args:
        cache: the service's cache (read on the server's loop).
        names: the nodes of the run, in kube-scheduler's snapshot order.
        percentage: ``percentageOfNodesToScore`` (0: kube-scheduler's adaptive default; 100: every node).

    Raises:
        ValueError: ``percentage`` outside [0, 100].
    """

    def __init__(self, cache: ClusterCache, names: list[str], percentage: int = 0) -> None:
        self.cache = cache
        self.names = names
        self.to_find = num_feasible_nodes_to_find(len(names), percentage)
        #: Where the next search starts (kube-scheduler's ``nextStartNodeIndex``).
        self.next_start = 0
        self.rows = np.array([cache.table.row(n) for n in names], dtype=np.int64)
        #: Pods per node as kube-scheduler counts them (bound and assumed): see :meth:`assume`, :meth:`forget`.
        self.pod_counts = np.array([len(cache.nodes[n].pods) for n in names], dtype=np.int64)
        objs = [cache.nodes[n].obj for n in names]
        self._labels = [cache.nodes[n].labels for n in names]
        self._taints = [list((o.get("spec") or {}).get("taints") or []) for o in objs]
        self._unschedulable = [bool((o.get("spec") or {}).get("unschedulable")) for o in objs]
        self._static: dict[bytes, tuple[npt.NDArray[np.bool_], npt.NDArray[Any]]] = {}

    def _static_failure(self, spec: dict[str, Any]) -> npt.NDArray[Any]:
        return self._static_mask(spec)[1]

    def _static_mask(self, spec: dict[str, Any]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[Any]]:
        """Per node: whether it passes the static filters, and the first failing one's reason ("" if none)."""
        key = constraints_key(spec)
        hit = self._static.get(key)
        if hit is not None:
            return hit
        tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
        wanted = spec.get("nodeName") or ""
        tolerates_unschedulable = tolerates(tolerations, UNSCHEDULABLE_TAINT)
        mask = np.zeros(len(self.names), dtype=bool)
        reasons = np.full(len(self.names), "", dtype=object)
        for i, name in enumerate(self.names):
            if self._unschedulable[i] and not tolerates_unschedulable:
                reasons[i] = REASON_UNSCHEDULABLE
            elif wanted and wanted != name:
                reasons[i] = REASON_NODE_NAME
            elif (taint := untolerated_taint(self._taints[i], tolerations)) is not None:
                reasons[i] = _taint_reason(taint)
            elif not required_affinity_matches(spec, self._labels[i], name):
                reasons[i] = REASON_AFFINITY
            else:
                mask[i] = True
        self._static[key] = (mask, reasons)
        return mask, reasons

    def assume(self, position: int) -> None:
        """A pod was bound (or assumed) on the node at ``position``."""
        self.pod_counts[position] += 1

    def forget(self, position: int) -> None:
        """A pod assumed on the node at ``position`` was not bound after all."""
        self.pod_counts[position] -= 1

    def feasible(self, pod: PodInfo, spec: dict[str, Any]) -> tuple[npt.NDArray[np.int64], Counter[str]]:
        """Positions (into ``names``) of the nodes kube-scheduler would send the extender: passing every filter,
        at most :attr:`to_find` of them from :attr:`next_start` on (which moves past the nodes looked at), and
        the nodes that failed counted by reason (each under its first failing filter, ``Plugin: reason`` as
        ``koord explain`` words it; every node when fewer than :attr:`to_find` passed)."""
        found, failure = self._judge(pod, spec)
        n = len(self.names)
        order = (np.arange(n) + self.next_start) % n if self.next_start else np.arange(n)
        passing = np.flatnonzero(found[order])  # indices into the rotated order
        if len(passing) >= self.to_find:
            processed = int(passing[self.to_find - 1]) + 1
            chosen = order[passing[: self.to_find]]
        else:
            processed = n
            chosen = order[passing]
        self.next_start = (self.next_start + processed) % n if n else 0
        looked = order[:processed]
        failed = looked[~found[looked]]
        return np.sort(chosen), Counter(failure[failed].tolist())

    def _judge(self, pod: PodInfo, spec: dict[str, Any]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[Any]]:
        """Every node's verdict: (passes, the first failing filter's reason or "")."""
        mask, _ = self._static_mask(spec)
        failure = self._static_failure(spec).copy()
        candidates = np.flatnonzero(mask)
        found = np.zeros(len(self.names), dtype=bool)
        if not len(candidates):
            return found, failure
        rows = self.rows[candidates]
        fits = np.ones(len(candidates), dtype=bool)
        sub = np.full(len(candidates), "", dtype=object)
        pods_alloc, _ = self.cache.allocatable_and_requested("pods", rows)
        too_many = self.pod_counts[candidates] + 1 > pods_alloc
        sub[too_many] = "NodeResourcesFit: Too many pods"
        fits &= ~too_many
        resources = [*FIT_RESOURCES, *sorted(r for r in pod.requests if r.startswith("hugepages-"))]
        for res in resources:
            wanted = pod.requests.get(res, 0)
            if wanted <= 0:
                continue
            alloc, requested = self.cache.allocatable_and_requested(res, rows)
            short = alloc - requested < wanted
            sub[short & fits] = f"NodeResourcesFit: Insufficient {res}"
            fits &= ~short
        found[candidates[fits]] = True
        failure[candidates] = sub
        return found, failure
