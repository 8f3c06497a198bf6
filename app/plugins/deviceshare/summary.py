"""NodeDeviceSummary, as upstream's REST service answers it (``deviceshare/device_summary.go``).

JSON fields: ``deviceTotal`` / ``deviceFree`` / ``deviceUsed`` (resource -> quantity summed over the
node's devices), ``deviceTotalDetail`` / ``deviceFreeDetail`` / ``deviceUsedDetail``
(type -> minor -> ResourceList) and ``allocateSet`` (type -> ``namespace/name`` -> minor -> ResourceList).
Quantities are in the inspection API's one form per resource (:func:`app.api.quantity.display_resource`:
``gpu-core`` ``1000``, not ``1k``), as everywhere the service shows them.
"""

from __future__ import annotations

from typing import Any

from app.api.quantity import display_resource
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.nodedevice import NodeDevice


def _rl(values: dict[str, int]) -> dict[str, str]:
    return {k: display_resource(k, values[k]) for k in sorted(values)}


def _detail(per_minor: dict[int, dict[str, int]]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    summed: dict[str, int] = {}
    detail: dict[str, dict[str, str]] = {}
    for minor in sorted(per_minor):
        res = per_minor[minor]
        detail[str(minor)] = _rl(res)
        for k, v in res.items():
            summed[k] = summed.get(k, 0) + v
    return _rl(summed), detail


def _merge(into: dict[str, str], more: dict[str, str]) -> dict[str, str]:
    """Sums of two device types (their resource names never overlap), keys sorted."""
    merged = {**into, **more}
    return {k: merged[k] for k in sorted(merged)}


def _add_other_types(nd: NodeDevice, out: dict[str, Any]) -> None:
    """Add the RDMA/FPGA devices and allocations: details per type, and their resources to the sums."""
    for kind in sorted(k for k in nd.infos if k != n.GPU):
        infos = nd.infos[kind]
        if not infos:
            continue
        state = nd.type_state(kind)
        for field, per_minor in (("Total", {m: info.total() for m, info in infos.items()}), ("Free", state.free)):
            summed, out[f"device{field}Detail"][kind] = _detail(per_minor)
            out[f"device{field}"] = _merge(out[f"device{field}"], summed)
        used = nd.other_used.get(kind, {})
        if used:
            summed, out["deviceUsedDetail"][kind] = _detail(used)
            out["deviceUsed"] = _merge(out["deviceUsed"], summed)
        holders = {
            key: {str(a.minor): _rl(a.resources) for a in nd.extra[uid][kind]}
            for uid, (key, _) in nd.pods.items()
            if kind in nd.extra.get(uid, {})
        }
        if holders:
            out["allocateSet"][kind] = dict(sorted(holders.items()))


def node_summary(nd: NodeDevice) -> dict[str, Any]:
    """The NodeDeviceSummary of one node: GPUs, then RDMA and FPGA devices (each type's resources have
    their own names, so the sums merge without overlap)."""
    out: dict[str, Any] = {
        "deviceTotal": {},
        "deviceFree": {},
        "deviceUsed": {},
        "deviceTotalDetail": {},
        "deviceFreeDetail": {},
        "deviceUsedDetail": {},
        "allocateSet": {},
    }
    if nd.has_device:
        out["deviceTotal"], out["deviceTotalDetail"][n.GPU] = _detail({m: nd.total(m) for m in nd.gpus})
        out["deviceFree"], out["deviceFreeDetail"][n.GPU] = _detail({m: nd.free(m) for m in nd.gpus})
    if nd.used:
        out["deviceUsed"], out["deviceUsedDetail"][n.GPU] = _detail(nd.used)
    if any(allocs for _, allocs in nd.pods.values()):
        out["allocateSet"][n.GPU] = {
            key: {str(a.minor): _rl(a.resources) for a in allocs} for key, allocs in sorted(nd.pods.values()) if allocs
        }
    if nd.has_device:
        _add_other_types(nd, out)
    return out
