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


def is_active(obj: Mapping[str, Any]) -> bool:
    """``IsReservationActive``: ``status.nodeName`` set and phase Available or Waiting."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return False
    return bool(status.get("nodeName")) and status.get("phase") in (PHASE_AVAILABLE, PHASE_WAITING)
