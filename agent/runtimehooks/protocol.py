"""The pod of a hook request, as the agent's strategies see pods (upstream ``runtimehooks/protocol``).

A hook request carries the pod's metadata, labels, annotations and cgroup parent, not its spec. The pod is the
one the agent already knows (same uid, from its states), else the one the pod source lists when asked again at
the hook (:mod:`agent.runtimehooks.freshpods`: the kubelet may have admitted it since the agent's last look),
else one built from the request: Kubernetes QoS from the
cgroup parent (``.../besteffort/...`` / ``kubepods-besteffort-...``), containers and their batch resources from
``node.koordinator.sh/extended-resource-spec`` (upstream reads batch resources from that annotation too).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from agent.cgroups import CgroupLayout
from agent.qos.context import QoSContext
from agent.qos.cpuset import CPUSetRule
from agent.runtimehooks.freshpods import FreshPods
from agent.states.pods import PodMeta, pod_meta
from app.api.devicenames import ANNOTATION_DEVICE_ALLOCATED, DEVICE_GPU
from app.api.koordext import ANNOTATION_EXTENDED_RESOURCE_SPEC
from app.api.kubeqos import BEST_EFFORT, BURSTABLE, GUARANTEED

log = logging.getLogger("agent.runtimehooks")


class HookEnv(Protocol):
    """What the hooks read from the running agent (:class:`agent.daemon.Agent` implements it)."""

    layout: CgroupLayout

    def context(self, now: float) -> QoSContext:
        """The strategies' view of this moment (NodeSLO, capacity, pods)."""
        ...

    def cpuset_rule(self) -> CPUSetRule | None:
        """The node's shared pools and kubelet CPU manager policy (None: unknown yet)."""
        ...

    def known_pod(self, uid: str) -> PodMeta | None:
        """The pod with this uid in the agent's states, None when not (yet) there."""
        ...

    def fresh_pods(self, since: float) -> FreshPods:
        """The node's pods read from the pod source at or after ``since`` (``time.monotonic()``), shared by
        concurrent hooks; the known pods when the source does not answer in time
        (:class:`agent.runtimehooks.freshpods.PodsRefresher`). Never raises."""
        ...

    def group_identity_supported(self, ctx: QoSContext) -> bool:
        """Whether the kernel offers ``cpu.bvt_warp_ns``."""
        ...


def kube_qos_of_cgroup_parent(cgroup_parent: str) -> str:
    """Kubernetes QoS class from a pod cgroup parent: ``besteffort`` / ``burstable`` in the path, else Guaranteed."""
    low = cgroup_parent.lower()
    if "besteffort" in low:
        return BEST_EFFORT
    if "burstable" in low:
        return BURSTABLE
    return GUARANTEED


def extended_resource_containers(annotations: dict[str, str]) -> list[dict[str, Any]]:
    """Pod-spec-shaped containers from ``node.koordinator.sh/extended-resource-spec``
    (``{"containers": {"name": {"requests": {...}, "limits": {...}}}}``); malformed: logged, none."""
    raw = annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if not raw:
        return []
    try:
        data = json.loads(raw)
        containers = data.get("containers") or {}
        if not isinstance(containers, dict):
            raise ValueError("containers: expected an object")
        return [
            {"name": str(name), "resources": {"requests": spec.get("requests"), "limits": spec.get("limits")}}
            for name, spec in containers.items()
            if isinstance(spec, dict)
        ]
    except (ValueError, AttributeError) as exc:
        log.warning("malformed %s ignored: %s", ANNOTATION_EXTENDED_RESOURCE_SPEC, exc)
        return []


def hook_pod(
    env: HookEnv,
    uid: str,
    namespace: str,
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    cgroup_parent: str,
    since: float,
) -> PodMeta:
    """The pod of a hook request: the agent's own when it knows the uid, else the pod source's when it lists it
    now (read at or after ``since``, ``time.monotonic()`` of the hook's start), else built from the request (see
    the module docstring)."""
    known = env.known_pod(uid) if uid else None
    if known is None and uid:
        known = env.fresh_pods(since).by_uid.get(uid)
    if known is not None:
        return known
    pod = {
        "metadata": {"uid": uid, "namespace": namespace, "name": name, "labels": labels, "annotations": annotations},
        "spec": {"containers": extended_resource_containers(annotations)},
        "status": {"qosClass": kube_qos_of_cgroup_parent(cgroup_parent), "phase": "Pending"},
    }
    return pod_meta(pod, env.layout)


def allocated_gpus(annotations: dict[str, str]) -> list[tuple[int, str]]:
    """``(minor, id)`` of the GPUs in ``scheduling.koordinator.sh/device-allocated``, in its order (upstream
    ``GetDeviceAllocations``); absent: none.

    Raises:
        ValueError: not JSON, ``gpu`` not a list of objects with an integer ``minor``.
    """
    raw = annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if not raw:
        return []
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{ANNOTATION_DEVICE_ALLOCATED}: expected a JSON object")
    entries = data.get(DEVICE_GPU) or []
    if not isinstance(entries, list):
        raise ValueError(f"{ANNOTATION_DEVICE_ALLOCATED}: gpu: expected a list")
    out: list[tuple[int, str]] = []
    for i, e in enumerate(entries):
        minor = e.get("minor") if isinstance(e, dict) else None
        if not isinstance(minor, int) or isinstance(minor, bool):
            raise ValueError(f"{ANNOTATION_DEVICE_ALLOCATED}: gpu[{i}].minor: expected an integer")
        out.append((minor, str(e.get("id") or "")))
    return out
