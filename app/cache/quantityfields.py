"""Where the cached kinds other than Node and Pod hold resource quantities, checked before caching.

The cache refuses an object with a quantity that is not a valid Kubernetes quantity or whose value
does not fit int64 (``NaN``, ``"1e400"``, ``"9223372036854775808"``), as it refuses such a Node or
Pod: the object is skipped whole, with a log line and ``koord_cache_rejected_objects_total{kind}``,
instead of each plugin reading part of it. Paths follow the upstream types
(``apis/slo/v1alpha1/nodemetric_types.go``, ``apis/scheduling/v1alpha1/device_types.go`` and
``reservation_types.go``, scheduler-plugins' ElasticQuota and PodGroup); ``*`` stands for every
item of a list or every value of a map.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.api.quantity import QuantityError, parse_resource_list

Path = tuple[str, ...]

_CONTAINERS = ("spec", "template", "spec", "containers", "*", "resources")

#: ResourceList paths per kind.
RESOURCE_LISTS: dict[str, tuple[Path, ...]] = {
    "NodeMetric": (
        ("status", "nodeMetric", "nodeUsage", "resources"),
        ("status", "nodeMetric", "systemUsage", "resources"),
        ("status", "nodeMetric", "aggregatedNodeUsages", "*", "usage", "*", "resources"),
        ("status", "nodeMetric", "aggregatedSystemUsages", "*", "usage", "*", "resources"),
        ("status", "podsMetric", "*", "podUsage", "resources"),
        ("status", "hostApplicationMetric", "*", "usage", "resources"),
        ("status", "prodReclaimableMetric", "resource", "resources"),
    ),
    "ElasticQuota": (("spec", "min"), ("spec", "max")),
    "PodGroup": (("spec", "minResources"),),
    "Device": (("spec", "devices", "*", "resources"),),
    "Reservation": (
        (*_CONTAINERS, "requests"),
        (*_CONTAINERS, "limits"),
        ("status", "allocatable"),
        ("status", "allocated"),
    ),
}


class ObjectQuantityError(ValueError):
    """An object holds an invalid quantity; the message names the field (``status.podsMetric[0]...``)."""


def _walk(node: Any, path: Path, at: str) -> Iterator[tuple[str, Any]]:
    if not path:
        yield at, node
        return
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from _walk(item, rest, f"{at}[{i}]")
        elif isinstance(node, dict):
            for key, item in node.items():
                yield from _walk(item, rest, f"{at}.{key}")
        return
    if isinstance(node, dict) and head in node:
        yield from _walk(node[head], rest, f"{at}.{head}" if at else head)


def check_quantities(kind: str, obj: Any) -> None:
    """Parse every ResourceList of ``obj`` that :data:`RESOURCE_LISTS` names for ``kind`` (other kinds: no-op).

    Raises:
        ObjectQuantityError: a value is not a valid quantity or does not fit int64; the message names it.
    """
    for path in RESOURCE_LISTS.get(kind, ()):
        for at, value in _walk(obj, path, ""):
            if value is None:
                continue
            try:
                parse_resource_list(value, field=at)
            except QuantityError as exc:
                raise ObjectQuantityError(str(exc)) from None
