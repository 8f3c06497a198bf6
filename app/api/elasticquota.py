"""ElasticQuota's well-known names and the parse of an ElasticQuota object (``apis/extension/elastic_quota.go``).

Shared by the scheduler plugin (:mod:`app.plugins.elasticquota`) and the ElasticQuota and pod
webhooks, as upstream's plugin and webhook both read quotas through ``apis/extension`` and
``core.NewQuotaInfoFromQuota``:

- the quota names, labels and annotations, spelled as upstream;
- the small readers of those labels and annotations (``GetParentQuotaName``, ``IsParentQuota``,
  ``IsAllowLentResource``, ``GetSharedWeight``, ...);
- :func:`parse_elastic_quota`, the one parse of an ElasticQuota object into an
  :class:`ElasticQuotaView` (name, tree labels, ``spec.min``/``spec.max`` as internal integers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from app.api.quantity import QuantityError, parse_resource_list

SYSTEM_QUOTA_NAME = "koordinator-system-quota"
ROOT_QUOTA_NAME = "koordinator-root-quota"
DEFAULT_QUOTA_NAME = "koordinator-default-quota"
#: Quotas the scheduler itself owns (never part of the root's runtime calculator except root).
RESERVED_QUOTA_NAMES = frozenset({SYSTEM_QUOTA_NAME, ROOT_QUOTA_NAME, DEFAULT_QUOTA_NAME})

PREFIX = "quota.scheduling.koordinator.sh"
LABEL_QUOTA_IS_PARENT = PREFIX + "/is-parent"
LABEL_QUOTA_PARENT = PREFIX + "/parent"
LABEL_ALLOW_LENT_RESOURCE = PREFIX + "/allow-lent-resource"
LABEL_QUOTA_NAME = PREFIX + "/name"
LABEL_QUOTA_IS_ROOT = PREFIX + "/is-root"
LABEL_QUOTA_TREE_ID = PREFIX + "/tree-id"
LABEL_PREEMPTIBLE = PREFIX + "/preemptible"
LABEL_ALLOW_FORCE_UPDATE = PREFIX + "/allow-force-update"
ANNOTATION_SHARED_WEIGHT = PREFIX + "/shared-weight"
ANNOTATION_RUNTIME = PREFIX + "/runtime"
ANNOTATION_REQUEST = PREFIX + "/request"
ANNOTATION_CHILD_REQUEST = PREFIX + "/child-request"
ANNOTATION_QUOTA_NAMESPACES = PREFIX + "/namespaces"
ANNOTATION_GUARANTEED = PREFIX + "/guaranteed"
ANNOTATION_ALLOCATED = PREFIX + "/allocated"
ANNOTATION_NON_PREEMPTIBLE_REQUEST = PREFIX + "/non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED = PREFIX + "/non-preemptible-used"
ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS = PREFIX + "/max-strict-check-resource-keys"


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def quota_name_of(obj: dict[str, Any]) -> str:
    """``metadata.name`` of an object ("" when missing)."""
    name = (obj.get("metadata") or {}).get("name")
    return name if isinstance(name, str) else ""


def parent_quota_name(quota: dict[str, Any]) -> str:
    """The ``parent`` label, or the root quota's name when empty (root itself has no parent)."""
    parent = _labels(quota).get(LABEL_QUOTA_PARENT) or ""
    if not parent and quota_name_of(quota) != ROOT_QUOTA_NAME:
        return ROOT_QUOTA_NAME
    return str(parent)


def is_parent_quota(quota: dict[str, Any]) -> bool:
    """``is-parent`` label is exactly ``"true"``."""
    return _labels(quota).get(LABEL_QUOTA_IS_PARENT) == "true"


def is_allow_lent_resource(quota: dict[str, Any]) -> bool:
    """``allow-lent-resource`` is anything but ``"false"``."""
    return _labels(quota).get(LABEL_ALLOW_LENT_RESOURCE) != "false"


def is_allow_force_update(quota: dict[str, Any]) -> bool:
    """``allow-force-update`` label is ``"true"``."""
    return _labels(quota).get(LABEL_ALLOW_FORCE_UPDATE) == "true"


def is_tree_root_quota(quota: dict[str, Any]) -> bool:
    """``is-root`` label is ``"true"`` (the root of a separate quota tree)."""
    return _labels(quota).get(LABEL_QUOTA_IS_ROOT) == "true"


def tree_id(quota: dict[str, Any]) -> str:
    """``tree-id`` label ("" for the default tree)."""
    return str(_labels(quota).get(LABEL_QUOTA_TREE_ID) or "")


def pod_quota_label(labels: dict[str, str]) -> str:
    """The ``quota.scheduling.koordinator.sh/name`` label of a pod ("" when absent)."""
    return labels.get(LABEL_QUOTA_NAME, "")


def is_pod_non_preemptible(labels: dict[str, str]) -> bool:
    """A pod labelled ``quota.scheduling.koordinator.sh/preemptible: "false"``."""
    return labels.get(LABEL_PREEMPTIBLE) == "false"


def annotation_json(quota: dict[str, Any], key: str) -> Any:
    """The JSON value of annotation ``key`` (None when absent or empty).

    Raises:
        ValueError: the annotation is not valid JSON (message names the annotation).
    """
    raw = _annotations(quota).get(key)
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"annotation {key} is not valid JSON: {exc}") from None


def shared_weight(quota: dict[str, Any], max_: dict[str, int]) -> dict[str, int]:
    """``shared-weight`` annotation as internal integers; absent, invalid or all-zero means ``max``
    (``GetSharedWeight``)."""
    try:
        raw = annotation_json(quota, ANNOTATION_SHARED_WEIGHT)
        weights = parse_resource_list(raw, field=ANNOTATION_SHARED_WEIGHT) if raw is not None else {}
    except (ValueError, QuantityError):
        weights = {}
    if weights and any(v != 0 for v in weights.values()):
        return weights
    return dict(max_)


def quota_namespaces(quota: dict[str, Any]) -> list[str]:
    """The ``namespaces`` annotation (JSON list of namespace names); empty when absent or invalid."""
    try:
        raw = annotation_json(quota, ANNOTATION_QUOTA_NAMESPACES)
    except ValueError:
        return []
    if not isinstance(raw, list):
        return []
    return [str(ns) for ns in raw if isinstance(ns, str)]


class QuotaSpecError(ValueError):
    """An ElasticQuota object cannot be read; the message names the quota and the field
    (``ElasticQuota team: spec.max.cpu: ...``)."""


@dataclass(frozen=True, slots=True)
class ElasticQuotaView:
    """What the scheduler and the webhooks read of one ElasticQuota object.

    Attributes:
        name, namespace: ``metadata`` ("" namespace when absent).
        parent: :func:`parent_quota_name`; is_parent: :func:`is_parent_quota`;
        allow_lent_resource: :func:`is_allow_lent_resource`; allow_force_update: :func:`is_allow_force_update`;
        tree_id: :func:`tree_id`; is_tree_root: :func:`is_tree_root_quota`.
        max, min: ``spec.max`` / ``spec.min`` as internal integers (cpu milli, others base units).
        namespaces: :func:`quota_namespaces`.
    """

    name: str
    namespace: str
    parent: str
    is_parent: bool
    allow_lent_resource: bool
    allow_force_update: bool
    tree_id: str
    is_tree_root: bool
    max: dict[str, int] = field(default_factory=dict)
    min: dict[str, int] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)


def parse_elastic_quota(obj: Any) -> ElasticQuotaView:
    """Read an ElasticQuota object (JSON-shaped dict), as ``core.NewQuotaInfoFromQuota`` does.

    Raises:
        QuotaSpecError: no ``metadata.name``, ``spec`` not an object, or ``spec.min``/``spec.max``
            not ResourceLists of valid quantities (``ElasticQuota <name>: spec.max.cpu: ...``).
    """
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(name, str) or not name:
        raise QuotaSpecError("ElasticQuota metadata.name: required")
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise QuotaSpecError(f"ElasticQuota {name} spec: expected an object")
    try:
        max_ = parse_resource_list(spec.get("max"), field="spec.max")
        min_ = parse_resource_list(spec.get("min"), field="spec.min")
    except QuantityError as exc:
        raise QuotaSpecError(f"ElasticQuota {name}: {exc}") from None
    return ElasticQuotaView(
        name=name,
        namespace=str(meta.get("namespace") or ""),
        parent=parent_quota_name(obj),
        is_parent=is_parent_quota(obj),
        allow_lent_resource=is_allow_lent_resource(obj),
        allow_force_update=is_allow_force_update(obj),
        tree_id=tree_id(obj),
        is_tree_root=is_tree_root_quota(obj),
        max=max_,
        min=min_,
        namespaces=quota_namespaces(obj),
    )
