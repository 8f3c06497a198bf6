"""Which pods may be evicted at all: the default evictor filter plus LowNodeLoad's own pod filter.

Mirrors the sigs descheduler's ``DefaultEvictor.Filter`` (``defaultevictor.go``) as koordinator's
``pkg/descheduler/framework/plugins/kubernetes/defaultevictor`` wraps it, and LowNodeLoad's
``evictableNamespaces`` / ``podSelectors``. :func:`evict_filter` returns the reason a pod is not
evictable, or None.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.api.labelselector import selector_matches
from app.descheduler.config import DefaultEvictorArgs, LowNodeLoadArgs
from app.descheduler.model import PodView

#: ``SystemCriticalPriority`` (``k8s.io/api/scheduling/v1``): system-cluster-critical and above.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
ANNOTATION_EVICT = "descheduler.alpha.kubernetes.io/evict"
ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
ANNOTATION_CONFIG_SOURCE = "kubernetes.io/config.source"


def _has_local_storage(spec: dict[str, Any]) -> bool:
    return any(isinstance(v, dict) and ("emptyDir" in v or "hostPath" in v) for v in spec.get("volumes") or [])


def _has_pvc(spec: dict[str, Any]) -> bool:
    return any(isinstance(v, dict) and "persistentVolumeClaim" in v for v in spec.get("volumes") or [])


def evict_filter(pod: PodView, args: DefaultEvictorArgs) -> str | None:
    """The default evictor's verdict: None when evictable, else the reason.

    Not evictable: terminating, mirror or static pods, DaemonSet pods, bare pods (no controller; a
    Failed bare pod with ``evictFailedBarePods``), system-critical pods (priority >= 2e9 or namespace
    ``kube-system`` with a system priority class) unless ``evictSystemCriticalPods``, pods at or above
    ``priorityThreshold``, pods with local storage (emptyDir/hostPath) unless ``evictLocalStoragePods``,
    pods with PVCs under ``ignorePvcPods``, pods outside ``labelSelector``. The annotation
    ``descheduler.alpha.kubernetes.io/evict`` skips the checks after the mirror/static/terminating ones.
    """
    info, meta = pod.info, pod.obj.get("metadata") or {}
    spec = pod.obj.get("spec") or {}
    if meta.get("deletionTimestamp"):
        return "pod is terminating"
    if ANNOTATION_MIRROR in info.annotations:
        return "pod is a mirror pod"
    if info.annotations.get(ANNOTATION_CONFIG_SOURCE, "api") != "api":
        return "pod is a static pod"
    if ANNOTATION_EVICT in info.annotations:
        return None
    if info.daemonset:
        return "pod is a DaemonSet pod"
    if not info.owner_references and not (args.evict_failed_bare_pods and info.phase == "Failed"):
        return "pod does not have any ownerRefs"
    priority = info.priority or 0
    if not args.evict_system_critical_pods:
        if priority >= SYSTEM_CRITICAL_PRIORITY:
            return "pod is system critical"
        if args.priority_threshold is not None and priority >= args.priority_threshold:
            return "pod has higher priority than specified priority class threshold"
    if not args.evict_local_storage_pods and _has_local_storage(spec):
        return "pod has local storage and descheduler is not configured with evictLocalStoragePods"
    if args.ignore_pvc_pods and _has_pvc(spec):
        return "pod has a PVC and descheduler is configured to ignore PVC pods"
    if args.label_selector is not None and not selector_matches(args.label_selector, info.labels):
        return "pod labels do not match the labelSelector filter in the policy parameter"
    return None


def lownodeload_filter(pod: PodView, args: LowNodeLoadArgs) -> str | None:
    """LowNodeLoad's ``evictableNamespaces`` and ``podSelectors`` (any selector matching admits)."""
    ns = args.evictable_namespaces
    if ns is not None:
        if ns["include"] and pod.info.namespace not in ns["include"]:
            return "namespace is not in evictableNamespaces.include"
        if pod.info.namespace in ns["exclude"]:
            return "namespace is in evictableNamespaces.exclude"
    if args.pod_selectors and not any(selector_matches(s, pod.info.labels) for s in args.pod_selectors):
        return "pod matches none of podSelectors"
    return None


def pdb_blocks(pod: PodView, pdbs: Iterable[dict[str, Any]]) -> str | None:
    """A PodDisruptionBudget in the pod's namespace selecting it with ``status.disruptionsAllowed`` 0
    would refuse the eviction (429); name it, or None."""
    for pdb in pdbs:
        meta = pdb.get("metadata") or {}
        if (meta.get("namespace") or "default") != pod.info.namespace:
            continue
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is None or not selector_matches(selector, pod.info.labels):
            continue
        if int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) <= 0:
            return f"PodDisruptionBudget {meta.get('name')} allows no disruption"
    return None
