"""The Kubernetes QoS class of a pod spec (Guaranteed, Burstable, BestEffort).

Mirrors ``GetPodQOS`` of k8s.io/kubernetes ``pkg/apis/core/v1/helper/qos/qos.go``, used when a pod
has no ``status.qosClass`` yet. Shared by the scheduler's pod view (:mod:`app.cache.podinfo`) and
the agent's (``agent.states.pods``), as the kubelet and kube-scheduler share upstream's helper.
"""

from __future__ import annotations

from typing import Any

from app.api.quantity import QuantityError, parse_resource_list

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

#: The only resources that decide the QoS class (``supportedQoSComputeResources``).
_QOS_RESOURCES = ("cpu", "memory")


class PodSpecError(ValueError):
    """A pod spec is not shaped like a v1 PodSpec; the message names the field (``containers[0].resources``)."""


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PodSpecError(f"{path}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PodSpecError(f"{path}: expected a list, got {type(value).__name__}")
    return value


def kube_qos_class(spec: dict[str, Any]) -> str:
    """The Kubernetes QoS class of a pod spec (JSON-shaped ``spec``).

    Only cpu and memory count, over containers and init containers. BestEffort: no requests or
    limits at all; Guaranteed: every container limits cpu and memory and the summed requests
    (defaulted to limits by the API server) equal the summed limits; otherwise Burstable.

    Raises:
        PodSpecError: a container list, container or ``resources`` is not the right JSON type, or a
            quantity is invalid (the message names ``containers[i]``, counting init containers after
            the app containers).
    """
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    containers = _list(spec.get("containers"), "spec.containers") + _list(
        spec.get("initContainers"), "spec.initContainers"
    )
    for i, c in enumerate(containers):
        path = f"containers[{i}]"
        resources = _mapping(_mapping(c, path).get("resources"), f"{path}.resources")
        try:
            req = parse_resource_list(resources.get("requests"), field=f"{path}.resources.requests")
            lim = parse_resource_list(resources.get("limits"), field=f"{path}.resources.limits")
        except QuantityError as exc:
            raise PodSpecError(str(exc)) from None
        for name in _QOS_RESOURCES:
            if req.get(name, 0) > 0:
                requests[name] = requests.get(name, 0) + req[name]
            if lim.get(name, 0) > 0:
                limits[name] = limits.get(name, 0) + lim[name]
        if not all(lim.get(n, 0) > 0 for n in _QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    # Requests left unset were defaulted to limits by the API server; compare the sums.
    if guaranteed and all(limits.get(n) == v for n, v in requests.items()):
        return GUARANTEED
    return BURSTABLE
