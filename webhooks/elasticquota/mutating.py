"""``/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` (upstream ``pkg/webhook/elasticquota/mutating``,
``quota_topology.go`` ``fillQuotaDefaultInformation``).

On CREATE (other operations pass unchanged): the ``parent`` label defaults to the root quota; a
quota under a non-root parent inherits the parent's ``tree-id`` (the parent must exist); the
``shared-weight`` annotation defaults to ``spec.max`` as JSON, and an existing one gets max's
missing keys added and keys absent from max removed. The root quota is left alone.
"""

from __future__ import annotations

from typing import Any

import orjson

from app.api import elasticquota as n
from webhooks.admission import AdmissionRequest, AdmissionResponse, allow, errored, patched
from webhooks.elasticquota.topology import QuotaCheckError, QuotaTopology, parse_quota
from webhooks.webhook import WebhookContext

PATH = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _go_json(value: Any) -> str:
    """JSON as Go's ``json.Marshal`` of a map: keys sorted, no spaces."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def is_elastic_quota_request(req: AdmissionRequest) -> bool:
    """The request is about ``elasticquotas`` and not a subresource (``shouldIgnoreIfNotElasticQuotas``)."""
    return not req.subResource and req.resource.resource == "elasticquotas"


def mutate(req: AdmissionRequest, context: WebhookContext) -> AdmissionResponse:
    """Fill the quota's defaults on CREATE; errors (unknown parent, bad shared-weight) answer 400."""
    if not is_elastic_quota_request(req) or req.operation != "CREATE":
        return allow(req.uid)
    obj = req.object
    if not isinstance(obj, dict):
        return errored(req.uid, "request.object: expected an ElasticQuota object", 400)
    try:
        quota = parse_quota(obj)
    except QuotaCheckError as exc:
        return errored(req.uid, str(exc), 400)
    if quota.name == n.ROOT_QUOTA_NAME:
        return allow(req.uid)
    meta = obj.get("metadata") or {}
    labels = meta.get("labels")
    annotations = meta.get("annotations")
    ops: list[dict[str, Any]] = []
    new_labels: dict[str, str] = dict(labels) if isinstance(labels, dict) else {}
    if not new_labels.get(n.LABEL_QUOTA_PARENT):
        new_labels[n.LABEL_QUOTA_PARENT] = n.ROOT_QUOTA_NAME
    parent = new_labels[n.LABEL_QUOTA_PARENT]
    if not new_labels.get(n.LABEL_QUOTA_TREE_ID) and parent != n.ROOT_QUOTA_NAME:
        parent_info = QuotaTopology(context.cache).quotas.get(parent)
        if parent_info is None:
            return errored(req.uid, f"fill quota {quota.name} failed, parent not exist", 400)
        if parent_info.tree_id:
            new_labels[n.LABEL_QUOTA_TREE_ID] = parent_info.tree_id
    new_annotations: dict[str, str] = dict(annotations) if isinstance(annotations, dict) else {}
    raw_max = (obj.get("spec") or {}).get("max") or {}
    current = new_annotations.get(n.ANNOTATION_SHARED_WEIGHT)
    if not current:
        new_annotations[n.ANNOTATION_SHARED_WEIGHT] = _go_json(raw_max)
    else:
        try:
            weights = orjson.loads(current)
        except orjson.JSONDecodeError as exc:
            return errored(req.uid, f"fillDefaultQuotaInfo unmarshal sharedWeight failed:{exc}", 400)
        if not isinstance(weights, dict):
            return errored(req.uid, "fillDefaultQuotaInfo unmarshal sharedWeight failed: expected a ResourceList", 400)
        fixed = {k: v for k, v in weights.items() if k in raw_max}
        for k, v in raw_max.items():
            fixed.setdefault(k, v)
        if fixed != weights:
            new_annotations[n.ANNOTATION_SHARED_WEIGHT] = _go_json(fixed)
    if not isinstance(labels, dict):
        ops.append({"op": "add", "path": "/metadata/labels", "value": new_labels})
    else:
        for key, value in new_labels.items():
            if labels.get(key) != value:
                op = "replace" if key in labels else "add"
                ops.append({"op": op, "path": f"/metadata/labels/{_pointer(key)}", "value": value})
    if not isinstance(annotations, dict):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": new_annotations})
    else:
        for key, value in new_annotations.items():
            if annotations.get(key) != value:
                op = "replace" if key in annotations else "add"
                ops.append({"op": op, "path": f"/metadata/annotations/{_pointer(key)}", "value": value})
    return patched(req.uid, ops)
