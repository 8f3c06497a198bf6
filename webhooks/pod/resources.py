"""Batch/mid resource rewrite and the extended-resource-spec annotation.

- :func:`rewrite_resources` follows ``mutatePodResourceSpec`` of upstream's
  ``pkg/webhook/pod/mutating/cluster_colocation_profile.go``: for a batch (or mid) pod, every
  container's (init containers first) ``cpu`` request/limit moves to ``kubernetes.io/batch-cpu``
  as an integer number of **milli-cores** (``2`` -> ``2k`` = 2000, ``500m`` -> ``500``) and
  ``memory`` to ``kubernetes.io/batch-memory`` unchanged; a limit without a request is copied to
  the request; ``spec.overhead`` is moved the same way.
- :func:`extended_resource_spec` follows ``extended_resource_spec.go``: the batch requests and
  limits of each app container, JSON in annotation ``node.koordinator.sh/extended-resource-spec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from app.api.koordext import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    BATCH_CPU,
    BATCH_MEMORY,
    RESOURCE_NAME_MAP,
    PriorityClass,
)
from app.api.quantity import QuantityError, format_resource, int_value, milli_value


def _replace(names: Mapping[str, str], resources: dict[str, Any], name: str) -> bool:
    """``replaceAndEraseResource``: move ``name`` to its extended name (cpu as integer milli)."""
    if name not in resources:
        return False
    value = resources.pop(name)
    if name == "cpu":
        value = format_resource(names[name], milli_value(value))
    resources[names[name]] = value
    return True


def _restrict(names: Mapping[str, str], requirements: dict[str, Any], name: str) -> bool:
    """``restrictResourceRequestAndLimit``: copy an extended limit without request to the request."""
    ext = names[name]
    requests = requirements.get("requests") or {}
    limits = requirements.get("limits") or {}
    if ext not in requests and ext in limits:
        requirements["requests"] = {**requests, ext: limits[ext]}
        return True
    return False


def rewrite_resources(pod: dict[str, Any], priority_class: PriorityClass) -> bool:
    """Rewrite ``pod`` in place for ``priority_class`` (its class with default); True if changed.

    Raises:
        QuantityError: a cpu quantity is invalid.
    """
    names = RESOURCE_NAME_MAP.get(priority_class)
    if names is None:
        return False
    spec = pod.setdefault("spec", {})
    mutated = False
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            if not isinstance(container, dict):
                continue
            requirements = container.get("resources")
            if not isinstance(requirements, dict):
                continue
            for part in ("requests", "limits"):
                resources = requirements.get(part)
                if isinstance(resources, dict):
                    mutated = _replace(names, resources, "cpu") or mutated
                    mutated = _replace(names, resources, "memory") or mutated
            mutated = _restrict(names, requirements, "cpu") or mutated
            mutated = _restrict(names, requirements, "memory") or mutated
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        mutated = _replace(names, overhead, "cpu") or mutated
        mutated = _replace(names, overhead, "memory") or mutated
    return mutated


def _container_spec(container: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    requirements = container.get("resources") or {}
    out: dict[str, dict[str, Any]] = {}
    for part in ("limits", "requests"):
        values = {k: v for k, v in (requirements.get(part) or {}).items() if k in (BATCH_CPU, BATCH_MEMORY)}
        if values:
            out[part] = dict(sorted(values.items()))
    return out or None


def extended_resource_spec(pod: dict[str, Any]) -> dict[str, Any]:
    """The ``ExtendedResourceSpec`` of ``pod``: ``{"containers": {name: {"limits": ..., "requests": ...}}}``
    over app containers with batch-cpu / batch-memory; ``{}`` when none has them."""
    containers: dict[str, Any] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        if isinstance(container, dict):
            spec = _container_spec(container)
            if spec is not None:
                containers[str(container.get("name", ""))] = spec
    return {"containers": dict(sorted(containers.items()))} if containers else {}


def _normalised(spec: dict[str, Any]) -> dict[str, Any]:
    """Quantities as integers (milli for batch-cpu's value is already integer), to compare specs numerically."""
    out: dict[str, Any] = {}
    for name, parts in (spec.get("containers") or {}).items():
        parts = parts or {}
        out[name] = {part: {k: int_value(v) for k, v in values.items()} for part, values in parts.items() if values}
    return out


class ExtendedResourceSpecError(ValueError):
    """The pod's own ``node.koordinator.sh/extended-resource-spec`` annotation cannot be read.

    The message is upstream's (``failed to get current extended resource spec, err: ...``). Upstream
    answers it with code 500; it is the request's object that is malformed, so ``/mutate-pod`` answers
    400, as for any other malformed pod.
    """


def set_extended_resource_spec(pod: dict[str, Any]) -> bool:
    """``mutateByExtendedResources``: write the annotation when it differs from the pod's batch resources.

    Raises:
        ExtendedResourceSpecError: the existing annotation is not valid JSON of that shape.
    """
    wanted = extended_resource_spec(pod)
    meta = pod.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    current: dict[str, Any] = {}
    if ANNOTATION_EXTENDED_RESOURCE_SPEC in annotations:
        try:
            parsed = orjson.loads(annotations[ANNOTATION_EXTENDED_RESOURCE_SPEC])
            if not isinstance(parsed, dict) or not isinstance(parsed.get("containers") or {}, dict):
                raise ValueError("expected an object with a containers map")
            current = parsed
            current_norm = _normalised(current)
        except (orjson.JSONDecodeError, ValueError, QuantityError, AttributeError, TypeError) as exc:
            raise ExtendedResourceSpecError(f"failed to get current extended resource spec, err: {exc}") from None
    else:
        current_norm = {}
    if _normalised(wanted) == current_norm:
        return False
    meta["annotations"] = {**annotations, ANNOTATION_EXTENDED_RESOURCE_SPEC: orjson.dumps(wanted).decode()}
    return True
