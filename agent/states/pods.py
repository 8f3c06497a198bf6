"""What the agent knows of one pod on its node.

Follows upstream ``pkg/koordlet/statesinformer`` PodMeta (pod + cgroup dir), ``apis/extension``
QoS / priority resolution and the kubelet's ``GetPodQOS`` when ``status.qosClass`` is absent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from agent.cgroups import CgroupLayout, CgroupPathError
from app.api.koordext import (
    BATCH_CPU,
    PriorityClass,
    QoSClass,
    koordinator_classes,
    qos_class_raw,
)
from app.api.kubeqos import BURSTABLE, PodSpecError, kube_qos_class
from app.api.quantity import QuantityError, parse_resource_list
from app.api.timeparse import parse_time

log = logging.getLogger("agent.states")

#: Label opting a pod in/out of koordlet evictions (``apis/extension/eviction.go``).
LABEL_EVICTION_ENABLED = "koordinator.sh/eviction-enabled"


@dataclass(slots=True)
class ContainerMeta:
    """One container: name, runtime id (``containerd://...``, may be empty), requests/limits in internal units."""

    name: str
    container_id: str
    requests: dict[str, int]
    limits: dict[str, int]


@dataclass(slots=True)
class PodMeta:
    """A pod of this node.

    Attributes:
        uid, namespace, name, phase: from the object.
        kube_qos: Guaranteed | Burstable | BestEffort (``status.qosClass`` or computed).
        qos_raw: the ``koordinator.sh/qosClass`` label only (``GetPodQoSClassRaw``).
        qos: koord QoS with the Kubernetes fallback (``GetPodQoSClassWithDefault``).
        priority: ``spec.priority`` (None when unset).
        priority_class: koord priority class with defaults (label, value band, then QoS).
        requests / limits: pod totals (containers summed): cpu milli-cores, memory bytes,
            ``kubernetes.io/batch-cpu`` milli-cores, ``kubernetes.io/batch-memory`` bytes.
        cgroup_dir: pod cgroup dir relative to the mount root, None when the uid is unusable.
        ips: the pod's addresses (``status.podIPs``, else ``status.podIP``), as given.
        created: ``metadata.creationTimestamp`` as epoch seconds (None when absent or malformed).
        deleting: ``metadata.deletionTimestamp`` is set.
    """

    uid: str
    namespace: str
    name: str
    phase: str
    kube_qos: str
    qos_raw: QoSClass
    qos: QoSClass
    priority: int | None
    priority_class: PriorityClass
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: list[ContainerMeta] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    cgroup_dir: str | None = None
    ips: tuple[str, ...] = ()
    created: float | None = None
    deleting: bool = False

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def is_be(self) -> bool:
        """BE as the QoS manager counts it: koord label BE or Kubernetes BestEffort (``NonBEPodFilter``)."""
        return self.qos_raw == QoSClass.BE or self.kube_qos == "BestEffort"

    @property
    def eviction_enabled(self) -> bool:
        """False only when the ``koordinator.sh/eviction-enabled`` label says ``false``."""
        return self.labels.get(LABEL_EVICTION_ENABLED, "").lower() != "false"

    @property
    def active(self) -> bool:
        """Not Succeeded / Failed."""
        return self.phase not in ("Succeeded", "Failed")


def _resources(raw: Any, where: str) -> dict[str, int]:
    try:
        return parse_resource_list(raw if isinstance(raw, dict) else None, field=where)
    except QuantityError as exc:
        log.warning("ignoring bad resources: %s", exc)
        return {}


def pod_meta(pod: dict[str, Any], layout: CgroupLayout | None) -> PodMeta:
    """Build a :class:`PodMeta` from a pod object (JSON-shaped dict).

    A uid that is not a plain cgroup name leaves ``cgroup_dir`` None (logged), so nothing is
    read or written for that pod.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    ids = {
        s.get("name"): s.get("containerID") or "" for s in status.get("containerStatuses") or [] if isinstance(s, dict)
    }
    containers: list[ContainerMeta] = []
    for c in spec.get("containers") or []:
        if not isinstance(c, dict):
            continue
        res = c.get("resources") or {}
        name = str(c.get("name") or "")
        containers.append(
            ContainerMeta(
                name=name,
                container_id=str(ids.get(name) or ""),
                requests=_resources(res.get("requests"), f"{name}.requests"),
                limits=_resources(res.get("limits"), f"{name}.limits"),
            )
        )
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    for c in containers:
        for k, v in c.requests.items():
            requests[k] = requests.get(k, 0) + v
        for k, v in c.limits.items():
            limits[k] = limits.get(k, 0) + v
    kube_qos = str(status.get("qosClass") or "")
    if not kube_qos:
        try:
            kube_qos = kube_qos_class(spec)
        except PodSpecError as exc:  # the API server refuses such pods; only hand-written files get here
            log.warning("pod %s/%s: %s; treated as Burstable", meta.get("namespace"), meta.get("name"), exc)
            kube_qos = BURSTABLE
    qos_raw = qos_class_raw(labels)
    priority = spec.get("priority") if isinstance(spec.get("priority"), int) else None
    qos, pclass = koordinator_classes(labels, priority, kube_qos)
    uid = str(meta.get("uid") or "")
    created: float | None = None
    if meta.get("creationTimestamp"):
        try:
            created = parse_time(str(meta["creationTimestamp"]))
        except ValueError:
            log.debug("pod %s/%s: bad creationTimestamp", meta.get("namespace"), meta.get("name"))
    cgroup_dir = None
    if layout is not None:
        try:
            cgroup_dir = layout.pod_dir(uid, kube_qos)
        except CgroupPathError as exc:
            log.warning("pod %s/%s: %s; its cgroup is not touched", meta.get("namespace"), meta.get("name"), exc)
    ips = tuple(
        str(entry.get("ip")) for entry in status.get("podIPs") or [] if isinstance(entry, dict) and entry.get("ip")
    ) or ((str(status["podIP"]),) if status.get("podIP") else ())
    return PodMeta(
        ips=ips,
        uid=uid,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        phase=str(status.get("phase") or "Running"),
        kube_qos=kube_qos,
        qos_raw=qos_raw,
        qos=qos,
        priority=priority,
        priority_class=pclass,
        labels=labels,
        annotations=annotations,
        containers=containers,
        requests=requests,
        limits=limits,
        cgroup_dir=cgroup_dir,
        created=created,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def batch_cpu_request(pod: PodMeta) -> int:
    """Σ ``kubernetes.io/batch-cpu`` requests (milli-cores) of the containers (``GetPodBEMilliCPURequest``)."""
    return max(pod.requests.get(BATCH_CPU, 0), 0)
