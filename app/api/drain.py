"""The DrainNode API (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, short name ``dn``) and the labels
koord-descheduler's drain controller puts on what it touches, spelled as upstream
(``apis/scheduling/v1alpha1/drain_node_types.go``, ``pkg/descheduler/controllers/drain/utils``).

Shared by the controller (:mod:`app.descheduler.drain`) and the command line (``koord descheduler drain``).

Note: upstream's status fields for the per-pod list and its summary are spelled ``pogMigrations`` and
``pogMigrationSummary`` (sic) in their JSON tags; they are kept so objects written by either controller read
the same.
"""

from __future__ import annotations

from typing import Any

DRAIN_API_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND_DRAIN_NODE = "DrainNode"

#: Labels and annotations (``utils.DrainNodeKey`` ... ``utils.PausedAfterConfirmed``).
LABEL_DRAIN_NODE = "drain.descheduler.koordinator.sh/drain-node"
LABEL_NODE_NAME = "drain.descheduler.koordinator.sh/node-name"
LABEL_PLANNING = "drain.descheduler.koordinator.sh/node-planning"
LABEL_GROUP = "drain.descheduler.koordinator.sh/node-group"
LABEL_POD_NAMESPACE = "drain.descheduler.koordinator.sh/pod-namespace"
LABEL_POD_NAME = "drain.descheduler.koordinator.sh/pod-name"
ANNOTATION_MIGRATION_POLICY = "drain.descheduler.koordinator.sh/migration-policy"
ANNOTATION_PAUSED_AFTER_CONFIRMED = "drain.descheduler.koordinator.sh/paused-after-confirmed"
#: This rebuild's: the Node annotation naming the DrainNode that set ``spec.unschedulable``, so undoing that
#: drain uncordons only a node it cordoned itself.
ANNOTATION_CORDONED_BY = "drain.descheduler.koordinator.sh/cordoned-by"

#: ``DrainNodePhase``.
PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_COMPLETE = "Complete"
PHASE_ABORTED = "Aborted"

#: ``ConfirmState``.
CONFIRM_WAIT = "WaitForConfirm"
CONFIRM_CONFIRMED = "Confirmed"
CONFIRM_REJECTED = "Rejected"
CONFIRM_ABORTED = "Aborted"
CONFIRM_STATES = (CONFIRM_WAIT, CONFIRM_CONFIRMED, CONFIRM_REJECTED, CONFIRM_ABORTED)

#: ``CordonNodeMode``.
CORDON_TAINT = "Taint"
CORDON_LABEL = "Label"

#: ``MigrationPodMode``.
MODE_WAIT_FIRST = "WaitFirst"
MODE_MIGRATE_DIRECTLY = "MigrateDirectly"
#: ``defaultWaitDuration``: how long WaitFirst waits before a pod is migrated anyway, seconds.
DEFAULT_WAIT_DURATION = 3600.0
#: ``defaultMarginTime``: a DrainNode with a ``ttl`` is deleted this long after it expired, seconds.
TTL_MARGIN = 300.0

#: ``PodMigrationPhase``, in the order a migration moves through them.
POD_UNMIGRATABLE = "Unmigratable"
POD_WAITING = "Waiting"
POD_READY = "Ready"
POD_AVAILABLE = "Available"
POD_UNAVAILABLE = "Unavailable"
POD_MIGRATING = "Migrating"
POD_SUCCEED = "Succeed"
POD_FAILED = "Failed"
POD_PHASES = (
    POD_UNMIGRATABLE,
    POD_WAITING,
    POD_READY,
    POD_AVAILABLE,
    POD_UNAVAILABLE,
    POD_MIGRATING,
    POD_SUCCEED,
    POD_FAILED,
)
#: Phases in which the drain can still make progress; none left means Complete.
POD_IN_PROGRESS = (POD_WAITING, POD_READY, POD_AVAILABLE, POD_MIGRATING)

#: ``DrainNodeConditionType``.
COND_ONCE_AVAILABLE = "OnceAvailable"
COND_UNMIGRATABLE_POD_EXISTS = "UnmigratablePodExists"
COND_UNEXPECTED_RESERVATION_EXISTS = "UnexpectedReservationExists"
COND_UNAVAILABLE_RESERVATION_EXISTS = "UnavailableReservationExists"
COND_FAILED_MIGRATION_JOB_EXISTS = "FailedMigrationJobExists"
COND_UNEXPECTED_POD_AFTER_COMPLETE_EXISTS = "UnexpectedPodAfterCompleteExists"

#: JSON field names of the status (upstream's tags, typo included).
STATUS_POD_MIGRATIONS = "pogMigrations"
STATUS_POD_MIGRATION_SUMMARY = "pogMigrationSummary"


def migration_name(drain_node: str, pod_uid: str) -> str:
    """The name of the Reservation and the PodMigrationJob of one pod (``getReservationOrMigrationJobName``:
    the DrainNode's name, ``-``, the pod uid's first 8 characters)."""
    return f"{drain_node}-{pod_uid[:8]}"


def new_drain_node(
    name: str,
    node: str,
    *,
    confirm_state: str = CONFIRM_CONFIRMED,
    mode: str = MODE_MIGRATE_DIRECTLY,
    wait_duration: str | None = None,
    cordon_mode: str | None = None,
    ttl: str | None = None,
) -> dict[str, Any]:
    """A DrainNode object for ``node``.

    Raises:
        ValueError: ``confirm_state``, ``mode`` or ``cordon_mode`` is not one of upstream's values.
    """
    if confirm_state not in CONFIRM_STATES:
        raise ValueError(f"confirmState must be one of {', '.join(CONFIRM_STATES)}, got {confirm_state!r}")
    if mode not in (MODE_WAIT_FIRST, MODE_MIGRATE_DIRECTLY):
        raise ValueError(f"migrationPolicy.mode must be WaitFirst or MigrateDirectly, got {mode!r}")
    if cordon_mode not in (None, CORDON_TAINT, CORDON_LABEL):
        raise ValueError(f"cordonPolicy.mode must be Taint or Label, got {cordon_mode!r}")
    policy: dict[str, Any] = {"mode": mode}
    if wait_duration:
        policy["waitDuration"] = wait_duration
    spec: dict[str, Any] = {"nodeName": node, "confirmState": confirm_state, "migrationPolicy": policy}
    if cordon_mode:
        spec["cordonPolicy"] = {"mode": cordon_mode}
    if ttl:
        spec["ttl"] = ttl
    return {"apiVersion": DRAIN_API_VERSION, "kind": KIND_DRAIN_NODE, "metadata": {"name": name}, "spec": spec}
