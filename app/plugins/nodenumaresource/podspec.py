"""A pod's NodeNUMAResource annotations: what it asks (``resource-spec``, ``numa-topology-spec``) and what
it holds (``resource-status``). Upstream: ``apis/extension/numa_aware.go`` (``GetResourceSpec``,
``GetNUMATopologySpec``, ``GetResourceStatus``) and ``plugin.go`` ``PreFilter``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.api.koordext import LABEL_POD_QOS, PriorityClass, QoSClass
from app.api.quantity import QuantityError, resource_value
from app.api.topology import CPUSetError, parse_cpuset
from app.cache.podinfo import PodInfo
from app.plugins.nodenumaresource import names as n


class SpecError(ValueError):
    """A malformed annotation; the message names it and what is wrong."""


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """``scheduling.koordinator.sh/resource-spec``."""

    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""


@dataclass(frozen=True, slots=True)
class NUMATopologySpec:
    """``scheduling.koordinator.sh/numa-topology-spec``."""

    numa_topology_policy: str = ""
    single_numa_node_exclusive: str = ""


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """``scheduling.koordinator.sh/resource-status``: the cpuset and per-NUMA-node resources (cpu milli,
    memory bytes) a pod holds."""

    cpus: frozenset[int] = frozenset()
    numa: tuple[tuple[int, dict[str, int]], ...] = ()


def _json_object(annotations: dict[str, str], key: str) -> dict[str, Any] | None:
    raw = annotations.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise SpecError(f"invalid {key} annotation: {exc}") from None
    if not isinstance(value, dict):
        raise SpecError(f"invalid {key} annotation: expected a JSON object")
    return value


def _str_field(obj: dict[str, Any], field: str, key: str, allowed: frozenset[str]) -> str:
    value = obj.get(field, "")
    if value is None:
        return ""
    if not isinstance(value, str) or value not in allowed:
        choices = ", ".join(sorted(a for a in allowed if a))
        raise SpecError(f"invalid {key} annotation: {field} {value!r} is not one of {choices}")
    return value


def resource_spec(annotations: dict[str, str]) -> ResourceSpec:
    """The pod's resource-spec (all empty when absent).

    Raises:
        SpecError: not a JSON object, or a policy value upstream does not define.
    """
    obj = _json_object(annotations, n.ANNOTATION_RESOURCE_SPEC)
    if obj is None:
        return ResourceSpec()
    key = n.ANNOTATION_RESOURCE_SPEC
    return ResourceSpec(
        _str_field(obj, "requiredCPUBindPolicy", key, n.CPU_BIND_POLICIES),
        _str_field(obj, "preferredCPUBindPolicy", key, n.CPU_BIND_POLICIES),
        _str_field(obj, "preferredCPUExclusivePolicy", key, n.CPU_EXCLUSIVE_POLICIES),
    )


def numa_topology_spec(annotations: dict[str, str]) -> NUMATopologySpec:
    """The pod's numa-topology-spec (empty when absent; ``None`` reads as no policy).

    Raises:
        SpecError: not a JSON object, or an unknown policy / exclusive value.
    """
    obj = _json_object(annotations, n.ANNOTATION_NUMA_TOPOLOGY_SPEC)
    if obj is None:
        return NUMATopologySpec()
    key = n.ANNOTATION_NUMA_TOPOLOGY_SPEC
    policy = _str_field(obj, "numaTopologyPolicy", key, n.NUMA_POLICIES)
    exclusive = _str_field(
        obj, "singleNUMANodeExclusive", key, frozenset({"", n.NUMA_EXCLUSIVE_PREFERRED, n.NUMA_EXCLUSIVE_REQUIRED})
    )
    return NUMATopologySpec("" if policy == "None" else policy, exclusive)


def resource_status(annotations: dict[str, str]) -> ResourceStatus | None:
    """The pod's resource-status, or None when absent.

    Raises:
        SpecError: malformed JSON, cpuset or quantities.
    """
    obj = _json_object(annotations, n.ANNOTATION_RESOURCE_STATUS)
    if obj is None:
        return None
    key = n.ANNOTATION_RESOURCE_STATUS
    try:
        cpus = parse_cpuset(obj.get("cpuset") or "")
    except CPUSetError as exc:
        raise SpecError(f"invalid {key} annotation: {exc}") from None
    numa: list[tuple[int, dict[str, int]]] = []
    entries = obj.get("numaNodeResources") or []
    if not isinstance(entries, list):
        raise SpecError(f"invalid {key} annotation: numaNodeResources must be a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or isinstance(entry.get("node"), bool) or not isinstance(entry.get("node"), int):
            raise SpecError(f"invalid {key} annotation: numaNodeResources[{i}] needs an integer node")
        resources = entry.get("resources") or {}
        if not isinstance(resources, dict):
            raise SpecError(f"invalid {key} annotation: numaNodeResources[{i}].resources must be a map")
        try:
            numa.append((entry["node"], {str(k): resource_value(str(k), v) for k, v in resources.items()}))
        except QuantityError as exc:
            raise SpecError(f"invalid {key} annotation: numaNodeResources[{i}]: {exc}") from None
    return ResourceStatus(cpus, tuple(numa))


def allow_use_cpuset(pod: PodInfo) -> bool:
    """``AllowUseCPUSet``: QoS label LSE or LSR (the raw label, no default) and priority class prod."""
    qos = pod.labels.get(LABEL_POD_QOS, "")
    return qos in (QoSClass.LSE, QoSClass.LSR) and pod.priority_class == PriorityClass.PROD
