"""The PodGroup status controller (upstream ``pkg/scheduler/plugins/coscheduling/controller/podgroup.go``).

For every PodGroup whose gang changed (:attr:`~app.plugins.coscheduling.cache.GangCache.dirty`), and
that is not Finished or Failed (upstream never requeues those), the phase moves as upstream's
``syncHandler`` moves it, one step per sync, repeated here until it stands still (upstream gets there
through the update events its own patches cause):

- ``""`` ⇒ ``Pending``;
- ``Pending`` ⇒ ``PreScheduling`` once the gang has at least ``minMember`` (> 0) pods (``occupiedBy`` is
  set from the first pod's owners, ``<ns>/<owner>`` sorted and joined by ``,``);
- otherwise, with no pod ⇒ ``Pending``; else the counts ``running``, ``succeeded``, ``failed`` (pod
  phases) and ``scheduled`` (bound members in the gang cache) are written and the phase is
  ``Scheduling`` while scheduled < minMember (``scheduleStartTime`` set once), else ``Scheduled``;
  ``Running`` when Scheduled and running + succeeded >= minMember; ``Failed`` when any failed and
  failed + running + succeeded >= minMember; ``Finished`` when succeeded >= minMember.

The write is one JSON merge patch of the PodGroup (the CRD has no status subresource), holding only
the status fields that changed, zero counts removed (``omitempty``) — the merge-patch status write the
ElasticQuota status writer uses. It runs on the leader only.
"""

from __future__ import annotations

import logging
from typing import Any

from app.api import coscheduling as n
from app.api.timeparse import format_time
from app.client.errors import ApiError
from app.framework.handle import Handle
from app.plugins.coscheduling.cache import GangCache

log = logging.getLogger(__name__)

#: Seconds between two status rounds (upstream's workers run ``wait.Until(worker, time.Second)``).
STATUS_SYNC_INTERVAL = 1.0
_FINAL = (n.PHASE_FINISHED, n.PHASE_FAILED)
_COUNTS = ("scheduled", "running", "succeeded", "failed")


def step(
    status: dict[str, Any], min_member: int, pods: list[dict[str, Any]], scheduled: int, now: float
) -> dict[str, Any]:
    """One upstream sync of a PodGroup's status: the new status (a copy; see the module docstring).

    Args:
        status: the current ``status`` (phase, counts, ``occupiedBy``, ``scheduleStartTime``).
        min_member: ``spec.minMember``.
        pods: the gang's pods (v1 Pod objects).
        scheduled: bound members in the gang cache.
        now: epoch seconds, for ``scheduleStartTime``.
    """
    out = dict(status)
    phase = out.get("phase") or ""
    if phase == "":
        out["phase"] = n.PHASE_PENDING
        return out
    if phase == n.PHASE_PENDING:
        if pods and len(pods) >= min_member and min_member > 0:
            out["phase"] = n.PHASE_PRE_SCHEDULING
            owners = (pods[0].get("metadata") or {}).get("ownerReferences") or []
            ns = (pods[0].get("metadata") or {}).get("namespace") or "default"
            refs = sorted(f"{ns}/{o.get('name', '')}" for o in owners if isinstance(o, dict))
            if refs:
                out["occupiedBy"] = ",".join(refs)
        return out
    if not pods:
        out["phase"] = n.PHASE_PENDING
        return out
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    running, succeeded, failed = phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")
    out.update(running=running, succeeded=succeeded, failed=failed, scheduled=scheduled)
    if scheduled < min_member:
        out["phase"] = n.PHASE_SCHEDULING
        if not out.get("scheduleStartTime"):
            out["scheduleStartTime"] = format_time(now)
    else:
        out["phase"] = n.PHASE_SCHEDULED
    if succeeded + running >= min_member and out["phase"] == n.PHASE_SCHEDULED:
        out["phase"] = n.PHASE_RUNNING
    if failed and failed + running + succeeded >= min_member:
        out["phase"] = n.PHASE_FAILED
    if succeeded >= min_member:
        out["phase"] = n.PHASE_FINISHED
    return out


def settle(
    status: dict[str, Any], min_member: int, pods: list[dict[str, Any]], scheduled: int, now: float
) -> dict[str, Any]:
    """:func:`step` repeated until the status stands still (at most 5 steps), zero counts dropped."""
    current = {k: v for k, v in status.items() if not (k in _COUNTS and not v)}
    for _ in range(5):
        new = step(current, min_member, pods, scheduled, now)
        new = {k: v for k, v in new.items() if not (k in _COUNTS and not v)}
        if new == current:
            break
        current = new
    return current


def status_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch from status ``old`` to ``new`` (``{"status": {...}}``, removed keys as null); None if equal."""
    changed: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    changed.update({k: None for k in old if k not in new})
    return {"status": changed} if changed else None


class StatusController:
    """Upstream's PodGroup controller over one gang cache: :meth:`sync_once` is one round.

    Args:
        cache: the gang cache (its ``dirty`` set says which PodGroups to look at).
        handle: for the PodGroup and Pod objects, the clock and the client writing the patches.
    """

    def __init__(self, cache: GangCache, handle: Handle) -> None:
        self.cache = cache
        self.handle = handle

    async def sync_once(self) -> int:
        """One round over the changed PodGroups; returns the patches sent. A refused patch is logged and
        retried next round."""
        dirty, self.cache.dirty = self.cache.dirty, set()
        snapshot = self.handle.snapshot
        groups = snapshot.objects("PodGroup")
        sent = 0
        for gang_id in sorted(dirty):
            obj = groups.get(gang_id)
            if obj is None:
                continue
            status = obj.get("status") or {}
            if not isinstance(status, dict) or status.get("phase") in _FINAL:
                continue
            spec = obj.get("spec") or {}
            min_member = spec.get("minMember", 0) if isinstance(spec, dict) else 0
            if isinstance(min_member, bool) or not isinstance(min_member, int):
                continue  # not a PodGroup the gang cache accepted
            gang = self.cache.get(gang_id)
            pods: list[dict[str, Any]] = []
            scheduled = 0
            if gang is not None:
                scheduled = len(gang.bound)
                for _, child in sorted(gang.children.items()):
                    pod_obj = snapshot.pod_object(child.uid)
                    if pod_obj is not None:
                        pods.append(pod_obj)
            new = settle(status, min_member, pods, scheduled, self.handle.now())
            patch = status_patch(status, new)
            if patch is None:
                continue
            namespace, _, name = gang_id.partition("/")
            try:
                await self.handle.client.patch("PodGroup", name, patch, namespace=namespace)
                sent += 1
            except ApiError as exc:
                log.warning("PodGroup %s: status patch failed: %s", gang_id, exc)
                self.cache.dirty.add(gang_id)
        return sent
