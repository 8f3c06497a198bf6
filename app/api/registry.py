"""Kind name -> model table, plus validation and JSON dumping of Koordinator objects.

``validate_object`` turns pydantic's errors into one readable :class:`ObjectValidationError`
naming the kind, the object and the first failing JSON field path, e.g.
``NodeMetric node-1: status.updateTime: Input should be a valid datetime ...``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from app.api.colocation import ClusterColocationProfile
from app.api.meta import KubeObject
from app.api.scheduling import Device, PodMigrationJob, Reservation
from app.api.sigs import ElasticQuota, PodGroup
from app.api.slo import NodeMetric, NodeSLO

#: Model of each Koordinator kind, keyed by upstream's kind name.
MODELS: dict[str, type[KubeObject]] = {
    model.KIND: model
    for model in (
        NodeMetric,
        NodeSLO,
        Reservation,
        Device,
        PodMigrationJob,
        ClusterColocationProfile,
        ElasticQuota,
        PodGroup,
    )
}


class ObjectValidationError(ValueError):
    """An object does not fit its kind's model.

    Attributes:
        kind: the kind it was validated as.
        name: ``namespace/name`` (or ``name``) from the object's metadata, ``<unnamed>`` if absent.
        path: JSON path of the first failing field (``spec.owners[0].controller.uid``),
            ``<root>`` when the object as a whole is wrong.
        detail: what is wrong with that field.
    """

    def __init__(self, kind: str, name: str, path: str, detail: str) -> None:
        """Build the error; the message is ``"<kind> <name>: <path>: <detail>"``."""
        super().__init__(f"{kind} {name}: {path}: {detail}")
        self.kind = kind
        self.name = name
        self.path = path
        self.detail = detail


def _object_name(obj: Any) -> str:
    """``namespace/name`` or ``name`` from a raw object's metadata; ``<unnamed>`` if missing."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not meta.get("name"):
        return "<unnamed>"
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def _error_path(obj: Any, loc: tuple[int | str, ...], missing: bool) -> str:
    """Render a pydantic error location as a JSON path, following the input document.

    Location parts that do not exist in the input (pydantic's union member tags such as
    ``str``/``int``) are dropped, except the last part of a ``missing`` error, which names the
    absent field.
    """
    parts: list[str] = []
    node: Any = obj
    for i, part in enumerate(loc):
        in_mapping = isinstance(node, Mapping) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_mapping or in_list:
            node = node[part]
        elif missing and i == len(loc) - 1:
            node = None
        else:
            break
        parts.append(f"[{part}]" if isinstance(part, int) else ("." if parts else "") + str(part))
    return "".join(parts) or "<root>"


def validate_object(kind: str, obj: dict[str, Any]) -> KubeObject:
    """Validate a JSON-shaped object as ``kind`` and return its model instance.

    Raises:
        ObjectValidationError: the kind is not in :data:`MODELS` (path ``kind``), or the object
            does not fit the model; the message names the first failing field path and, when
            several union alternatives failed at that path, each of their complaints.
    """
    name = _object_name(obj)
    model = MODELS.get(kind)
    if model is None:
        raise ObjectValidationError(kind, name, "kind", f"unknown kind (known: {', '.join(sorted(MODELS))})")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        path = _error_path(obj, tuple(first["loc"]), first["type"] == "missing")
        messages = [first["msg"]]
        for err in errors[1:]:
            same = _error_path(obj, tuple(err["loc"]), err["type"] == "missing") == path
            if same and err["msg"] not in messages:
                messages.append(err["msg"])
        raise ObjectValidationError(kind, name, path, "; ".join(messages)) from exc


def dump_object(model: BaseModel) -> dict[str, Any]:
    """JSON-shaped dict of a model: upstream (alias) field names, ``None`` fields left out.

    Timestamps become RFC 3339 strings (UTC as ``Z``); unknown fields kept at validation are
    written back unchanged.
    """
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
