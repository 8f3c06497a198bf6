"""One gang and its gang group, as upstream's gang cache keeps them (``core/gang.go``, ``core/ganggroup.go``).

A :class:`Gang` is initialised either from a PodGroup (:meth:`Gang.init_from_pod_group`, on every
PodGroup event) or, for an annotation-declared gang, from the first of its pods that carries a valid
min-available (:meth:`Gang.init_from_pod`, once). Invalid values get upstream's treatment, logged and
replaced, never raised:

- total number missing, unparsable, 0 or below min ⇒ min;
- mode empty or not ``Strict``/``NonStrict`` ⇒ ``Strict``;
- match policy empty or unknown ⇒ the args' ``defaultMatchPolicy``;
- waiting time (pod annotation, Go duration) missing, unparsable, 0 or negative ⇒ ``defaultTimeout``;
  a PodGroup's ``scheduleTimeoutSeconds`` not > 0 ⇒ ``defaultTimeout``;
- groups not a JSON list of strings ⇒ the gang alone;
- an annotation gang whose min-available is missing or not an int32 stays **uninitialised** (its pods are
  refused ``gang has not init``), as a pod whose PodGroup does not exist (yet).

Bookkeeping per gang, by pod key (``namespace/name``): ``children`` (every pod of the gang), ``pending``
(unbound, not waiting), ``waiting`` (assumed, held at Permit), ``bound``. The group's
``once_resource_satisfied`` turns true the first time a member is bound and never back.

``undecided`` (koordinator-py's) holds the uids of waiting members not yet allowed or rejected, so allowing
or rejecting a whole group touches only those pods once: O(1) amortised per member, never a scan of every
waiting pod (upstream iterates ``IterateOverWaitingPods`` each time).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.api import coscheduling as n
from app.api.timeparse import parse_time
from app.cache.podinfo import PodInfo
from app.framework.duration import parse_duration
from app.plugins.coscheduling.args import CoschedulingArgs

log = logging.getLogger(__name__)

GANG_FROM_POD_GROUP = "GangFromPodGroupCrd"
GANG_FROM_POD_ANNOTATION = "GangFromPodAnnotation"

_INT = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)


def parse_int32(value: str) -> int:
    """Go's ``strconv.ParseInt(value, 10, 32)``.

    Raises:
        ValueError: not a base-10 integer (no spaces, no underscores) or outside int32.
    """
    if not _INT.fullmatch(value):
        raise ValueError(f'strconv.ParseInt: parsing "{value}": invalid syntax')
    number = int(value)
    if not _INT32[0] <= number <= _INT32[1]:
        raise ValueError(f'strconv.ParseInt: parsing "{value}": value out of range')
    return number


def parse_groups(raw: str) -> list[str]:
    """The ``groups`` annotation, a JSON list of gang ids (upstream ``StringToGangGroupSlice``).

    Raises:
        ValueError: not a JSON list of strings.
    """
    if not raw:
        return []
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a JSON list of strings")
    return list(value)


@dataclass(slots=True)
class GangGroupInfo:
    """What the gangs of one group share (upstream ``GangGroupInfo``).

    Attributes:
        group_id: the sorted, comma-joined gang ids.
        group: the gang ids.
        once_resource_satisfied: a member was bound once (irreversible).
        waiting_gang_ids: gangs of the group with members held at Permit.
        binding_members: uids of the waiting pods when the group was allowed (PreBind's member count).
    """

    group_id: str
    group: list[str]
    once_resource_satisfied: bool = False
    waiting_gang_ids: set[str] = field(default_factory=set)
    binding_members: set[str] = field(default_factory=set)

    def add_waiting_gang(self) -> None:
        """Every gang of the group is now waiting (upstream ``AddWaitingGang``)."""
        self.waiting_gang_ids.update(self.group)

    def remove_waiting_gang(self, gang: str) -> None:
        """``gang`` has no waiting member left; with none waiting, the binding members are forgotten."""
        self.waiting_gang_ids.discard(gang)
        if not self.waiting_gang_ids:
            self.binding_members = set()


class Gang:
    """One gang (see the module docstring). ``name`` is its id, ``namespace/name``."""

    def __init__(self, name: str, now: float, args: CoschedulingArgs) -> None:
        self.name = name
        self.wait_time = 0.0
        self.create_time = now
        self.mode = n.MODE_STRICT
        self.match_policy = args.default_match_policy
        self.min_required = 0
        self.total_children = 0
        self.gang_group: list[str] = [name]
        self.group_id = name
        self.group_info: GangGroupInfo | None = None
        self.gang_from = GANG_FROM_POD_ANNOTATION
        self.has_init = False
        self.children: dict[str, PodInfo] = {}
        self.pending: dict[str, PodInfo] = {}
        self.waiting: dict[str, PodInfo] = {}
        self.bound: dict[str, PodInfo] = {}
        #: uid -> when the member started waiting (epoch seconds), for the time left
        self.waiting_since: dict[str, float] = {}
        #: uids of waiting members not yet allowed or rejected
        self.undecided: set[str] = set()
        #: the pending members' requests summed (internal units), kept with ``pending``
        self.pending_requests: dict[str, int] = {}

    def _pend(self, key: str, pod: PodInfo) -> None:
        """Make ``pod`` pending (replacing an older view of it), keeping :attr:`pending_requests`."""
        self._unpend(key)
        self.pending[key] = pod
        for name, value in pod.requests.items():
            self.pending_requests[name] = self.pending_requests.get(name, 0) + value

    def _unpend(self, key: str) -> None:
        """``key`` is no longer pending."""
        pod = self.pending.pop(key, None)
        if pod is not None:
            for name, value in pod.requests.items():
                self.pending_requests[name] = self.pending_requests.get(name, 0) - value

    # ------------------------------------------------------------------ init
    def _common(self, annotations: dict[str, str], args: CoschedulingArgs, what: str) -> None:
        """Total number, mode, match policy and groups, shared by both inits (min_required set first)."""
        raw_total = annotations.get(n.ANNOTATION_GANG_TOTAL_NUM, "")
        total = self.min_required
        if raw_total:
            try:
                total = parse_int32(raw_total)
            except ValueError:
                log.error("%s's annotation totalNumber illegal, gangName: %s, value: %s", what, self.name, raw_total)
                total = self.min_required
        if total == 0:
            total = self.min_required
        elif total < self.min_required:
            log.error(
                "%s's annotation totalNumber cannot less than minRequiredNumber, gangName: %s, totalNumber: %s, "
                "minRequiredNumber: %d",
                what,
                self.name,
                raw_total,
                self.min_required,
            )
            total = self.min_required
        self.total_children = total
        mode = annotations.get(n.ANNOTATION_GANG_MODE) or n.MODE_STRICT
        if mode not in n.MODES:
            log.error("%s's annotation GangModeAnnotation illegal, gangName: %s, value: %s", what, self.name, mode)
            mode = n.MODE_STRICT
        self.mode = mode
        policy = (
            annotations.get(n.ANNOTATION_GANG_MATCH_POLICY)
            or annotations.get(n.ANNOTATION_ALIAS_GANG_MATCH_POLICY)
            or args.default_match_policy
        )
        if policy not in n.MATCH_POLICIES:
            log.error(
                "%s's annotation AnnotationGangMatchPolicy illegal, gangName: %s, value: %s", what, self.name, policy
            )
            policy = args.default_match_policy
        self.match_policy = policy
        try:
            groups = parse_groups(annotations.get(n.ANNOTATION_GANG_GROUPS, ""))
        except ValueError as exc:
            log.error("%s's annotation GangGroupsAnnotation illegal, gangName: %s: %s", what, self.name, exc)
            groups = []
        self.gang_group = groups or [self.name]
        self.group_id = n.gang_group_id(self.gang_group)

    def init_from_pod(self, pod: PodInfo, created: float | None, args: CoschedulingArgs) -> bool:
        """Initialise an annotation gang from one of its pods, once (upstream ``tryInitByPodConfig``).

        Returns True when this call initialised it; False when already initialised or the pod's
        min-available is missing or invalid (the gang stays uninitialised).
        """
        if self.has_init:
            return False
        raw_min = pod.labels.get(n.LABEL_LIGHTWEIGHT_MIN_AVAILABLE, "")
        if not raw_min:
            raw_min = pod.annotations.get(n.ANNOTATION_GANG_MIN_NUM, "")
            if n.ANNOTATION_GANG_MIN_NUM not in pod.annotations:
                log.error("pod's annotation MinRequiredNumber illegal, gangName: %s, value: (missing)", self.name)
                return False
        try:
            self.min_required = parse_int32(raw_min)
        except ValueError:
            log.error("pod's annotation MinRequiredNumber illegal, gangName: %s, value: %s", self.name, raw_min)
            return False
        self._common(pod.annotations, args, "pod")
        if created is not None:
            self.create_time = created
        raw_wait = pod.annotations.get(n.ANNOTATION_GANG_WAIT_TIME, "")
        wait = 0.0
        if raw_wait:
            try:
                wait = parse_duration(raw_wait)
            except ValueError:
                log.error(
                    "pod's annotation GangWaitTimeAnnotation illegal, gangName: %s, value: %s", self.name, raw_wait
                )
                wait = args.default_timeout
        if wait <= 0:
            wait = args.default_timeout
        self.wait_time = wait
        self.gang_from = GANG_FROM_POD_ANNOTATION
        self.has_init = True
        return True

    def init_from_pod_group(self, spec: PodGroupSpec, args: CoschedulingArgs) -> None:
        """(Re-)initialise from a PodGroup (upstream ``tryInitByPodGroup``, on add and every update)."""
        self.min_required = spec.min_member
        self._common(spec.annotations, args, "podGroup")
        if spec.created is not None:
            self.create_time = spec.created
        timeout = spec.schedule_timeout_seconds
        if timeout is not None and timeout <= 0:
            log.error("podGroup's ScheduleTimeoutSeconds illegal, podGroupName: %s", self.name)
        self.wait_time = float(timeout) if timeout is not None and timeout > 0 else args.default_timeout
        self.gang_from = GANG_FROM_POD_GROUP
        self.has_init = True

    # ------------------------------------------------------------------ membership
    @property
    def once_satisfied(self) -> bool:
        """The group's irreversible once-resource-satisfied flag."""
        return self.group_info is not None and self.group_info.once_resource_satisfied

    def set_child(self, pod: PodInfo) -> None:
        """Record (or refresh) a member; an unbound one not waiting is pending (upstream ``setChild``)."""
        key = pod.key
        self.children[key] = pod
        if not pod.node_name and key not in self.waiting:
            self._pend(key, pod)

    def add_assumed(self, pod: PodInfo) -> None:
        """The member reached Permit: waiting, no longer pending (upstream ``addAssumedPod``)."""
        self.waiting.setdefault(pod.key, pod)
        self._unpend(pod.key)

    def del_assumed(self, pod: PodInfo) -> None:
        """The member left Permit unbound: pending again (upstream ``delAssumedPod``)."""
        key = pod.key
        self.undecided.discard(pod.uid)
        self.waiting_since.pop(pod.uid, None)
        if self.waiting.pop(key, None) is None:
            return
        child = self.children.get(key)
        if child is not None:
            self._pend(key, child)
        if not self.waiting and self.group_info is not None:
            self.group_info.remove_waiting_gang(self.name)

    def add_bound(self, pod: PodInfo) -> None:
        """The member is bound; the group is once resource satisfied from now on (upstream ``addBoundPod``)."""
        key = pod.key
        self.undecided.discard(pod.uid)
        self.waiting_since.pop(pod.uid, None)
        self.waiting.pop(key, None)
        self._unpend(key)
        self.bound[key] = pod
        if self.group_info is not None:
            if not self.waiting:
                self.group_info.remove_waiting_gang(self.name)
            self.group_info.once_resource_satisfied = True

    def delete_pod(self, pod: PodInfo) -> bool:
        """Forget a deleted member; True when an annotation gang has no member left (upstream ``deletePod``)."""
        key = pod.key
        self.children.pop(key, None)
        self._unpend(key)
        self.undecided.discard(pod.uid)
        self.waiting_since.pop(pod.uid, None)
        if self.waiting.pop(key, None) is not None and not self.waiting and self.group_info is not None:
            self.group_info.remove_waiting_gang(self.name)
        self.bound.pop(key, None)
        return self.gang_from == GANG_FROM_POD_ANNOTATION and not self.children

    def valid_for_permit(self) -> bool:
        """Whether this gang satisfies its match policy at Permit (upstream ``isGangValidForPermit``)."""
        if not self.has_init:
            return False
        if self.match_policy == n.MATCH_POLICY_ONLY_WAITING:
            return len(self.waiting) >= self.min_required
        if self.match_policy == n.MATCH_POLICY_WAITING_AND_RUNNING:
            return len(self.waiting) + len(self.bound) >= self.min_required
        return len(self.waiting) >= self.min_required or self.once_satisfied


@dataclass(frozen=True, slots=True)
class PodGroupSpec:
    """What a gang reads from a PodGroup object.

    Attributes:
        min_member: ``spec.minMember`` (0 when absent).
        schedule_timeout_seconds: ``spec.scheduleTimeoutSeconds`` or None.
        annotations: ``metadata.annotations``.
        created: ``metadata.creationTimestamp`` as epoch seconds, or None.
    """

    min_member: int
    schedule_timeout_seconds: int | None
    annotations: dict[str, str]
    created: float | None


def parse_pod_group(obj: dict[str, Any]) -> PodGroupSpec:
    """The gang-relevant fields of a PodGroup (JSON-shaped dict).

    Raises:
        ValueError: a field does not have its API type (``spec.minMember`` not an int32, ...): the
            object is one upstream's informer could not decode, so the gang ignores it.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        raise ValueError("metadata and spec must be objects")
    min_member = spec.get("minMember", 0)
    if isinstance(min_member, bool) or not isinstance(min_member, int) or not _INT32[0] <= min_member <= _INT32[1]:
        raise ValueError(f"spec.minMember: expected an int32, got {min_member!r}")
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
        raise ValueError(f"spec.scheduleTimeoutSeconds: expected an integer, got {timeout!r}")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        raise ValueError("metadata.annotations: expected a map of strings")
    created = None
    if meta.get("creationTimestamp"):
        try:
            created = parse_time(meta["creationTimestamp"])
        except ValueError as exc:
            raise ValueError(f"metadata.creationTimestamp: {exc}") from None
    return PodGroupSpec(min_member, timeout, dict(annotations), created)
