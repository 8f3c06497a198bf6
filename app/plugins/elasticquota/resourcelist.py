"""ResourceList arithmetic over internal integers, as ``k8s.io/apiserver/pkg/quota/v1`` does it.

A ResourceList here is ``dict[str, int]`` (cpu in milli-cores, memory in bytes, other resources
in base units). Missing keys count as zero where upstream treats them so.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.api.quantity import format_resource

ResourceList = dict[str, int]


def add(a: ResourceList, b: ResourceList) -> ResourceList:
    """``quotav1.Add``: union of keys, values summed."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def subtract(a: ResourceList, b: ResourceList) -> ResourceList:
    """``quotav1.Subtract``: union of keys, ``a - b`` (may be negative)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def mask(a: ResourceList, names: Iterable[str]) -> ResourceList:
    """``quotav1.Mask``: only the keys of ``a`` that are in ``names``."""
    keep = set(names)
    return {k: v for k, v in a.items() if k in keep}


def is_zero(a: ResourceList) -> bool:
    """``quotav1.IsZero``: every value is 0 (an empty list is zero)."""
    return all(v == 0 for v in a.values())


def less_equal(a: ResourceList, limit: ResourceList) -> tuple[bool, list[str]]:
    """``quotav1.LessThanOrEqual``: for every key of ``limit`` that ``a`` also has, ``a <= limit``.

    Keys of ``a`` missing from ``limit`` are not checked. Returns (ok, exceeded keys sorted).
    """
    exceeded = sorted(k for k, v in limit.items() if k in a and a[k] > v)
    return not exceeded, exceeded


def less_equal_completely(a: ResourceList, b: ResourceList) -> bool:
    """``util.LessThanOrEqualCompletely``: every key of ``a`` is <= ``b`` (missing in ``b`` = 0)."""
    return all(v <= b.get(k, 0) for k, v in a.items())


def print_resource_list(rl: ResourceList) -> str:
    """``printResourceList``: ``cpu:2,memory:4Gi`` sorted, or ``<empty>``."""
    if not rl:
        return "<empty>"
    return ",".join(sorted(f"{k}:{format_resource(k, v)}" for k, v in rl.items()))


def go_list(names: list[str]) -> str:
    """A string slice as Go's ``%v`` prints it: ``[cpu memory]``."""
    return "[" + " ".join(names) + "]"
