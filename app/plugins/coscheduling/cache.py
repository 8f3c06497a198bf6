"""The gang cache: every gang and gang group, kept in step with Pod and PodGroup events.

Mirrors upstream ``core/gang_cache.go`` (``onPodAdd``/``onPodUpdate``/``onPodDelete``,
``onPodGroupAdd``/``Update``/``Delete``):

- a pod naming a gang creates the gang if needed; a pod without the PodGroup label initialises an
  annotation gang (once) and its group; the pod becomes a child, pending while unbound;
- a bound pod is a bound child and marks its group once resource satisfied (also when the pod was seen
  before its PodGroup: the group is marked when the PodGroup attaches it, as upstream's PodGroups-first
  sync would have); an update of a terminated pod is ignored (it stays a child, as upstream);
- a deleted pod leaves the gang; an annotation gang without children is dropped, and its group when
  none of the group's gangs is left;
- a PodGroup (re-)initialises its gang on every add/update; its deletion drops the gang (its pods then
  find no gang) and the group when none of its gangs is left.

Unlike upstream's informer, the snapshot cache also reports pods *assumed* by a binding cycle of this
service (``node_name`` set before the Binding is written): such a pod is not bound yet, so while its
binding is in flight (:meth:`~app.framework.handle.SnapshotLister.in_flight`) it is only refreshed, and
PostBind records it bound. A forgotten assumption (the pod pending again) is pending again here.

Every change marks the gang in :attr:`GangCache.dirty` for the PodGroup status controller. Costs: O(1) per
pod event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from app.api import coscheduling as n
from app.api.timeparse import parse_time
from app.cache.listener import CacheListener
from app.cache.podinfo import PodInfo
from app.framework.handle import SnapshotLister
from app.plugins.coscheduling.args import CoschedulingArgs
from app.plugins.coscheduling.gang import Gang, GangGroupInfo, parse_pod_group

log = logging.getLogger(__name__)


class GangCache(CacheListener):
    """Gangs by id and gang groups by group id (see the module docstring).

    Args:
        args: the plugin's args (defaults for invalid gang values).
        snapshot: the cache's read-only view (pod objects, in-flight bindings).
        clock: epoch seconds now.
    """

    def __init__(self, args: CoschedulingArgs, snapshot: SnapshotLister, clock: Callable[[], float]) -> None:
        self.args = args
        self.snapshot = snapshot
        self.clock = clock
        self.gangs: dict[str, Gang] = {}
        self.groups: dict[str, GangGroupInfo] = {}
        #: gang ids changed since the status controller last looked
        self.dirty: set[str] = set()

    # ------------------------------------------------------------------ lookups
    def get(self, gang_id: str) -> Gang | None:
        """The gang ``namespace/name``, or None."""
        return self.gangs.get(gang_id)

    def gang_of(self, pod: PodInfo) -> Gang | None:
        """The gang ``pod`` names, or None (also when it names none)."""
        name = n.gang_name(pod.labels, pod.annotations)
        return self.gangs.get(n.gang_id(pod.namespace, name)) if name else None

    def group_gangs(self, gang: Gang) -> list[Gang]:
        """The existing gangs of ``gang``'s group, in the group's order."""
        return [g for g in (self.gangs.get(i) for i in gang.gang_group) if g is not None]

    # ------------------------------------------------------------------ internals
    def _gang(self, gang_id: str) -> Gang:
        gang = self.gangs.get(gang_id)
        if gang is None:
            gang = self.gangs[gang_id] = Gang(gang_id, self.clock(), self.args)
        return gang

    def _attach_group(self, gang: Gang) -> None:
        """Give ``gang`` its group's shared info once (upstream ``SetGangGroupInfo`` keeps the first).

        A gang that already holds bound members (a PodGroup gang whose pods were seen before its
        PodGroup) marks the group once resource satisfied now: upstream syncs every PodGroup before
        the first Pod (``core.go``'s ``ForceSyncFromInformer`` order), so its ``addBoundPod`` always
        finds the group; here Pods are listed before PodGroups, and a PodGroup may also be created
        after its running pods."""
        if gang.group_info is not None:
            return
        info = self.groups.get(gang.group_id)
        if info is None:
            info = self.groups[gang.group_id] = GangGroupInfo(gang.group_id, list(gang.gang_group))
        gang.group_info = info
        if gang.bound:
            info.once_resource_satisfied = True

    def _drop(self, gang: Gang) -> None:
        """Forget ``gang``; its group too when none of the group's gangs is left."""
        self.gangs.pop(gang.name, None)
        if all(i not in self.gangs for i in gang.gang_group) and gang.group_info is not None:
            self.groups.pop(gang.group_info.group_id, None)

    def _created(self, uid: str) -> float | None:
        obj = self.snapshot.pod_object(uid) or {}
        stamp = (obj.get("metadata") or {}).get("creationTimestamp")
        try:
            return parse_time(stamp) if stamp else None
        except ValueError:
            return None

    # ------------------------------------------------------------------ events
    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Keep the gang bookkeeping of the pod (see the module docstring)."""
        if new is None:
            if old is not None:
                self._pod_deleted(old)
            return
        name = n.gang_name(new.labels, new.annotations)
        if not name:
            return
        gid = n.gang_id(new.namespace, name)
        self.dirty.add(gid)  # a phase change is news for the PodGroup status even when ignored below
        if old is not None and new.terminated:
            return
        gang = self._gang(gid)
        if not new.labels.get(n.LABEL_POD_GROUP):
            if not gang.has_init:
                gang.init_from_pod(new, self._created(new.uid), self.args)
            self._attach_group(gang)
        key = new.key
        if new.node_name and self.snapshot.in_flight(new.uid):
            gang.children[key] = new  # assumed by a binding cycle: Permit / PostBind move it on
            return
        if not new.node_name and key in gang.bound:
            del gang.bound[key]  # an unconfirmed assumption expired: pending again
        gang.set_child(new)
        if new.node_name:
            gang.add_bound(new)

    def _pod_deleted(self, pod: PodInfo) -> None:
        gang = self.gang_of(pod)
        if gang is None:
            return
        self.dirty.add(gang.name)
        if gang.delete_pod(pod):
            self._drop(gang)

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """(Re-)initialise or drop the gang of a PodGroup."""
        if kind != "PodGroup":
            return
        self.dirty.add(key)
        if obj is None:
            gang = self.gangs.get(key)
            if gang is not None:
                if gang.group_info is not None:
                    gang.group_info.remove_waiting_gang(gang.name)
                self._drop(gang)
            return
        try:
            spec = parse_pod_group(obj)
        except ValueError as exc:
            log.warning("PodGroup %s ignored: %s", key, exc)
            return
        gang = self._gang(key)
        gang.init_from_pod_group(spec, self.args)
        self._attach_group(gang)
