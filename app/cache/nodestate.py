"""The cached view of one Node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.api.jsonbytes import pack_object, unpack_object
from app.api.quantity import QuantityError, parse_resource_list


class NodeError(ValueError):
    """A node object does not have the shape of a v1 Node; the message names the field."""


@dataclass(slots=True)
class NodeState:
    """Scheduling view of one node.

    Attributes:
        name: ``metadata.name``.
        raw: the Node object as received, as packed JSON bytes (:func:`app.api.jsonbytes.pack_object`; a
            decoded Node is ~8 KB of Python objects, read only by the manager's controllers); read
            it decoded through :attr:`obj`.
        labels, annotations: metadata maps.
        allocatable: ``status.allocatable`` as internal integers (cpu milli, others base units).
        requested: summed requests of the non-terminated pods on the node, assumed ones included.
        pods: uids of those pods.
        row: the node's row in the cache's :class:`~app.cache.nodetable.NodeTable`.
    """

    name: str
    raw: bytes
    labels: dict[str, str]
    annotations: dict[str, str]
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)
    row: int = -1

    @property
    def obj(self) -> dict[str, Any]:
        """The Node object as received, decoded afresh on each read (a copy: edits do not reach the cache)."""
        decoded: dict[str, Any] = unpack_object(self.raw)
        return decoded


def parse_node(obj: Any) -> NodeState:
    """Parse a v1 Node (JSON-shaped dict) into a :class:`NodeState` with empty accounting.

    Raises:
        NodeError: not shaped like a Node, an allocatable quantity is invalid, or it holds a value
            JSON cannot carry.
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
    try:
        raw = pack_object(obj)
    except TypeError as exc:
        raise NodeError(f"Node {name}: {exc}") from None
    return NodeState(name=name, raw=raw, labels=labels, annotations=annotations, allocatable=allocatable)
