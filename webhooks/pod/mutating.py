"""``/mutate-pod``: ClusterColocationProfile and extended-resource-spec mutation, answered as a JSONPatch.

Follows upstream's ``PodMutatingHandler.Handle`` (``pkg/webhook/pod/mutating/mutating_handler.go``):
requests for other resources or for a subresource are allowed unchanged; CREATE runs the
profiles then the extended-resource-spec annotation; UPDATE, DELETE and CONNECT are allowed
unchanged. A pod without ``metadata.namespace`` is evaluated in ``request.namespace`` but the
patch never sets the namespace. A malformed pod (its own extended-resource-spec annotation
included, which upstream answers 500) is answered ``allowed: false`` code 400; a failure of a
profile while applying (missing PriorityClass, bad probability or patch) code 500.
"""

from __future__ import annotations

import orjson

from webhooks.admission import AdmissionRequest, AdmissionResponse, allow, errored, patched
from webhooks.pod.jsondiff import make_patch
from webhooks.pod.podview import decode_pod
from webhooks.pod.profiles import ProfileError, apply_profiles
from webhooks.pod.resources import ExtendedResourceSpecError, set_extended_resource_spec
from webhooks.webhook import AdmissionError, WebhookContext


def is_pod_request(req: AdmissionRequest) -> bool:
    """``!shouldIgnoreIfNotPod``: resource ``pods`` and no subresource."""
    return not req.subResource and req.resource.resource == "pods"


def mutate_pod(req: AdmissionRequest, ctx: WebhookContext) -> AdmissionResponse:
    """Mutate a pod on CREATE; see the module docstring.

    Raises:
        AdmissionError: the object is not a Pod (answered code 400 by the route).
    """
    if not is_pod_request(req) or req.operation != "CREATE":
        return allow(req.uid)
    original, _ = decode_pod(req.object)
    pod = orjson.loads(orjson.dumps(original))  # a deep copy, several times faster than copy.deepcopy
    meta = pod.setdefault("metadata", {})
    namespace = meta.get("namespace") or req.namespace
    try:
        pod, mutated = apply_profiles(ctx.cache, pod, namespace, ctx.rng)
        mutated = set_extended_resource_spec(pod) or mutated
    except ExtendedResourceSpecError as exc:
        return errored(req.uid, str(exc), 400)
    except (ProfileError, ValueError) as exc:
        if isinstance(exc, AdmissionError):
            raise
        return errored(req.uid, str(exc), 500)
    if not mutated:
        return allow(req.uid)
    ops = make_patch(original, pod)
    return patched(req.uid, ops)
