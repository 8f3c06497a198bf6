"""Reservation keys other plugins read (``apis/extension/reservation.go``), shared so that plugins need not
import each other: the owner pod's ``reservation-allocated`` annotation and the Reservation's phases.

The Reservation plugin itself lives in :mod:`app.plugins.reservation`; ElasticQuota reads these to count a
reservation's capacity against its quota once (:mod:`app.plugins.elasticquota.reservations`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

ANNOTATION_RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
PHASE_AVAILABLE = "Available"
PHASE_WAITING = "Waiting"
#: ``spec.allocatePolicy`` under which reserved resources come from the Reservation alone.
ALLOCATE_POLICY_RESTRICTED = "Restricted"
#: ``NewReservationReason``'s prefix: a failure reason about the pod's reservations, not the node.
RESERVATION_REASON_PREFIX = "Reservation(s) "
#: The label upstream's migration controller puts on every Reservation it creates, and its value
#: (``LabelCreatedBy`` / ``DefaultCreator``, ``pkg/descheduler/controllers/migration/reservation/types.go``).
LABEL_CREATED_BY = "app.kubernetes.io/created-by"
MIGRATION_CREATOR = "koord-descheduler"
#: The PodMigrationJob a Reservation was made for (written by koordinator-py's descheduler beside the label).
ANNOTATION_POD_MIGRATION_JOB = "scheduling.koordinator.sh/pod-migration-job"


def is_migration_reservation(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """Whether a Reservation was made by a PodMigrationJob (ReservationFirst): it carries
    ``app.kubernetes.io/created-by: koord-descheduler`` (upstream's mark) or names its job in
    ``scheduling.koordinator.sh/pod-migration-job``."""
    return labels.get(LABEL_CREATED_BY) == MIGRATION_CREATOR or bool(annotations.get(ANNOTATION_POD_MIGRATION_JOB))


def allocated_ref(annotations: Mapping[str, str]) -> tuple[str, str] | None:
    """(name, uid) the pod's ``reservation-allocated`` annotation names (``GetReservationAllocated``), or
    None when absent or not a JSON object."""
    raw = annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    if not raw:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    return str(data.get("name") or ""), str(data.get("uid") or "")


def allocate_policy(obj: Mapping[str, Any]) -> str:
    """A Reservation object's ``spec.allocatePolicy`` ("" when unset or not a string)."""
    spec = obj.get("spec")
    policy = spec.get("allocatePolicy") if isinstance(spec, dict) else None
    return policy if isinstance(policy, str) else ""


def reserve_pod_uid(obj: Mapping[str, Any]) -> str:
    """The uid of a Reservation's reserve pod (``NewReservePod``: the reservation's uid; the file source
    may store objects without one, then ``reservation-<name>``). Plugins key what they account for the
    reservation (its GPUs) by it."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    uid = str((meta or {}).get("uid") or "")
    return uid or f"reservation-{(meta or {}).get('name', '')}"


def is_active(obj: Mapping[str, Any]) -> bool:
    """``IsReservationActive``: ``status.nodeName`` set and phase Available or Waiting."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return False
    return bool(status.get("nodeName")) and status.get("phase") in (PHASE_AVAILABLE, PHASE_WAITING)
