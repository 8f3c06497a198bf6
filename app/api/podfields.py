"""What of a Pod the scheduler's plugins read, and nothing else (``koord snapshot`` keeps only this).

A snapshot of a live cluster leaves it: env, commands, images, volume sources, unrelated annotations
and the like are dropped, so that what-if files carry no configuration, credential or address. Kept:

- ``metadata``: name, namespace, uid, labels, ownerReferences (Reservation owners, gangs),
  creationTimestamp, deletionTimestamp, and the annotations of Koordinator and the gang APIs
  (:func:`kept_annotation`: ``koordinator.sh`` and its subdomains, ``scheduling.sigs.k8s.io``
  subdomains, ``scheduling.k8s.io/group-name``);
- ``spec``: nodeName, schedulerName, priority, priorityClassName, preemptionPolicy, nodeSelector,
  affinity, tolerations, overhead; each container's name and resources, each init container's name,
  resources and restartPolicy (sidecars count in the pod's requests); volumes that are emptyDir,
  hostPath or persistentVolumeClaim (the descheduler's evictability), the others dropped;
- ``status``: phase, qosClass, conditions, nominatedNodeName, startTime.

Everything else is dropped and named in the ``dropped`` list :func:`trim_pod` returns (field paths
such as ``spec.containers[].env``, ``metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]``).
"""

from __future__ import annotations

from typing import Any

#: ``metadata`` fields kept.
KEPT_METADATA = ("name", "namespace", "uid", "labels", "ownerReferences", "creationTimestamp", "deletionTimestamp")
#: ``metadata`` fields dropped without being reported (the API server's bookkeeping, not the user's data).
QUIET_METADATA = ("resourceVersion", "generation", "selfLink", "generateName")
#: ``spec`` fields kept as they are.
KEPT_SPEC = (
    "nodeName",
    "schedulerName",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "nodeSelector",
    "affinity",
    "tolerations",
    "overhead",
)
#: Container fields kept (init containers also keep ``restartPolicy``).
KEPT_CONTAINER = ("name", "resources")
KEPT_INIT_CONTAINER = ("name", "resources", "restartPolicy")
#: Volume sources kept (with their names): what the descheduler's evictor checks.
KEPT_VOLUME_SOURCES = ("emptyDir", "hostPath", "persistentVolumeClaim")
#: ``status`` fields kept.
KEPT_STATUS = ("phase", "qosClass", "conditions", "nominatedNodeName", "startTime")
#: Annotation keys kept exactly (beside the Koordinator domains of :func:`kept_annotation`).
KEPT_ANNOTATION_KEYS = frozenset({"scheduling.k8s.io/group-name"})


def _domain(key: str) -> str:
    """The prefix (DNS domain) of a label or annotation key; "" when it has none."""
    prefix, sep, _ = key.partition("/")
    return prefix if sep else ""


def kept_annotation(key: str) -> bool:
    """Whether a pod annotation is one the plugins read: ``koordinator.sh`` or a subdomain of it
    (``scheduling.koordinator.sh/...``, ``gang.scheduling.koordinator.sh/...``), a subdomain of
    ``scheduling.sigs.k8s.io`` (``pod-group.scheduling.sigs.k8s.io/name``), or
    ``scheduling.k8s.io/group-name``."""
    if key in KEPT_ANNOTATION_KEYS:
        return True
    domain = _domain(key)
    return (
        domain == "koordinator.sh" or domain.endswith(".koordinator.sh") or domain.endswith(".scheduling.sigs.k8s.io")
    )


def _trim_containers(containers: Any, path: str, kept: tuple[str, ...], dropped: list[str]) -> list[Any] | None:
    if not isinstance(containers, list):
        return None
    out: list[Any] = []
    for c in containers:
        if not isinstance(c, dict):
            continue
        out.append({k: c[k] for k in kept if k in c})
        dropped.extend(f"{path}[].{k}" for k in c if k not in kept)
    return out


def _trim_volumes(volumes: Any, dropped: list[str]) -> list[Any] | None:
    if not isinstance(volumes, list):
        return None
    out: list[Any] = []
    for v in volumes:
        if not isinstance(v, dict):
            continue
        sources = [k for k in v if k != "name"]
        if any(s in KEPT_VOLUME_SOURCES for s in sources):
            out.append({k: v[k] for k in ("name", *KEPT_VOLUME_SOURCES) if k in v})
        else:
            dropped.extend(f"spec.volumes[].{s}" for s in sources)
    return out


def trim_pod(pod: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``pod`` reduced to the fields of the module docstring, and the paths of what was dropped (one entry
    per field dropped, repeated once per container or volume it was dropped from; order of appearance).

    ``pod`` is not changed. Kept values are shared with it, not copied. A pod whose parts are not maps
    keeps none of them (the service rejects such a pod with a message when it loads it).
    """
    dropped: list[str] = []
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)
    out_meta = {k: meta[k] for k in KEPT_METADATA if k in meta}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        kept = {k: v for k, v in annotations.items() if kept_annotation(k)}
        dropped.extend(f"metadata.annotations[{k}]" for k in annotations if k not in kept)
        if kept:
            out_meta["annotations"] = kept
    dropped.extend(
        f"metadata.{k}" for k in meta if k not in KEPT_METADATA and k not in QUIET_METADATA and k != "annotations"
    )
    out_spec = {k: spec[k] for k in KEPT_SPEC if k in spec}
    for field, kept_fields in (("containers", KEPT_CONTAINER), ("initContainers", KEPT_INIT_CONTAINER)):
        trimmed = _trim_containers(spec.get(field), f"spec.{field}", kept_fields, dropped)
        if trimmed is not None:
            out_spec[field] = trimmed
    volumes = _trim_volumes(spec.get("volumes"), dropped)
    if volumes:
        out_spec["volumes"] = volumes
    handled = {*KEPT_SPEC, "containers", "initContainers", "volumes"}
    dropped.extend(f"spec.{k}" for k in spec if k not in handled)
    out_status = {k: status[k] for k in KEPT_STATUS if k in status}
    dropped.extend(f"status.{k}" for k in status if k not in KEPT_STATUS)
    out: dict[str, Any] = {"apiVersion": pod.get("apiVersion") or "v1", "kind": "Pod", "metadata": out_meta}
    out["spec"] = out_spec
    if out_status:
        out["status"] = out_status
    return out, dropped
