"""Write each ElasticQuota's runtime, request and used back to the object, as upstream's quota controller.

Upstream ``pkg/scheduler/plugins/elasticquota/controller.go`` (``syncElasticQuotaStatusWorker``, every
second): for every ElasticQuota it takes the quota summary and compares, ignoring zero quantities,

- the annotations ``quota.scheduling.koordinator.sh/runtime``, ``request``, ``child-request``,
  ``guaranteed``, ``allocated``, ``non-preemptible-request`` and ``non-preemptible-used`` (each a
  ResourceList as JSON, e.g. ``{"cpu":"4","memory":"8Gi"}``),
- and ``status.used``,

with what the quota tree holds now. When something differs it sends one JSON merge patch of the main
resource (the ElasticQuota CRD has no status subresource) carrying only what changed. An annotation that
is not valid ResourceList JSON makes upstream skip the quota for that round; so does this module.

``guaranteed`` and ``allocated`` belong to the ElasticQuotaGuaranteeUsage feature, which is not built:
they are always empty here, so they are written only to clear stale values.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from app.api import elasticquota as n
from app.api.quantity import QuantityError, format_resource_list, parse_resource_list
from app.client.errors import ApiError
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.quotainfo import QuotaInfo
from app.sources.base import ClusterClient

log = logging.getLogger(__name__)

#: Seconds between two status rounds (upstream: ``wait.Until(syncElasticQuotaStatusWorker, 1*time.Second)``).
STATUS_SYNC_INTERVAL = 1.0


class BadAnnotation(ValueError):
    """A quota annotation the writer compares with is not ResourceList JSON; the quota is skipped."""


def desired_annotations(info: QuotaInfo) -> dict[str, dict[str, int]]:
    """The seven summary annotations of ``info`` as internal ResourceLists (milli-cores, bytes, counts)."""
    return {
        n.ANNOTATION_RUNTIME: info.runtime,
        n.ANNOTATION_REQUEST: info.request,
        n.ANNOTATION_CHILD_REQUEST: info.child_request,
        n.ANNOTATION_GUARANTEED: {},
        n.ANNOTATION_ALLOCATED: {},
        n.ANNOTATION_NON_PREEMPTIBLE_REQUEST: info.np_request,
        n.ANNOTATION_NON_PREEMPTIBLE_USED: info.np_used,
    }


def _non_zero(values: dict[str, int]) -> dict[str, int]:
    """``quotav1.RemoveZeros``."""
    return {k: v for k, v in values.items() if v != 0}


def _annotation_list(annotations: dict[str, Any], key: str) -> dict[str, int]:
    raw = annotations.get(key)
    if raw in (None, ""):
        return {}
    try:
        return parse_resource_list(orjson.loads(raw), field=key)
    except (orjson.JSONDecodeError, TypeError, QuantityError) as exc:
        raise BadAnnotation(f"annotation {key}: {exc}") from None


def encode_resource_list(values: dict[str, int]) -> str:
    """ResourceList JSON as Go's ``json.Marshal(v1.ResourceList)``: compact, keys sorted, quantity strings."""
    return orjson.dumps(format_resource_list(values), option=orjson.OPT_SORT_KEYS).decode()


def status_patch(obj: dict[str, Any], info: QuotaInfo) -> dict[str, Any] | None:
    """The merge patch that brings ``obj`` (an ElasticQuota) up to ``info``; None when nothing changed.

    Returns:
        ``{"metadata": {"annotations": {key: json}}, "status": {"used": {...}}}`` with only the parts
        that differ once zero quantities are dropped.

    Raises:
        BadAnnotation: one of the compared annotations, or ``status.used``, does not parse.
    """
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    changed: dict[str, str] = {}
    for key, want in desired_annotations(info).items():
        if _non_zero(_annotation_list(annotations, key)) != _non_zero(want):
            changed[key] = encode_resource_list(want)
    try:
        used = parse_resource_list((obj.get("status") or {}).get("used"), field="status.used")
    except QuantityError as exc:
        raise BadAnnotation(str(exc)) from None
    patch: dict[str, Any] = {}
    if changed:
        patch["metadata"] = {"annotations": changed}
    if _non_zero(used) != _non_zero(info.used):
        patch["status"] = {"used": format_resource_list(info.used)}
    return patch or None


#: Quotas compared between two yields to the event loop (a round over 1,000 quotas must not hold it).
YIELD_EVERY = 64


def _fingerprint(obj: dict[str, Any], info: QuotaInfo) -> tuple[Any, ...]:
    """What a comparison depends on: the object version and the values to write."""
    lists = (info.runtime, info.request, info.child_request, info.np_request, info.np_used, info.used)
    return (id(obj), tuple(tuple(sorted(rl.items())) for rl in lists))


class StatusWriter:
    """Upstream's status worker for one quota manager: :meth:`sync_once` is one round.

    A quota whose object and values are the ones a previous round found in agreement is skipped
    without parsing its annotations again, so a quiet round costs little more than the runtime refresh.
    """

    def __init__(self, manager: QuotaManager) -> None:
        self.manager = manager
        self._agreed: dict[str, tuple[Any, ...]] = {}

    async def sync_once(self, client: ClusterClient) -> int:
        """One round over every ElasticQuota object the manager holds; returns the number of patches sent.

        Runtimes are refreshed first. A quota that is not in the tree, has a bad annotation, or whose
        patch the client refuses is logged and skipped; the next round retries it.
        """
        manager = self.manager
        manager.refresh_all()
        sent = 0
        objects = list(manager.objects.items())
        self._agreed = {k: v for k, v in self._agreed.items() if k in manager.objects}
        for i, (name, obj) in enumerate(objects):
            if i and i % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            info = manager.quotas.get(name)
            if info is None:
                continue
            stamp = _fingerprint(obj, info)
            if self._agreed.get(name) == stamp:
                continue
            try:
                patch = status_patch(obj, info)
            except BadAnnotation as exc:
                log.warning("ElasticQuota %s: not updating its status: %s", name, exc)
                continue
            if patch is None:
                self._agreed[name] = stamp
                continue
            namespace = (obj.get("metadata") or {}).get("namespace")
            try:
                await client.patch("ElasticQuota", name, patch, namespace=namespace)
                sent += 1
            except ApiError as exc:
                log.warning("ElasticQuota %s: status patch failed: %s", name, exc)
        return sent


#: Annotations this module owns: changing them does not change the quota tree.
WRITTEN_ANNOTATIONS = frozenset(
    {
        n.ANNOTATION_RUNTIME,
        n.ANNOTATION_REQUEST,
        n.ANNOTATION_CHILD_REQUEST,
        n.ANNOTATION_GUARANTEED,
        n.ANNOTATION_ALLOCATED,
        n.ANNOTATION_NON_PREEMPTIBLE_REQUEST,
        n.ANNOTATION_NON_PREEMPTIBLE_USED,
    }
)


def same_definition(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two versions of an ElasticQuota differ at most in what this module writes (status and
    :data:`WRITTEN_ANNOTATIONS`), so the quota tree need not be rebuilt."""

    def view(obj: dict[str, Any]) -> tuple[Any, ...]:
        meta = obj.get("metadata") or {}
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in WRITTEN_ANNOTATIONS}
        return (meta.get("namespace"), meta.get("labels") or {}, annotations, obj.get("spec"))

    return view(old) == view(new)
