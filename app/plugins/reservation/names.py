"""Reservation keys, phases, condition reasons and failure messages, spelled as upstream.

Sources: ``apis/extension/reservation.go``, ``apis/scheduling/v1alpha1/reservation_types.go``,
``pkg/util/reservation/reservation.go`` and ``pkg/scheduler/plugins/reservation/plugin.go``.
"""

from __future__ import annotations

from app.api import reservation as api

NAME = "Reservation"
DOMAIN = "scheduling.koordinator.sh"

# --- pod labels / annotations (apis/extension/reservation.go)
LABEL_RESERVATION_IGNORED = f"{DOMAIN}/reservation-ignored"
LABEL_RESERVATION_ORDER = f"{DOMAIN}/reservation-order"
ANNOTATION_RESERVATION_ALLOCATED = api.ANNOTATION_RESERVATION_ALLOCATED
ANNOTATION_RESERVATION_AFFINITY = f"{DOMAIN}/reservation-affinity"
ANNOTATION_EXACT_MATCH_RESERVATION = f"{DOMAIN}/exact-match-reservation"

# --- reserve pod annotations (pkg/util/reservation/reservation.go)
ANNOTATION_RESERVE_POD = f"{DOMAIN}/reserve-pod"
ANNOTATION_RESERVATION_NAME = f"{DOMAIN}/reservation-name"
ANNOTATION_RESERVATION_NODE = f"{DOMAIN}/reservation-node"
ANNOTATION_IS_PRE_ALLOCATION = f"{DOMAIN}/is-pre-allocation"
LABEL_POD_PRIORITY = "koordinator.sh/priority"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
MAX_INT32 = 2**31 - 1

# --- phases and conditions (reservation_types.go)
PHASE_PENDING = "Pending"
PHASE_AVAILABLE = api.PHASE_AVAILABLE
PHASE_WAITING = api.PHASE_WAITING
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
CONDITION_SCHEDULED = "Scheduled"
CONDITION_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_AVAILABLE = "Available"
REASON_SUCCEEDED = "Succeeded"
REASON_EXPIRED = "Expired"

POLICY_DEFAULT = ""
POLICY_ALIGNED = "Aligned"
POLICY_RESTRICTED = api.ALLOCATE_POLICY_RESTRICTED
ALLOCATE_POLICIES = (POLICY_DEFAULT, POLICY_ALIGNED, POLICY_RESTRICTED)

# --- failure reasons (plugin.go)
ERR_REASON_PREFIX = api.RESERVATION_REASON_PREFIX
ERR_REASON_RESERVATION_AFFINITY = "node(s) no reservations match reservation affinity"
ERR_REASON_NO_RESERVATIONS_MEET_REQUIREMENTS = "node(s) no reservation(s) to meet the requirements"
ERR_REASON_NODE_NOT_MATCH_RESERVATION = "node(s) didn't match the nodeName specified by reservation"
ERR_REASON_RESERVATION_ALLOCATE_POLICY_CONFLICT = "node(s) reservation allocate policy conflict"
#: koordinator-py's: an owner of a fitting migration Reservation is kept to the nodes of such Reservations.
ERR_REASON_MIGRATION_RESERVATION = "node(s) didn't have the pod's migration reservation"

#: Score of the node holding the reservation with the smallest positive reservation-order (scoring.go).
MOST_PREFERRED_SCORE = 1000

#: Controller defaults (pkg/scheduler/apis/config/v1beta3/defaults.go): GC after 24 h, checked every 60 s.
GC_DURATION_SECONDS = 86400.0
#: CRD default of spec.ttl when neither ttl nor expires is given.
DEFAULT_TTL_SECONDS = 86400.0


def reservation_reason(message: str) -> str:
    """``NewReservationReason``: a reservation-level reason, ``Reservation(s) <message>``."""
    return ERR_REASON_PREFIX + message
