"""What one descheduling round reads: nodes, their pods, NodeMetrics and PDBs at one instant.

A :class:`ClusterView` is built from the cluster cache (:func:`app.descheduler.runner.view_from_cache`)
or directly by tests; the planning modules never touch the cache or the API.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.api.koordext import ANNOTATION_NODE_RAW_ALLOCATABLE
from app.api.quantity import QuantityError, parse_resource_list
from app.cache.podinfo import PodInfo

log = logging.getLogger("koord.descheduler")


@dataclass(slots=True)
class NodeView:
    """One node as the descheduler sees it.

    Attributes:
        name, labels: metadata.
        allocatable: raw allocatable (``node.koordinator.sh/raw-allocatable`` when present and valid,
            else ``status.allocatable``): cpu milli-cores, memory bytes, pods count.
        unschedulable: ``spec.unschedulable``.
        taints: ``spec.taints`` as received.
        requested: summed requests of the node's non-terminated pods (for nodeFit's resource check).
    """

    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    unschedulable: bool = False
    taints: list[dict[str, Any]] = field(default_factory=list)
    requested: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class PodView:
    """One pod: its parsed :class:`PodInfo` and the object (for volumes, owners, affinity, tolerations)."""

    info: PodInfo
    obj: dict[str, Any]

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return self.info.key


@dataclass
class ClusterView:
    """Input of one round.

    Attributes:
        nodes: every node, by name.
        pods_by_node: non-terminated pods assigned to each node.
        node_metrics: NodeMetric objects by node name.
        pdbs: PodDisruptionBudget objects (policy/v1).
        now: epoch seconds of the round (metric freshness, anomaly timeouts).
        migrating: ``namespace/name`` of pods with an unfinished PodMigrationJob -> the job's name
            (such pods are not chosen again, as upstream's MigrationController filter does).
    """

    nodes: dict[str, NodeView]
    pods_by_node: dict[str, list[PodView]]
    node_metrics: dict[str, dict[str, Any]]
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    now: float = 0.0
    migrating: dict[str, str] = field(default_factory=dict)


def raw_allocatable(node: dict[str, Any], allocatable: dict[str, int]) -> dict[str, int]:
    """The node's raw allocatable (``GetNodeRawAllocatableFromNode``): the annotation's ResourceList when
    present and parsable, else ``allocatable`` (a bad annotation is logged, as upstream does)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_NODE_RAW_ALLOCATABLE)
    if not text:
        return allocatable
    try:
        return parse_resource_list(orjson.loads(text), field=ANNOTATION_NODE_RAW_ALLOCATABLE)
    except (orjson.JSONDecodeError, QuantityError, TypeError) as exc:
        name = (node.get("metadata") or {}).get("name")
        log.error("Failed to parse %s raw allocatable, using amplified allocatable as fallback: %s", name, exc)
        return allocatable


def node_view(node: dict[str, Any], allocatable: dict[str, int], requested: dict[str, int] | None = None) -> NodeView:
    """A :class:`NodeView` of a Node object whose ``status.allocatable`` was parsed into ``allocatable``."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    return NodeView(
        name=str(meta.get("name") or ""),
        labels=dict(meta.get("labels") or {}),
        allocatable=raw_allocatable(node, allocatable),
        unschedulable=bool(spec.get("unschedulable")),
        taints=taints,
        requested=dict(requested or {}),
    )
