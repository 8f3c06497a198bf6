"""``/validate-scheduling-koordinator-sh-v1alpha1-reservation``: a Reservation's spec, checked before it is stored.

Upstream has no validating webhook for Reservations; it checks the same rules when it schedules one
(``ValidateReservation`` in ``pkg/util/reservation/reservation.go``: template present, owners present,
an expiration) and when it parses owners (``ParseReservationOwnerMatchers``). Here they are answered at
admission, each as a ``field.Error`` (``<path>: <type>: <detail>``, several joined as an aggregate
``[a, b]``), with ``allowed: false`` and code 400 (``admission.Errored``):

- ``spec.template``: Required value: the reservation misses the template spec
- ``spec.owners``: Required value: the reservation misses the owner spec
- ``spec.owners[i]...``: Invalid value (a malformed label selector or field)
- ``spec.ttl`` / ``spec.expires``: Invalid value (unparsable); Forbidden when both are set
- ``spec.allocatePolicy``: Unsupported value
- ``spec.template.spec.containers[i].resources.requests[r]``: Invalid value for a negative quantity;
  Required value when nothing positive is requested.

Status updates (``subResource: status``) and DELETE are allowed.
"""

from __future__ import annotations

from typing import Any

from app.api.quantity import QuantityError, parse_resource_list
from app.api.timeparse import parse_time
from app.framework.duration import parse_duration
from app.plugins.reservation import names as n
from app.plugins.reservation.owners import OwnerError, parse_owners
from webhooks.admission import AdmissionRequest, AdmissionResponse, allow, deny
from webhooks.webhook import WebhookContext

PATH = "/validate-scheduling-koordinator-sh-v1alpha1-reservation"


def _error(path: str, kind: str, detail: str, value: Any = None) -> str:
    if value is not None:
        return f'{path}: {kind}: "{value}": {detail}'
    return f"{path}: {kind}: {detail}"


def _aggregate(errors: list[str]) -> str:
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _requests_errors(template: dict[str, Any]) -> list[str]:
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return [_error("spec.template.spec", "Required value", "the reservation misses the template spec")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [_error("spec.template.spec.containers", "Required value", "must have at least one container")]
    errors: list[str] = []
    positive = False
    for i, container in enumerate(containers):
        path = f"spec.template.spec.containers[{i}].resources.requests"
        requests: Any = (
            ((container or {}).get("resources") or {}).get("requests") if isinstance(container, dict) else None
        )
        try:
            parsed = parse_resource_list(requests, field=path)
        except QuantityError as exc:
            errors.append(_error(path, "Invalid value", str(exc)))
            continue
        for name, value in sorted(parsed.items()):
            if value < 0:
                errors.append(
                    _error(f"{path}[{name}]", "Invalid value", "must be greater than or equal to 0", requests[name])
                )
            elif value > 0:
                positive = True
    if not positive and not errors:
        errors.append(
            _error(
                "spec.template.spec.containers[*].resources.requests",
                "Required value",
                "the reservation must reserve a positive amount of some resource",
            )
        )
    return errors


def reservation_errors(obj: dict[str, Any]) -> list[str]:
    """Every field error of a Reservation object (empty when valid); see the module docstring."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [_error("spec", "Required value", "the reservation misses the template spec")]
    errors: list[str] = []
    template = spec.get("template")
    if not isinstance(template, dict):
        errors.append(_error("spec.template", "Required value", "the reservation misses the template spec"))
    else:
        errors += _requests_errors(template)
    owners = spec.get("owners")
    if not owners:
        errors.append(_error("spec.owners", "Required value", "the reservation misses the owner spec"))
    else:
        try:
            parse_owners(owners)
        except OwnerError as exc:
            path, _, detail = str(exc).partition(": ")
            errors.append(_error(path, "Invalid value", detail))
    if spec.get("ttl") is not None and spec.get("expires") is not None:
        errors.append(_error("spec.expires", "Forbidden", "ttl and expires cannot be set at the same time"))
    if spec.get("ttl") is not None:
        try:
            if parse_duration(spec["ttl"]) < 0:
                errors.append(_error("spec.ttl", "Invalid value", "must not be negative", spec["ttl"]))
        except ValueError as exc:
            errors.append(_error("spec.ttl", "Invalid value", str(exc)))
    if spec.get("expires") is not None:
        try:
            parse_time(spec["expires"])
        except ValueError as exc:
            errors.append(_error("spec.expires", "Invalid value", str(exc)))
    policy = spec.get("allocatePolicy")
    if policy not in (None, *n.ALLOCATE_POLICIES):
        supported = ", ".join(f'"{p}"' for p in n.ALLOCATE_POLICIES if p)
        errors.append(f'spec.allocatePolicy: Unsupported value: "{policy}": supported values: {supported}')
    return errors


def validate(req: AdmissionRequest, context: WebhookContext) -> AdmissionResponse:
    """Validate a Reservation CREATE / UPDATE (status updates and DELETE pass)."""
    if req.kind.kind != "Reservation" or req.operation not in ("CREATE", "UPDATE") or req.subResource:
        return allow(req.uid)
    obj = req.object
    if not isinstance(obj, dict):
        return deny(req.uid, "request.object: expected a Reservation object", 400)
    errors = reservation_errors(obj)
    if errors:
        return deny(req.uid, _aggregate(errors), 400)
    return allow(req.uid)
