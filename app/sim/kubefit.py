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
        names: the nodes of the run, in the order the extender is sent them.
    """

    def __init__(self, cache: ClusterCache, names: list[str]) -> None:
        self.cache = cache
        self.names = names
        self.rows = np.array([cache.table.row(n) for n in names], dtype=np.int64)
        objs = [cache.nodes[n].obj for n in names]
        self._labels = [cache.nodes[n].labels for n in names]
        self._taints = [list((o.get("spec") or {}).get("taints") or []) for o in objs]
        self._unschedulable = [bool((o.get("spec") or {}).get("unschedulable")) for o in objs]
        self._static: dict[bytes, tuple[npt.NDArray[np.bool_], Counter[str]]] = {}

    def _static_mask(self, spec: dict[str, Any]) -> tuple[npt.NDArray[np.bool_], Counter[str]]:
        key = constraints_key(spec)
        hit = self._static.get(key)
        if hit is not None:
            return hit
        tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
        wanted = spec.get("nodeName") or ""
        tolerates_unschedulable = tolerates(tolerations, UNSCHEDULABLE_TAINT)
        mask = np.zeros(len(self.names), dtype=bool)
        reasons: Counter[str] = Counter()
        for i, name in enumerate(self.names):
            if self._unschedulable[i] and not tolerates_unschedulable:
                reasons[REASON_UNSCHEDULABLE] += 1
            elif wanted and wanted != name:
                reasons[REASON_NODE_NAME] += 1
            elif (taint := untolerated_taint(self._taints[i], tolerations)) is not None:
                reasons[_taint_reason(taint)] += 1
            elif not required_affinity_matches(spec, self._labels[i], name):
                reasons[REASON_AFFINITY] += 1
            else:
                mask[i] = True
        self._static[key] = (mask, reasons)
        return mask, reasons

    def feasible(self, pod: PodInfo, spec: dict[str, Any]) -> tuple[npt.NDArray[np.int64], Counter[str]]:
        """Positions (into ``names``) of the nodes passing every filter, and the failing nodes counted by
        reason (each node under its first failing filter, ``Plugin: reason`` as ``koord explain`` words it)."""
        mask, static_reasons = self._static_mask(spec)
        reasons = Counter(static_reasons)
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return candidates, reasons
        rows = self.rows[candidates]
        fits = np.ones(len(candidates), dtype=bool)
        failure = np.full(len(candidates), "", dtype=object)
        pods_alloc, _ = self.cache.allocatable_and_requested("pods", rows)
        counts = np.fromiter(
            (len(self.cache.nodes[self.names[c]].pods) for c in candidates.tolist()), np.int64, count=len(candidates)
        )
        too_many = counts + 1 > pods_alloc
        failure[too_many] = "NodeResourcesFit: Too many pods"
        fits &= ~too_many
        resources = [*FIT_RESOURCES, *sorted(r for r in pod.requests if r.startswith("hugepages-"))]
        for res in resources:
            wanted = pod.requests.get(res, 0)
            if wanted <= 0:
                continue
            alloc, requested = self.cache.allocatable_and_requested(res, rows)
            short = alloc - requested < wanted
            failure[short & fits] = f"NodeResourcesFit: Insufficient {res}"
            fits &= ~short
        reasons.update(failure[~fits].tolist())
        return candidates[fits], reasons
