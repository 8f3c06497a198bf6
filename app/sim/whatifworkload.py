"""The pods a what-if run places: the snapshot's pending pods, or a workload file's.

A workload file (YAML or JSON) lists pod templates with counts::

    pods:
      - name: web              # pods web-0, web-1, ... (namespace: default unless given)
        count: 3
        namespace: default
        quota: team-a          # optional: label quota.scheduling.koordinator.sh/name (ElasticQuota)
        gang: 3                # optional: the pods form a gang of min-available 3 (or {name, minAvailable})
        template:              # a pod template: metadata (labels, annotations) and spec
          metadata: {labels: {koordinator.sh/qosClass: LS}}
          spec:
            containers:
              - name: web
                resources: {requests: {cpu: "2", memory: 4Gi}}

Gangs use Koordinator's gang annotations, which the Coscheduling plugin reads without a PodGroup object:
``gang.scheduling.koordinator.sh/name``, ``.../min-available`` and ``.../waiting-time`` (10s unless the
template sets one, so a gang that cannot complete releases its members quickly).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from app.api.coscheduling import ANNOTATION_GANG_MIN_NUM as ANNOTATION_GANG_MIN
from app.api.coscheduling import ANNOTATION_GANG_NAME, gang_id, gang_name
from app.api.coscheduling import ANNOTATION_GANG_WAIT_TIME as ANNOTATION_GANG_WAIT
from app.api.manifests import SafeLoader
from app.sim.errors import SimInputError

LABEL_QUOTA = "quota.scheduling.koordinator.sh/name"
#: A workload gang's wait at Permit unless its template says.
DEFAULT_GANG_WAIT = "10s"
#: Most pods one workload file may create.
MAX_WORKLOAD_PODS = 1_000_000
_UID_NS = uuid.UUID("3c5e1f0a-7d2b-4a8e-9b61-2f4d8c0e7a55")
_TERMINAL = ("Succeeded", "Failed")


def gang_of(pod: dict[str, Any]) -> str | None:
    """``namespace/name`` of the gang a pod belongs to, as the Coscheduling plugin finds it
    (:func:`app.api.coscheduling.gang_name`: the PodGroup label, the lightweight name label, the gang
    annotation), None for a pod in no gang."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    name = gang_name(labels or {}, annotations or {})
    return gang_id(meta.get("namespace") or "default", name) if name else None


def is_pending(pod: dict[str, Any]) -> bool:
    """A pod kube-scheduler would try to place: no ``spec.nodeName``, not finished, not being deleted."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    return not spec.get("nodeName") and status.get("phase") not in _TERMINAL and not meta.get("deletionTimestamp")


def queue_order(pods: list[dict[str, Any]], *, created_in_order: bool = False) -> list[dict[str, Any]]:
    """``pods`` in kube-scheduler's queue order (PrioritySort: higher ``spec.priority`` first, then earlier
    ``creationTimestamp``, then namespace/name), each gang's members moved up to its first member.
    ``created_in_order``: the pods are created in list order (a workload file), which stands for the timestamp."""

    def key(pod: dict[str, Any]) -> tuple[int, str, str, str]:
        meta = pod.get("metadata") or {}
        priority = (pod.get("spec") or {}).get("priority")
        prio = priority if isinstance(priority, int) and not isinstance(priority, bool) else 0
        if created_in_order:
            return (-prio, "", "", "")
        return (-prio, str(meta.get("creationTimestamp") or ""), str(meta.get("namespace") or ""), str(meta["name"]))

    ordered = sorted(pods, key=key)
    out: list[dict[str, Any]] = []
    gangs: dict[str, list[dict[str, Any]]] = {}
    for pod in ordered:
        gang = gang_of(pod)
        if gang is None:
            out.append(pod)
            continue
        if gang not in gangs:
            gangs[gang] = []
            out.append({"__gang__": gang})
        gangs[gang].append(pod)
    flat: list[dict[str, Any]] = []
    for item in out:
        flat.extend(gangs[item["__gang__"]] if "__gang__" in item else [item])
    return flat


def _entry_error(i: int, message: str) -> SimInputError:
    return SimInputError(f"--workload: pods[{i}]: {message}")


def _gang_spec(raw: Any, name: str, count: int, i: int) -> tuple[str, int] | None:
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise _entry_error(i, "gang: expected a number or {name, minAvailable}")
    if isinstance(raw, int):
        return name, raw
    if isinstance(raw, dict):
        minimum = raw.get("minAvailable", count)
        if not isinstance(minimum, int) or isinstance(minimum, bool):
            raise _entry_error(i, "gang.minAvailable: expected an integer")
        return str(raw.get("name") or name), minimum
    raise _entry_error(i, "gang: expected a number or {name, minAvailable}")


def workload_pods(data: Any) -> list[dict[str, Any]]:
    """The pods of a decoded workload file (see the module docstring), in file order.

    Raises:
        SimInputError: the shape is wrong (the message names the entry and field), a count is not a
            positive integer, a name repeats, or the file asks for more than :data:`MAX_WORKLOAD_PODS` pods.
    """
    if not isinstance(data, dict) or not isinstance(data.get("pods"), list) or not data["pods"]:
        raise SimInputError("--workload: expected a mapping with a non-empty list 'pods'")
    pods: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(data["pods"]):
        if not isinstance(entry, dict):
            raise _entry_error(i, "expected a mapping with name, count and template")
        unknown = set(entry) - {"name", "count", "namespace", "quota", "gang", "template"}
        if unknown:
            raise _entry_error(
                i, f"unknown field {sorted(unknown)[0]!r} (allowed: name, count, namespace, quota, gang, template)"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _entry_error(i, "name: required, a string")
        count = entry.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise _entry_error(i, f"count: expected a positive integer, got {count!r}")
        if len(pods) + count > MAX_WORKLOAD_PODS:
            raise _entry_error(i, f"more than {MAX_WORKLOAD_PODS} pods in all")
        namespace = entry.get("namespace") or "default"
        template = entry.get("template") or {}
        if not isinstance(template, dict) or not isinstance(template.get("spec") or {}, dict):
            raise _entry_error(i, "template: expected a pod template (metadata, spec)")
        spec = template.get("spec") or {}
        if not isinstance(spec.get("containers"), list) or not spec["containers"]:
            raise _entry_error(i, "template.spec.containers: required, a non-empty list")
        tmeta = template.get("metadata") or {}
        if not isinstance(tmeta, dict):
            raise _entry_error(i, "template.metadata: expected a mapping")
        quota = entry.get("quota")
        if quota is not None and not isinstance(quota, str):
            raise _entry_error(i, "quota: expected an ElasticQuota name")
        gang = _gang_spec(entry.get("gang"), name, count, i)
        for k in range(count):
            pod_name = f"{name}-{k}"
            if (namespace, pod_name) in seen:
                raise _entry_error(i, f"pod {namespace}/{pod_name} is named twice")
            seen.add((namespace, pod_name))
            labels = dict(tmeta.get("labels") or {})
            annotations = dict(tmeta.get("annotations") or {})
            if quota is not None:
                labels[LABEL_QUOTA] = quota
            if gang is not None:
                annotations[ANNOTATION_GANG_NAME] = gang[0]
                annotations[ANNOTATION_GANG_MIN] = str(gang[1])
                annotations.setdefault(ANNOTATION_GANG_WAIT, DEFAULT_GANG_WAIT)
            meta: dict[str, Any] = {
                "name": pod_name,
                "namespace": namespace,
                "uid": str(uuid.uuid5(_UID_NS, f"{namespace}/{pod_name}")),
                "labels": labels,
            }
            if annotations:
                meta["annotations"] = annotations
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": dict(spec)})
    return pods


def load_workload(path: Path) -> list[dict[str, Any]]:
    """The pods of the workload file at ``path``.

    Raises:
        SimInputError: unreadable, not YAML/JSON, or not a workload (see :func:`workload_pods`).
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise SimInputError(f"--workload {path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=SafeLoader)
    except yaml.YAMLError as exc:
        raise SimInputError(f"--workload {path}: not YAML: {exc}") from None
    return workload_pods(data)
