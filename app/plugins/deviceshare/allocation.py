"""The ``scheduling.koordinator.sh/device-allocated`` pod annotation (``apis/extension/device_share.go``).

Format (Go ``json.Marshal`` of ``DeviceAllocations``: compact, map keys sorted, struct fields in
declaration order ``minor, resources, id``)::

    {"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"8Gi",
    "koordinator.sh/gpu-memory-ratio":"50"},"id":"GPU-..."}]}

Quantities are strings: percents as DecimalSI, gpu-memory bytes as BinarySI (``16Gi``).

Every device type shares the shape; map keys sort ``fpga``, ``gpu``, ``rdma``; an RDMA entry given a
virtual function carries it in ``extension`` (``minor`` and ``busID``, each omitted when empty)::

    {"gpu":[...],"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"1"},"id":"0000:1f:00.0",
    "extension":{"vfs":[{"minor":1,"busID":"0000:1f:00.2"}]}}]}
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from app.api.quantity import QuantityError, parse_resource_list
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.devices import DEVICE_TYPES, VirtualFunction

_BINARY = ((60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki"))
_DECIMAL = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"))


class AllocationError(ValueError):
    """The annotation is not valid JSON of the expected shape; the message says where."""


@dataclass(frozen=True, slots=True)
class GPUAllocation:
    """One device given to a pod (``DeviceAllocation``; named for its first use, GPUs, and used for every
    type): its ``minor``, the ``resources`` taken (percents, bytes, counts), the device ``id`` and the
    virtual functions (``vfs``, RDMA with a ``vfSelector`` hint) written as ``extension.vfs``."""

    minor: int
    resources: dict[str, int]
    id: str = ""
    vfs: tuple[VirtualFunction, ...] = ()


#: Any device type's allocation entry (the same shape as a GPU's).
DeviceAllocation = GPUAllocation


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


def _item(a: GPUAllocation) -> dict[str, object]:
    item: dict[str, object] = {
        "minor": a.minor,
        "resources": {k: format_quantity(k, a.resources[k]) for k in sorted(a.resources)},
    }
    if a.id:
        item["id"] = a.id
    if a.vfs:
        vfs = []
        for vf in a.vfs:
            entry: dict[str, object] = {}
            if vf.minor:
                entry["minor"] = vf.minor
            if vf.bus_id:
                entry["busID"] = vf.bus_id
            vfs.append(entry)
        item["extension"] = {"vfs": vfs}
    return item


def format_allocations(gpus: list[GPUAllocation]) -> str:
    """The annotation value for ``gpus`` (see the module docstring)."""
    return orjson.dumps({n.GPU: [_item(a) for a in gpus]}).decode()


def format_device_allocations(allocations: dict[str, list[GPUAllocation]]) -> str:
    """The annotation value for allocations of several types (type -> entries), as Go's ``json.Marshal``
    of ``DeviceAllocations`` writes it: types sorted, types without entries left out."""
    return orjson.dumps({t: [_item(a) for a in allocations[t]] for t in sorted(allocations) if allocations[t]}).decode()


def _load(value: str) -> dict[str, object]:
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise AllocationError(f"{n.ANNOTATION_DEVICE_ALLOCATED}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AllocationError(f"{n.ANNOTATION_DEVICE_ALLOCATED}: expected a JSON object")
    return data


def _vfs(entry: dict[str, object], path: str) -> tuple[VirtualFunction, ...]:
    ext = entry.get("extension")
    if ext is None:
        return ()
    if not isinstance(ext, dict):
        raise AllocationError(f"{path}.extension: expected an object")
    raw = ext.get("vfs")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise AllocationError(f"{path}.extension.vfs: expected a list")
    out = []
    for j, vf in enumerate(raw):
        minor = vf.get("minor", 0) if isinstance(vf, dict) else None
        if isinstance(minor, bool) or not isinstance(minor, int):
            raise AllocationError(f"{path}.extension.vfs[{j}]: expected an object with an integer minor")
        out.append(VirtualFunction(minor, str(vf.get("busID") or "")))
    return tuple(out)


def _entries(data: dict[str, object], kind: str) -> list[GPUAllocation]:
    entries = data.get(kind) or []
    if not isinstance(entries, list):
        raise AllocationError(f"{n.ANNOTATION_DEVICE_ALLOCATED}.{kind}: expected a list")
    out: list[GPUAllocation] = []
    for i, entry in enumerate(entries):
        path = f"{n.ANNOTATION_DEVICE_ALLOCATED}.{kind}[{i}]"
        minor = entry.get("minor", 0) if isinstance(entry, dict) else None
        if isinstance(minor, bool) or not isinstance(minor, int) or not isinstance(entry, dict):
            raise AllocationError(f"{path}.minor: expected an integer")
        try:
            res = parse_resource_list(entry.get("resources"), field=f"{path}.resources")
        except QuantityError as exc:
            raise AllocationError(str(exc)) from None
        out.append(GPUAllocation(minor=minor, resources=res, id=str(entry.get("id") or ""), vfs=_vfs(entry, path)))
    return out


def parse_allocations(value: str) -> list[GPUAllocation]:
    """The GPU entries of an annotation value (other device types are ignored).

    Raises:
        AllocationError: not a JSON object, ``gpu`` not a list, an entry without an integer ``minor``,
            or an invalid quantity.
    """
    return _entries(_load(value), n.GPU)


def parse_device_allocations(value: str) -> dict[str, list[GPUAllocation]]:
    """Every known type's entries of an annotation value (type -> entries; types without entries absent).

    Raises:
        AllocationError: as :func:`parse_allocations`, for any of ``gpu``, ``rdma``, ``fpga``, or a
            malformed ``extension.vfs``.
    """
    data = _load(value)
    out = {}
    for kind in DEVICE_TYPES:
        entries = _entries(data, kind)
        if entries:
            out[kind] = entries
    return out
