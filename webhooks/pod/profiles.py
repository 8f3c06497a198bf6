"""ClusterColocationProfile mutation of a pod being created.

Follows ``clusterColocationProfileMutatingPod`` / ``doMutateByColocationProfile`` of upstream's
``pkg/webhook/pod/mutating/cluster_colocation_profile.go``:

1. Profiles whose ``namespaceSelector`` matches the namespace's labels and whose ``selector``
   matches the pod's labels (an absent or empty selector matches; a selector that cannot be
   evaluated, or a namespace that cannot be found, does not exclude the profile, as upstream's
   ``!matched && err == nil`` test) are applied in **name order**.
2. ``probability`` (int or ``"NN%"``): skipped when 0, or when not 100 and ``rand(0..99) > p``.
3. Per profile: labels, annotations, labelKeysMapping, annotationKeysMapping, labelSuffixes,
   schedulerName, qosClass (label ``koordinator.sh/qosClass``), priorityClassName (the
   PriorityClass's value and preemptionPolicy), koordinatorPriority (label
   ``koordinator.sh/priority``), then ``patch`` (strategic merge).
4. Unless a matched profile carries annotation ``config.koordinator.sh/skip-update-resources``,
   batch/mid pods get their cpu/memory rewritten (:func:`webhooks.pod.resources.rewrite_resources`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from app.api.koordext import LABEL_POD_PRIORITY, LABEL_POD_QOS
from app.api.labelselector import SelectorError, selector_is_empty, selector_matches
from app.cache.snapshot import ClusterCache
from webhooks.pod.podview import decode_pod
from webhooks.pod.resources import rewrite_resources
from webhooks.pod.strategicmerge import strategic_merge

log = logging.getLogger(__name__)

#: ``extension.AnnotationSkipUpdateResource``.
ANNOTATION_SKIP_UPDATE_RESOURCES = "config.koordinator.sh/skip-update-resources"


class ProfileError(Exception):
    """A profile could not be applied (bad probability, missing PriorityClass, bad patch): answered 500."""


def probability_percent(value: Any) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(p, 100, false)``: an int as is, ``"NN%"`` as NN.

    Raises:
        ProfileError: a string without ``%`` or with a non-integer number.
    """
    if value is None:
        return 100
    if isinstance(value, bool):
        raise ProfileError(f"invalid probability {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if not value.endswith("%"):
            raise ProfileError("invalid type: string is not a percentage")
        try:
            return int(value[:-1])
        except ValueError:
            raise ProfileError(f"invalid value for IntOrString: invalid value {value!r}") from None
    raise ProfileError(f"invalid probability {value!r}")


def should_skip(profile: Mapping[str, Any], rng: random.Random) -> bool:
    """``shouldSkipProfile``: p == 0, or p != 100 and ``rand.Intn(100) > p``."""
    percent = probability_percent((profile.get("spec") or {}).get("probability"))
    return percent == 0 or (percent != 100 and rng.randrange(100) > percent)


def _namespace_matches(cache: ClusterCache, namespace: str, selector: Any) -> bool:
    """Upstream semantics: an error (bad selector, unknown namespace) keeps the profile."""
    try:
        if selector_is_empty(selector):
            return True
        ns = cache.objects.get("Namespace", {}).get(namespace)
        if ns is None:
            return True  # Get() answers NotFound: upstream does not skip on errors
        return selector_matches(selector, (ns.get("metadata") or {}).get("labels"))
    except (SelectorError, AttributeError):
        return True


def _pod_matches(labels: Mapping[str, str], selector: Any) -> bool:
    try:
        return selector_is_empty(selector) or selector_matches(selector, labels)
    except (SelectorError, AttributeError):
        return True


def matching_profiles(cache: ClusterCache, pod: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The cached profiles that select ``pod`` in ``namespace``, sorted by name."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    out = []
    for profile in cache.objects.get("ClusterColocationProfile", {}).values():
        spec = profile.get("spec") or {}
        if spec.get("namespaceSelector") is not None and not _namespace_matches(
            cache, namespace, spec["namespaceSelector"]
        ):
            continue
        if spec.get("selector") is not None and not _pod_matches(labels, spec["selector"]):
            continue
        out.append(profile)
    return sorted(out, key=lambda p: str((p.get("metadata") or {}).get("name", "")))


def _apply_one(cache: ClusterCache, pod: dict[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """``doMutateByColocationProfile``: the pod after one profile (may be a new object after ``patch``)."""
    spec = profile.get("spec") or {}
    meta = pod.setdefault("metadata", {})
    pod_spec = pod.setdefault("spec", {})
    if spec.get("labels"):
        meta["labels"] = {**(meta.get("labels") or {}), **spec["labels"]}
    if spec.get("annotations"):
        meta["annotations"] = {**(meta.get("annotations") or {}), **spec["annotations"]}
    if spec.get("labelKeysMapping"):
        labels = dict(meta.get("labels") or {})
        for old, new in spec["labelKeysMapping"].items():
            labels[new] = labels.get(old, "")
        meta["labels"] = labels
    if spec.get("annotationKeysMapping"):
        annotations = dict(meta.get("annotations") or {})
        for old, new in spec["annotationKeysMapping"].items():
            annotations[new] = annotations.get(old, "")
        meta["annotations"] = annotations
    if spec.get("labelSuffixes"):
        labels = dict(meta.get("labels") or {})
        for key, suffix in spec["labelSuffixes"].items():
            if key in labels:
                labels[key] = labels[key] + suffix
        meta["labels"] = labels
    if spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec["schedulerName"]
    if spec.get("qosClass"):
        meta["labels"] = {**(meta.get("labels") or {}), LABEL_POD_QOS: spec["qosClass"]}
    if spec.get("priorityClassName"):
        name = spec["priorityClassName"]
        pc = cache.objects.get("PriorityClass", {}).get(name)
        if pc is None:
            raise ProfileError(f'priorityclasses.scheduling.k8s.io "{name}" not found')
        pod_spec["priorityClassName"] = name
        pod_spec["priority"] = int(pc.get("value") or 0)
        if pc.get("preemptionPolicy") is not None:
            pod_spec["preemptionPolicy"] = pc["preemptionPolicy"]
        else:
            pod_spec.pop("preemptionPolicy", None)
    if spec.get("koordinatorPriority") is not None:
        meta["labels"] = {**(meta.get("labels") or {}), LABEL_POD_PRIORITY: str(int(spec["koordinatorPriority"]))}
    if spec.get("patch") is not None:
        try:
            pod = strategic_merge(pod, spec["patch"])
        except ValueError as exc:
            raise ProfileError(str(exc)) from None
    return pod


def apply_profiles(
    cache: ClusterCache, pod: dict[str, Any], namespace: str, rng: random.Random
) -> tuple[dict[str, Any], bool]:
    """Apply every matching profile to ``pod`` (modified in place where possible).

    Returns:
        (the mutated pod, whether anything was applied or rewritten).

    Raises:
        ProfileError: a profile could not be applied.
        AdmissionError: the mutated pod is no longer a valid Pod.
    """
    profiles = matching_profiles(cache, pod, namespace)
    if not profiles:
        return pod, False
    skip_resources = False
    mutated = False
    for profile in profiles:
        name = (profile.get("metadata") or {}).get("name")
        if ANNOTATION_SKIP_UPDATE_RESOURCES in ((profile.get("metadata") or {}).get("annotations") or {}):
            skip_resources = True
        if should_skip(profile, rng):
            log.debug("skip mutating pod %s/%s by clusterColocationProfile %s", namespace, pod_name(pod), name)
            continue
        pod = _apply_one(cache, pod, profile)
        mutated = True
    if skip_resources:
        return pod, mutated
    _, info = decode_pod(pod)
    return pod, rewrite_resources(pod, info.priority_class) or mutated


def pod_name(pod: Mapping[str, Any]) -> str:
    """``metadata.name`` or ``generateName`` for messages."""
    meta = pod.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "")
