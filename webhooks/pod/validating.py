"""``/validate-pod``: the QoS class / priority class rules of ClusterColocationProfile pods.

Follows ``clusterColocationProfileValidatingPod`` of upstream's
``pkg/webhook/pod/validating/cluster_colocation_profile.go``, worded exactly as upstream:

- UPDATE: label ``koordinator.sh/qosClass``, the raw priority class (``spec.priority``) and
  label ``koordinator.sh/priority`` are immutable;
- a pod requesting ``kubernetes.io/batch-cpu`` or ``kubernetes.io/batch-memory`` must have QoS BE;
- QoS BE cannot combine with priority class none or koord-prod; QoS LSR cannot combine with
  none, koord-mid, koord-batch or koord-free;
- LSR and LSE pods must request cpu, in whole cores.

Violations are answered as upstream's ``admission.Errored(400, aggregate)``: ``allowed: false``,
code 400 and the aggregated message. When those pass, the ElasticQuota checks of
:mod:`webhooks.pod.quota` run (upstream's ``QuotaMetaChecker.ValidatePod``, next in the handler):
no pods in parent quotas, immutable ``quota.scheduling.koordinator.sh/preemptible`` label, also
answered as ``Errored(400, err)``. Requests for other resources, subresources, DELETE and CONNECT
are allowed.
"""

from __future__ import annotations

from typing import Any

from app.api.koordext import BATCH_CPU, BATCH_MEMORY, LABEL_POD_PRIORITY, LABEL_POD_QOS, PriorityClass, QoSClass
from app.api.quantity import format_milli
from webhooks.admission import AdmissionRequest, AdmissionResponse, allow, errored
from webhooks.fielderrors import FieldError, aggregate, forbidden, immutable, invalid, required
from webhooks.pod.mutating import is_pod_request
from webhooks.pod.podview import decode_pod, labels_of, raw_priority_class, raw_qos
from webhooks.pod.quota import validate_add_pod, validate_update_pod
from webhooks.webhook import WebhookContext

#: (QoS class, priority classes it cannot be combined with), in upstream's order of checks.
FORBIDDEN_COMBINATIONS: tuple[tuple[QoSClass, tuple[PriorityClass, ...]], ...] = (
    (QoSClass.BE, (PriorityClass.NONE, PriorityClass.PROD)),
    (QoSClass.LSR, (PriorityClass.NONE, PriorityClass.MID, PriorityClass.BATCH, PriorityClass.FREE)),
)


def validate_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """Immutable QoS class, raw priority class and koordinator priority label."""
    errs = immutable(f"labels.{LABEL_POD_QOS}", raw_qos(new).value, raw_qos(old).value)
    errs += immutable("spec.priority", raw_priority_class(new).value, raw_priority_class(old).value)
    new_priority, old_priority = labels_of(new).get(LABEL_POD_PRIORITY, ""), labels_of(old).get(LABEL_POD_PRIORITY, "")
    errs += immutable(f"labels.{LABEL_POD_PRIORITY}", new_priority, old_priority)
    return errs


def validate_pod(pod: dict[str, Any], requests: dict[str, int]) -> list[FieldError]:
    """The create-and-update rules; ``requests`` are the pod's requests (cpu milli-cores, others base units)."""
    errs: list[FieldError] = []
    qos = raw_qos(pod)
    if (requests.get(BATCH_CPU, 0) or requests.get(BATCH_MEMORY, 0)) and qos != QoSClass.BE:
        errs.append(
            required(f"labels.{LABEL_POD_QOS}", "must specify koordinator QoS BE with koordinator colocation resources")
        )
    pclass = raw_priority_class(pod)
    for forbidden_qos, classes in FORBIDDEN_COMBINATIONS:
        if qos == forbidden_qos and pclass in classes:
            detail = f"{LABEL_POD_QOS}={qos.value} and priorityClass={pclass.value} cannot be used in combination"
            errs.append(forbidden("Pod", detail))
    if qos in (QoSClass.LSR, QoSClass.LSE):
        cpu = requests.get("cpu", 0)
        path = "pod.spec.containers[*].resources.requests"
        if cpu == 0:
            errs.append(required(path, "LSR Pod must declare the requested CPUs"))
        elif cpu % 1000:
            errs.append(invalid(path, format_milli(cpu), "the requested CPUs of LSR Pod must be integer"))
    return errs


def validate(req: AdmissionRequest, ctx: WebhookContext) -> AdmissionResponse:
    """Validate a pod on CREATE and UPDATE; see the module docstring.

    Raises:
        AdmissionError: the object (or old object) is not a Pod (code 400).
    """
    if not is_pod_request(req) or req.operation not in ("CREATE", "UPDATE"):
        return allow(req.uid)
    pod, info = decode_pod(req.object)
    errs: list[FieldError] = []
    old: dict[str, Any] | None = None
    if req.operation == "UPDATE":
        old, _ = decode_pod(req.oldObject, "oldObject")
        errs += validate_update(old, pod)
    errs += validate_pod(pod, info.requests)
    if errs:
        return errored(req.uid, aggregate(errs), 400)
    namespace = (pod.get("metadata") or {}).get("namespace") or req.namespace or "default"
    if old is not None:
        refusal = validate_update_pod(old, pod, namespace, ctx)
    else:
        refusal = validate_add_pod(pod, namespace, ctx)
    if refusal:
        return errored(req.uid, refusal, 400)
    return allow(req.uid)
