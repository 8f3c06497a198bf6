"""``/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` (upstream ``pkg/webhook/elasticquota/validating``,
``quota_topology.go`` ``ValidAddQuota`` / ``ValidUpdateQuota`` / ``ValidDeleteQuota``).

CREATE, UPDATE and DELETE are checked against the quotas in the cache; a failed check is
answered ``allowed: false`` with code 400 and upstream's message (as ``admission.Errored``).
"""

from __future__ import annotations

from webhooks.admission import AdmissionRequest, AdmissionResponse, allow, deny
from webhooks.elasticquota.mutating import is_elastic_quota_request
from webhooks.elasticquota.topology import QuotaCheckError, QuotaTopology
from webhooks.webhook import WebhookContext

PATH = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"


def validate(req: AdmissionRequest, context: WebhookContext) -> AdmissionResponse:
    """Validate an ElasticQuota CREATE / UPDATE / DELETE."""
    if not is_elastic_quota_request(req):
        return allow(req.uid)
    obj = req.oldObject if req.operation == "DELETE" else req.object
    if req.operation == "DELETE" and obj is None:
        return allow(req.uid)
    if not isinstance(obj, dict):
        return deny(req.uid, "request.object: expected an ElasticQuota object", 400)
    topology = QuotaTopology(context.cache)
    try:
        if req.operation == "CREATE":
            topology.valid_add(obj)
        elif req.operation == "UPDATE":
            topology.valid_update(req.oldObject, obj)
        elif req.operation == "DELETE":
            topology.valid_delete(obj)
    except QuotaCheckError as exc:
        return deny(req.uid, str(exc), 400)
    return allow(req.uid)
