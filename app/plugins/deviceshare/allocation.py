"""The ``scheduling.koordinator.sh/device-allocated`` pod annotation (``apis/extension/device_share.go``).

Format (Go ``json.Marshal`` of ``DeviceAllocations``: compact, map keys sorted, struct fields in
declaration order ``minor, resources, id``)::

    {"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"8Gi",
    "koordinator.sh/gpu-memory-ratio":"50"},"id":"GPU-..."}]}

Quantities are strings: percents as DecimalSI, gpu-memory bytes as BinarySI (``16Gi``).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from app.api.quantity import QuantityError, parse_resource_list
from app.plugins.deviceshare import names as n

_BINARY = ((60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki"))
_DECIMAL = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"))


class AllocationError(ValueError):
    """The annotation is not valid JSON of the expected shape; the message says where."""


@dataclass(frozen=True, slots=True)
class GPUAllocation:
    """One GPU given to a pod: its ``minor``, the ``resources`` taken (percents, bytes) and the device ``id``."""

    minor: int
    resources: dict[str, int]
    id: str = ""


def _binary_si(value: int) -> str:
    """``resource.NewQuantity(v, BinarySI).String()`` for a non-negative integer."""
    if value >= 1024:
        for exp, suffix in _BINARY:
            if value % (1 << exp) == 0:
                return f"{value >> exp}{suffix}"
    return str(value)


def _decimal_si(value: int) -> str:
    """``resource.NewQuantity(v, DecimalSI).String()`` for a non-negative integer."""
    if value:
        for exp, suffix in _DECIMAL:
            if value % 10**exp == 0:
                return f"{value // 10**exp}{suffix}"
    return str(value)


def format_quantity(name: str, value: int) -> str:
    """A device quantity as upstream writes it: gpu-memory BinarySI, everything else DecimalSI."""
    return _binary_si(value) if name == n.RESOURCE_GPU_MEMORY else _decimal_si(value)


def format_allocations(gpus: list[GPUAllocation]) -> str:
    """The annotation value for ``gpus`` (see the module docstring)."""
    items = []
    for a in gpus:
        item: dict[str, object] = {
            "minor": a.minor,
            "resources": {k: format_quantity(k, a.resources[k]) for k in sorted(a.resources)},
        }
        if a.id:
            item["id"] = a.id
        items.append(item)
    return orjson.dumps({n.GPU: items}).decode()


def parse_allocations(value: str) -> list[GPUAllocation]:
    """The GPU entries of an annotation value (other device types are ignored).

    Raises:
        AllocationError: not a JSON object, ``gpu`` not a list, an entry without an integer ``minor``,
            or an invalid quantity.
    """
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise AllocationError(f"{n.ANNOTATION_DEVICE_ALLOCATED}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AllocationError(f"{n.ANNOTATION_DEVICE_ALLOCATED}: expected a JSON object")
    entries = data.get(n.GPU) or []
    if not isinstance(entries, list):
        raise AllocationError(f"{n.ANNOTATION_DEVICE_ALLOCATED}.gpu: expected a list")
    out: list[GPUAllocation] = []
    for i, entry in enumerate(entries):
        path = f"{n.ANNOTATION_DEVICE_ALLOCATED}.gpu[{i}]"
        minor = entry.get("minor", 0) if isinstance(entry, dict) else None
        if isinstance(minor, bool) or not isinstance(minor, int):
            raise AllocationError(f"{path}.minor: expected an integer")
        try:
            res = parse_resource_list(entry.get("resources"), field=f"{path}.resources")
        except QuantityError as exc:
            raise AllocationError(str(exc)) from None
        out.append(GPUAllocation(minor=minor, resources=res, id=str(entry.get("id") or "")))
    return out
