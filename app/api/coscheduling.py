"""Gang scheduling's well-known names and the readers of a pod's gang (``apis/extension/coscheduling.go``).

Shared by the Coscheduling plugin (:mod:`app.plugins.coscheduling`) and the ``koord gang`` CLI. Keys
are spelled exactly as upstream:

- a pod joins the gang of a PodGroup (``scheduling.sigs.k8s.io/v1alpha1``) through the label
  ``pod-group.scheduling.sigs.k8s.io: <name>`` (:data:`LABEL_POD_GROUP`), or the deprecated lightweight
  label ``pod-group.scheduling.sigs.k8s.io/name``, or declares a gang with no CR through the pod
  annotation ``gang.scheduling.koordinator.sh/name`` and its siblings;
- PodGroups carry the same ``gang.scheduling.koordinator.sh/*`` annotations for total number, mode,
  match policy and groups;
- PreBind writes ``internal.scheduling.koordinator.sh/bind-gang-group-id`` and ``bind-gang-member-count``
  (and their deprecated ``scheduling.koordinator.sh/`` twins).
"""

from __future__ import annotations

from collections.abc import Mapping

#: ``v1alpha1.PodGroupLabel``: the label naming a pod's PodGroup.
LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
#: Deprecated lightweight-coscheduling labels (kubernetes-sigs/scheduler-plugins).
LABEL_LIGHTWEIGHT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LABEL_LIGHTWEIGHT_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"

PREFIX = "gang.scheduling.koordinator.sh"
ANNOTATION_GANG_NAME = PREFIX + "/name"
ANNOTATION_GANG_MIN_NUM = PREFIX + "/min-available"
ANNOTATION_GANG_WAIT_TIME = PREFIX + "/waiting-time"
ANNOTATION_GANG_TOTAL_NUM = PREFIX + "/total-number"
ANNOTATION_GANG_MODE = PREFIX + "/mode"
ANNOTATION_GANG_GROUPS = PREFIX + "/groups"
ANNOTATION_GANG_MATCH_POLICY = PREFIX + "/match-policy"
#: koordinator-py's: the state of its gang (JSON) the scheduler's leader writes on a member ``/filter``
#: refused while the gang was incomplete, once the gang is complete: the update moves the pod from
#: kube-scheduler's unschedulable queue back to its active queue (upstream's scheduler activates it itself).
ANNOTATION_GANG_STATE = PREFIX + "/gang-state"
#: Alias of the match-policy annotation, read when the first is empty.
ANNOTATION_ALIAS_GANG_MATCH_POLICY = "pod-group.scheduling.sigs.k8s.io/match-policy"

MODE_STRICT = "Strict"
MODE_NON_STRICT = "NonStrict"
MODES = (MODE_STRICT, MODE_NON_STRICT)

MATCH_POLICY_ONLY_WAITING = "only-waiting"
MATCH_POLICY_WAITING_AND_RUNNING = "waiting-and-running"
MATCH_POLICY_ONCE_SATISFIED = "once-satisfied"
MATCH_POLICIES = (MATCH_POLICY_ONLY_WAITING, MATCH_POLICY_WAITING_AND_RUNNING, MATCH_POLICY_ONCE_SATISFIED)

ANNOTATION_BIND_GANG_GROUP_ID = "internal.scheduling.koordinator.sh/bind-gang-group-id"
ANNOTATION_BIND_GANG_MEMBER_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"
DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID = "scheduling.koordinator.sh/bind-gang-group-id"
DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT = "scheduling.koordinator.sh/bind-gang-member-count"

#: PodGroup ``status.phase`` values (scheduler-plugins ``PodGroupPhase``).
PHASE_PENDING = "Pending"
PHASE_PRE_SCHEDULING = "PreScheduling"
PHASE_SCHEDULING = "Scheduling"
PHASE_SCHEDULED = "Scheduled"
PHASE_RUNNING = "Running"
PHASE_FAILED = "Failed"
PHASE_FINISHED = "Finished"


def gang_name(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """The gang a pod belongs to ("" when none): the PodGroup label, else the lightweight name label,
    else the gang-name annotation (upstream ``extension.GetGangName``)."""
    return (
        labels.get(LABEL_POD_GROUP) or labels.get(LABEL_LIGHTWEIGHT_NAME) or annotations.get(ANNOTATION_GANG_NAME) or ""
    )


def gang_id(namespace: str, name: str) -> str:
    """``<namespace>/<name>`` (upstream ``util.GetId``)."""
    return f"{namespace}/{name}"


def gang_group_id(gangs: list[str]) -> str:
    """A gang group's id: its gang ids sorted and joined by ``,`` (upstream ``util.GetGangGroupId``)."""
    return ",".join(sorted(gangs))
