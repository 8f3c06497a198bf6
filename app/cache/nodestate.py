"""The cached view of one Node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.api.quantity import QuantityError, parse_resource_list


class NodeError(ValueError):
    """A node object does not have the shape of a v1 Node; the message names the field."""


@dataclass(slots=True)
class NodeState:
    """Scheduling view of one node.

    Attributes:
        name: ``metadata.name``.
        obj: the Node object as received (JSON-shaped dict).
        labels, annotations: metadata maps.
        allocatable: ``status.allocatable`` as internal integers (cpu milli, others base units).
        requested: summed requests of the non-terminated pods on the node, assumed ones included.
        pods: uids of those pods.
        row: the node's row in the cache's :class:`~app.cache.nodetable.NodeTable`.
    """

    name: str
    obj: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)
    row: int = -1


def parse_node(obj: Any) -> NodeState:
    """Parse a v1 Node (JSON-shaped dict) into a :class:`NodeState` with empty accounting.

    Raises:
        NodeError: not shaped like a Node, or an allocatable quantity is invalid.
    """
    if not isinstance(obj, dict):
        raise NodeError(f"Node: expected an object, got {type(obj).__name__}")
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if not isinstance(meta, dict) or not isinstance(status, dict):
        raise NodeError("Node: metadata and status must be objects")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise NodeError("Node metadata.name: required")
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if not isinstance(labels, dict) or not isinstance(annotations, dict):
        raise NodeError(f"Node {name}: metadata.labels and metadata.annotations must be maps")
    try:
        allocatable = parse_resource_list(status.get("allocatable"), field=f"Node {name} status.allocatable")
    except QuantityError as exc:
        raise NodeError(str(exc)) from None
    return NodeState(name=name, obj=obj, labels=labels, annotations=annotations, allocatable=allocatable)
