"""CPUs the kubelet's static CPU manager handed to pods, from its checkpoint ``<kubelet root>/cpu_manager_state``.

Follows upstream ``calKubeletAllocatedCPUs`` / ``calGuaranteedCpu``
(``pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go``): read only under the static policy;
the checkpoint is ``{"policyName":"static","defaultCpuSet":"...","entries":{"<pod uid>":{"<container>":
"<cpuset>"}},"checksum":...}``; a pod Koordinator manages itself (QoS LS or BE, or a ``resource-status``
cpuset) is skipped; every other pod's containers' cpusets together are one ``PodCPUAlloc``
(``{"namespace","name","uid","cpuset","managedByKubelet":true}``), sorted by uid, and those cpus leave
the LS shared pool. A missing or empty file means no allocations; an unparsable one is an error.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from app.api.topology import ANNOTATION_RESOURCE_STATUS, CPUSetError, format_cpuset, parse_cpuset

log = logging.getLogger("agent.topology")

STATE_FILE = "cpu_manager_state"
LABEL_POD_QOS = "koordinator.sh/qosClass"


class CPUManagerStateError(Exception):
    """The checkpoint exists but cannot be read or parsed; the message names the file."""


def read_cpu_manager_entries(kubelet_root: Path) -> dict[str, frozenset[int]]:
    """Pod uid -> the cpus of all its containers in ``<kubelet_root>/cpu_manager_state`` (empty when the
    file is absent or empty; containers with a bad or empty cpuset are skipped with a log line).

    Raises:
        CPUManagerStateError: unreadable, not JSON, or ``entries`` not a map of maps.
    """
    path = Path(kubelet_root) / STATE_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CPUManagerStateError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CPUManagerStateError(f"{path}: not JSON: {exc}") from None
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if entries is None:
        return {}
    if not isinstance(entries, dict) or not all(isinstance(v, dict) for v in entries.values()):
        raise CPUManagerStateError(f"{path}: entries must map pod uids to maps of container cpusets")
    out: dict[str, frozenset[int]] = {}
    for uid, containers in entries.items():
        cpus: set[int] = set()
        for container, cpuset in containers.items():
            try:
                cpus |= parse_cpuset(cpuset)
            except CPUSetError as exc:
                log.warning("%s: pod %s container %s: %s", path, uid, container, exc)
        if cpus:
            out[str(uid)] = frozenset(cpus)
    return out


def _managed_by_koordinator(pod: dict[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_POD_QOS) in ("LS", "BE"):
        return True
    raw = (meta.get("annotations") or {}).get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return False
    try:
        status = json.loads(raw)
        return bool(isinstance(status, dict) and status.get("cpuset") and parse_cpuset(status["cpuset"]))
    except (ValueError, CPUSetError):
        return False


def pod_cpu_allocs(entries: dict[str, frozenset[int]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``node.koordinator.sh/pod-cpu-allocs`` entries: kubelet allocations of pods Koordinator does
    not manage, sorted by uid (namespace and name when the pod is known)."""
    by_uid = {str((p.get("metadata") or {}).get("uid")): p for p in pods}
    allocs = []
    for uid in sorted(entries):
        pod = by_uid.get(uid)
        if pod is not None and _managed_by_koordinator(pod):
            continue
        alloc: dict[str, Any] = {}
        if pod is not None:
            meta = pod.get("metadata") or {}
            alloc["namespace"] = meta.get("namespace") or ""
            alloc["name"] = meta.get("name") or ""
        alloc["uid"] = uid
        alloc["cpuset"] = format_cpuset(entries[uid])
        alloc["managedByKubelet"] = True
        allocs.append(alloc)
    return allocs
