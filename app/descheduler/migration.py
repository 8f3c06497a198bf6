"""PodMigrationJob controller (``scheduling.koordinator.sh/v1alpha1``), after
``pkg/descheduler/controllers/migration/controller.go`` and its arbitrator.

One :meth:`MigrationController.reconcile` pass moves every unfinished job one step:

- TTL (``spec.ttl``, default ``defaultJobTTL``) passed since the job's creation ⇒ ``Failed`` / ``Timeout``
  (the job's Reservation is deleted).
- ``Pending``: the pod (``spec.podRef``) must exist (else ``Failed`` / ``MissingPod``); arbitration
  keeps the job Pending while ``maxMigratingPerNode`` / ``maxMigratingPerNamespace`` /
  ``maxMigratingPerWorkload`` running jobs already exist, or the workload already has
  ``maxUnavailablePerWorkload`` pods migrating or not Running and Ready; otherwise ``Running``.
- ``EvictDirectly``: evict the pod (Eviction API; a 429 keeps the job Running and is retried next pass,
  never turned into a delete) ⇒ ``Succeeded`` / ``EvictComplete``.
- ``ReservationFirst``: create a Reservation named after the job's uid from the pod's spec (nodeName
  cleared), owners = the pod's controller, ``allocateOnce``, ``ttl`` = the job's, labels
  ``scheduling.koordinator.sh/reservation-order`` = now in ms and upstream's
  ``app.kubernetes.io/created-by: koord-descheduler``, annotation
  ``scheduling.koordinator.sh/pod-migration-job`` = the job's name, required node affinity
  ``metadata.name NotIn [current node]``; wait until it is ``Available`` (``Failed``/expired ⇒
  ``Failed`` / ``ReservationExpired``); when another pod already holds it, do not evict: ``Failed`` /
  ``ForbiddenMigratePod`` ("Reservation is already bound by another Pod", upstream's
  ``abortJobIfReservationBoundByAnotherPod``); else evict the pod; wait for a pod bound to the reservation
  (``reservation-allocated`` names its uid, else ``status.currentOwners``; ``WaitForPodBindReservation``) and
  Ready (``WaitForBoundPodReady``) ⇒ ``Succeeded`` with ``status.podRef`` = the new pod.
- Replacements that race (issue 45): when several evicted pods of one workload are replaced at once, a
  replacement may bind into another job's Reservation (that job then succeeds with it: any owner counts, as
  upstream's ``GetBoundPod``) or onto free capacity when the Reservation it was scored for was taken first.
  A job whose Reservation is still unowned once no pod of its owners is pending, while a pod of its owners
  created since the eviction runs outside every Reservation and is no other job's new pod, ends in that
  pass with that pod as ``status.podRef``: ``Succeeded`` when it runs on another node than the evicted pod,
  else ``Failed`` / ``ForbiddenMigratePod``; its Reservation is deleted at once (upstream waits for the TTL).

Status writes are merge patches on the status subresource; times are epoch seconds.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from app.api.reservation import (
    ANNOTATION_POD_MIGRATION_JOB,
    LABEL_CREATED_BY,
    MIGRATION_CREATOR,
    PHASE_AVAILABLE,
    allocated_ref,
)
from app.api.timeparse import format_time, parse_time
from app.cache.snapshot import ClusterCache
from app.client.errors import ApiError, NotFound
from app.descheduler.config import MigrationControllerArgs
from app.descheduler.evictor import PodEvictor
from app.framework.duration import parse_duration
from app.sources.base import ClusterClient

log = logging.getLogger("koord.descheduler.migration")

PMJ_API_VERSION = "scheduling.koordinator.sh/v1alpha1"
LABEL_RESERVATION_ORDER = "scheduling.koordinator.sh/reservation-order"
TERMINAL = ("Succeeded", "Failed", "Aborted")


def new_job(pod: dict[str, Any], name: str, mode: str, ttl: float, reason: str) -> dict[str, Any]:
    """A PodMigrationJob for ``pod`` (what the MigrationController evictor creates for each LowNodeLoad
    victim); ``ttl`` in seconds."""
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": PMJ_API_VERSION,
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "annotations": {"scheduling.koordinator.sh/eviction-reason": reason}},
        "spec": {
            "mode": mode,
            "ttl": f"{int(ttl)}s",
            "podRef": {
                "namespace": meta.get("namespace") or "default",
                "name": meta.get("name"),
                "uid": meta.get("uid", ""),
            },
        },
        "status": {"phase": "Pending"},
    }


def _controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def reservation_for(job: dict[str, Any], pod: dict[str, Any], ttl: float, now: float) -> dict[str, Any]:
    """The Reservation of a ReservationFirst job (see the module docstring)."""
    meta = pod.get("metadata") or {}
    spec = dict(pod.get("spec") or {})
    node = spec.pop("nodeName", "")
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    not_here = {"key": "metadata.name", "operator": "NotIn", "values": [node]} if node else None
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)] or [{}]
    if not_here is not None:
        for term in terms:
            term["matchFields"] = [*(term.get("matchFields") or []), not_here]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity
    controller = _controller_of(pod)
    namespace = meta.get("namespace") or "default"
    if controller is not None:
        owner = {
            "controller": {
                **{k: controller.get(k) for k in ("apiVersion", "kind", "name", "uid")},
                "controller": True,
                "namespace": namespace,
            }
        }
    else:
        owner = {"object": {"namespace": namespace, "name": meta.get("name"), "uid": meta.get("uid", "")}}
    return {
        "apiVersion": PMJ_API_VERSION,
        "kind": "Reservation",
        "metadata": {
            "name": (job.get("metadata") or {}).get("uid") or (job.get("metadata") or {}).get("name"),
            "labels": {LABEL_RESERVATION_ORDER: str(int(now * 1000)), LABEL_CREATED_BY: MIGRATION_CREATOR},
            "annotations": {ANNOTATION_POD_MIGRATION_JOB: job["metadata"]["name"]},
        },
        "spec": {
            "template": {
                "metadata": {"namespace": namespace, "labels": dict(meta.get("labels") or {})},
                "spec": spec,
            },
            "owners": [owner],
            "allocateOnce": True,
            "ttl": f"{int(ttl)}s",
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _owned(pod: dict[str, Any], owners: list[dict[str, Any]]) -> bool:
    """Whether ``pod`` matches one of the owners :func:`reservation_for` writes: its controller (uid, else
    name and kind, and namespace) or the pod itself (uid, else namespace and name). Other owner shapes (a
    Reservation not made by this controller) match nothing here."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    controller = _controller_of(pod) or {}
    for owner in owners:
        ctl = owner.get("controller")
        if isinstance(ctl, dict) and controller:
            if (ctl.get("namespace") or namespace) != namespace:
                continue
            if ctl.get("uid") and ctl.get("uid") == controller.get("uid"):
                return True
            if not ctl.get("uid") and (ctl.get("kind"), ctl.get("name")) == (
                controller.get("kind"),
                controller.get("name"),
            ):
                return True
        obj = owner.get("object")
        if not isinstance(obj, dict) or (obj.get("namespace") or "default") != namespace:
            continue
        if obj.get("uid") == meta.get("uid") if obj.get("uid") else obj.get("name") == meta.get("name"):
            return True
    return False


def _created(obj: dict[str, Any]) -> float | None:
    """``metadata.creationTimestamp`` in epoch seconds, or None when absent or malformed."""
    raw = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        return parse_time(raw) if raw else None
    except ValueError:
        return None


def _evicted_at(job: dict[str, Any]) -> float | None:
    """When the job's eviction completed (its ``Eviction`` condition's transition time, whole seconds as
    metav1.Time keeps them), else the job's creation; None when neither parses."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Eviction" and cond.get("lastTransitionTime"):
            try:
                return parse_time(cond["lastTransitionTime"])
            except ValueError:
                break
    return _created(job)


class MigrationController:
    """Reconciles PodMigrationJobs held in ``cache`` and writes through ``client``.

    Args:
        cache: the cluster cache (PodMigrationJob, Reservation and Pod objects).
        client: the source (status patches, Reservation create/delete, evictions).
        args: MigrationControllerArgs (limits, default mode and TTL, dryRun).
        evictor: the pod evictor (one attempt per pass: a 429 retries on the next pass).
        clock: epoch seconds.
    """

    def __init__(
        self,
        cache: ClusterCache,
        client: ClusterClient,
        args: MigrationControllerArgs,
        evictor: PodEvictor | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache, self.client, self.args, self.clock = cache, client, args, clock
        self.evictor = evictor or PodEvictor(client, attempts=1)
        #: uids of pods named as some job's new pod, rebuilt at each :meth:`reconcile`.
        self._claimed: set[str] = set()

    # ---------------------------------------------------------------------------------- helpers
    def _jobs(self) -> list[dict[str, Any]]:
        return sorted(self.cache.objects.get("PodMigrationJob", {}).values(), key=lambda j: j["metadata"]["name"])

    def _pod(self, ref: dict[str, Any]) -> dict[str, Any] | None:
        info = self.cache.find_pod(
            uid=str(ref.get("uid") or ""), namespace=ref.get("namespace", ""), name=ref.get("name", "")
        )
        if info is None or info.uid not in self.cache.pod_objects:
            return None
        if ref.get("uid") and info.uid != ref.get("uid"):
            return None
        return self.cache.pod_objects[info.uid]

    async def _status(self, job: dict[str, Any], **fields: Any) -> None:
        status = {k: v for k, v in fields.items() if k != "condition"}
        if "condition" in fields:
            cond = {"status": "True", "lastTransitionTime": format_time(self.clock()), **fields["condition"]}
            old = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("type") != cond["type"]]
            status["conditions"] = [*old, cond]
        job.setdefault("status", {}).update(status)
        await self.client.patch("PodMigrationJob", job["metadata"]["name"], {"status": status}, subresource="status")

    async def _fail(self, job: dict[str, Any], reason: str, message: str) -> None:
        await self._drop_reservation(job)
        await self._status(job, phase="Failed", reason=reason, message=message)

    async def _drop_reservation(self, job: dict[str, Any]) -> None:
        ref = ((job.get("spec") or {}).get("reservationOptions") or {}).get("reservationRef") or {}
        name = ref.get("name")
        if not name or (job.get("status") or {}).get("phase") == "Succeeded":
            return
        with contextlib.suppress(NotFound):
            await self.client.delete("Reservation", name)

    def _running_counts(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        nodes: dict[str, int] = {}
        namespaces: dict[str, int] = {}
        workloads: dict[str, int] = {}
        for job in self._jobs():
            if (job.get("status") or {}).get("phase") != "Running":
                continue
            ref = (job.get("spec") or {}).get("podRef") or {}
            node = (job.get("status") or {}).get("nodeName") or ""
            nodes[node] = nodes.get(node, 0) + 1
            ns = ref.get("namespace") or "default"
            namespaces[ns] = namespaces.get(ns, 0) + 1
            pod = self._pod(ref)
            ctl = _controller_of(pod) if pod else None
            if ctl is not None:
                workloads[str(ctl.get("uid"))] = workloads.get(str(ctl.get("uid")), 0) + 1
        return nodes, namespaces, workloads

    def _unavailable(self, workload_uid: str) -> int:
        """Pods of the workload (controller uid) that are not Running and Ready."""
        count = 0
        for uid, info in self.cache.pods.items():
            if not any(ref.get("uid") == workload_uid and ref.get("controller") for ref in info.owner_references):
                continue
            if info.phase != "Running" or uid not in self.cache.pod_objects or not _ready(self.cache.pod_objects[uid]):
                count += 1
        return count

    def arbitration(self, pod: dict[str, Any]) -> str | None:
        """Why a job for ``pod`` must stay Pending (a migration limit is reached), or None."""
        nodes, namespaces, workloads = self._running_counts()
        a = self.args
        node = (pod.get("spec") or {}).get("nodeName") or ""
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        if a.max_migrating_per_node and nodes.get(node, 0) >= a.max_migrating_per_node:
            return f"node {node} has {nodes[node]} migrating pods (maxMigratingPerNode {a.max_migrating_per_node})"
        if a.max_migrating_per_namespace and namespaces.get(ns, 0) >= a.max_migrating_per_namespace:
            return f"namespace {ns} has {namespaces[ns]} migrating pods (maxMigratingPerNamespace)"
        ctl = _controller_of(pod)
        workload_uid = str(ctl.get("uid")) if ctl is not None else ""
        migrating = workloads.get(workload_uid, 0)
        if a.max_migrating_per_workload and ctl is not None and migrating >= a.max_migrating_per_workload:
            return f"workload {ctl.get('name')} has {migrating} migrating pods (maxMigratingPerWorkload)"
        if a.max_unavailable_per_workload and ctl is not None:
            unavailable = migrating + self._unavailable(workload_uid)
            if unavailable >= a.max_unavailable_per_workload:
                return f"workload {ctl.get('name')} has {unavailable} unavailable pods (maxUnavailablePerWorkload)"
        return None

    # -------------------------------------------------------------------------------- reconcile
    async def reconcile(self) -> None:
        """Move every unfinished job one step; an API failure on one job is logged and retried next pass."""
        #: pods already named as a job's new pod (``status.podRef``): no second job takes one as its replacement
        self._claimed = {
            str(((j.get("status") or {}).get("podRef") or {}).get("uid") or "")
            for j in self._jobs()
            if (j.get("status") or {}).get("phase") in TERMINAL
        } - {""}
        for job in self._jobs():
            phase = (job.get("status") or {}).get("phase") or "Pending"
            if phase in TERMINAL or (job.get("spec") or {}).get("paused"):
                continue
            try:
                await self._step(job, phase)
            except ApiError as exc:
                log.warning("PodMigrationJob %s: %s (retrying)", job["metadata"]["name"], exc)

    async def _step(self, job: dict[str, Any], phase: str) -> None:
        spec = job.get("spec") or {}
        now = self.clock()
        try:
            ttl = parse_duration(spec["ttl"]) if spec.get("ttl") else self.args.default_job_ttl
            created = parse_time((job.get("metadata") or {}).get("creationTimestamp") or format_time(now))
        except ValueError as exc:
            await self._fail(job, "Invalid", str(exc))
            return
        if ttl > 0 and now - created > ttl:
            await self._fail(job, "Timeout", f"the job exceeded its TTL {int(ttl)}s")
            return
        ref = spec.get("podRef") or {}
        pod = self._pod(ref)
        status = job.get("status") or {}
        evicted = any(
            c.get("type") == "Eviction" and c.get("reason") == "EvictComplete" for c in status.get("conditions") or []
        )
        if phase == "Pending":
            if pod is None:
                await self._fail(job, "MissingPod", f"pod {ref.get('namespace')}/{ref.get('name')} not found")
                return
            why = self.arbitration(pod)
            if why is not None:
                if status.get("message") != why:
                    await self._status(job, phase="Pending", message=why)
                return
            await self._status(job, phase="Running", nodeName=(pod.get("spec") or {}).get("nodeName") or "")
        mode = spec.get("mode") or self.args.default_job_mode
        if self.args.dry_run:
            return
        if mode == "EvictDirectly":
            if pod is not None and not evicted and not await self._evict(job, pod):
                return
            await self._status(job, phase="Succeeded", reason="EvictComplete", message="pod evicted")
            return
        await self._reservation_first(job, pod, ttl, now, evicted)

    async def _evict(self, job: dict[str, Any], pod: dict[str, Any]) -> bool:
        meta = pod["metadata"]
        reason = (job["metadata"].get("annotations") or {}).get(
            "scheduling.koordinator.sh/eviction-reason", "migration"
        )
        outcome = await self.evictor.evict(
            meta.get("namespace") or "default", meta["name"], meta.get("uid", ""), reason
        )
        if not outcome.evicted:
            await self._status(job, reason="Evicting", message=outcome.error)
            return False
        await self._status(job, condition={"type": "Eviction", "reason": "EvictComplete"})
        return True

    def _bound_pod(self, reservation: dict[str, Any], ruid: str) -> dict[str, Any] | None:
        """The pod bound to the Reservation (upstream ``GetBoundPod``): one whose ``reservation-allocated``
        names its uid, else the first of ``status.currentOwners`` the cache holds; None when it has none."""
        for uid, info in self.cache.pods.items():
            allocated = allocated_ref(info.annotations)
            if allocated is not None and ruid and allocated[1] == ruid and uid in self.cache.pod_objects:
                return self.cache.pod_objects[uid]
        for owner in (reservation.get("status") or {}).get("currentOwners") or []:
            if isinstance(owner, dict) and (found := self._pod(owner)) is not None:
                return found
        return None

    async def _bound_elsewhere(self, job: dict[str, Any], reservation: dict[str, Any], rname: str) -> bool:
        """End a job whose evicted pod's replacement was bound outside its Reservation (koordinator-py; upstream
        waits for the TTL). Returns whether the job ended.

        That is so when the Reservation is still unowned after the eviction, no pod of its owners is pending
        (none is left to take it), and a pod of its owners created since the eviction is bound without a
        Reservation and is no other job's new pod: replacements raced (one bound into another job's
        Reservation, or onto free capacity when the Reservation it was scored for was taken first, issue 45).
        The replacement becomes ``status.podRef`` (one per job, a pod off the job's node first); the job is
        ``Succeeded`` when it runs on another node than the evicted pod did, else ``Failed`` with upstream's
        ``ForbiddenMigratePod``; the unused Reservation is deleted at once, not left holding capacity until
        it expires.
        """
        owners = [o for o in (reservation.get("spec") or {}).get("owners") or [] if isinstance(o, dict)]
        if not owners:
            return False
        since = _evicted_at(job)
        candidates: list[tuple[int, str, dict[str, Any]]] = []
        source_node = (job.get("status") or {}).get("nodeName") or ""
        for uid, info in self.cache.pods.items():
            obj = self.cache.pod_objects.get(uid) if uid in self.cache.pod_objects else None
            if obj is None or not _owned(obj, owners) or info.terminated:
                continue
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if not info.node_name:
                return False  # a pending replacement may still take the Reservation
            if uid in self._claimed or allocated_ref(info.annotations) is not None:
                continue
            created = _created(obj)
            if since is None or created is None or created < since:
                continue
            candidates.append((int(info.node_name == source_node), info.key, obj))
        if not candidates:
            return False
        _, _, replacement = min(candidates, key=lambda c: (c[0], c[1]))
        meta = replacement["metadata"]
        new_ref = {"namespace": meta.get("namespace") or "default", "name": meta["name"], "uid": meta.get("uid", "")}
        self._claimed.add(str(meta.get("uid") or ""))
        await self._drop_reservation(job)
        old = (job.get("spec") or {}).get("podRef") or {}
        node = (replacement.get("spec") or {}).get("nodeName") or ""
        evicted = f'Pod "{old.get("namespace") or "default"}/{old.get("name")}"'
        placed = f'"{new_ref["namespace"]}/{new_ref["name"]}" was bound to node "{node}" outside Reservation "{rname}"'
        if node and node == source_node:
            await self._status(
                job,
                phase="Failed",
                reason="ForbiddenMigratePod",
                message=f"{evicted} has been evicted but its replacement {placed}, the node it left",
                podRef=new_ref,
            )
            return True
        await self._status(
            job,
            phase="Succeeded",
            reason="",
            message=f"{evicted} has been evicted; its replacement {placed}",
            podRef=new_ref,
            condition={"type": "PodScheduled", "reason": "", "message": f"Assign Pod to node {node!r}"},
        )
        return True

    async def _reservation_first(
        self, job: dict[str, Any], pod: dict[str, Any] | None, ttl: float, now: float, evicted: bool
    ) -> None:
        name = job["metadata"]["name"]
        rref = ((job.get("spec") or {}).get("reservationOptions") or {}).get("reservationRef") or {}
        reservation = self.cache.objects.get("Reservation", {}).get(rref["name"]) if rref.get("name") else None
        if not rref.get("name"):
            if pod is None:
                await self._fail(job, "MissingPod", "pod is gone before its reservation was created")
                return
            obj = reservation_for(job, pod, ttl, now)
            try:
                created = await self.client.create_or_update(obj)
            except ApiError as exc:
                await self._fail(job, "FailedCreateReservation", str(exc))
                return
            ref = {"name": created["metadata"]["name"], "uid": created["metadata"].get("uid", "")}
            job.setdefault("spec", {}).setdefault("reservationOptions", {})["reservationRef"] = ref
            await self.client.patch("PodMigrationJob", name, {"spec": {"reservationOptions": {"reservationRef": ref}}})
            await self._status(job, condition={"type": "ReservationCreated", "reason": "ReservationCreated"})
            return
        if reservation is None:
            await self._fail(job, "MissingReservation", f"reservation {rref['name']} not found")
            return
        rstatus = reservation.get("status") or {}
        rphase = rstatus.get("phase") or "Pending"
        conditions = [c for c in rstatus.get("conditions") or [] if isinstance(c, dict)]
        if rphase == "Failed":
            await self._fail(job, "ReservationExpired", f"reservation {rref['name']} failed or expired")
            return
        if any(c.get("reason") == "Unschedulable" and c.get("status") == "False" for c in conditions):
            await self._fail(job, "Unschedulable", f"reservation {rref['name']} cannot be scheduled")
            return
        if rphase not in (PHASE_AVAILABLE, "Succeeded"):
            if status_message(job) != "WaitForReservationScheduled":
                await self._status(job, message="WaitForReservationScheduled")
            return
        if not evicted:
            if not any(
                c.get("type") == "ReservationScheduled" for c in (job.get("status") or {}).get("conditions") or []
            ):
                await self._status(
                    job,
                    condition={
                        "type": "ReservationScheduled",
                        "reason": "ReservationScheduled",
                        "message": f"reserved on {rstatus.get('nodeName')}",
                    },
                )
            ruid = str((reservation.get("metadata") or {}).get("uid") or rref.get("uid") or "")
            if self._bound_pod(reservation, ruid) is not None or rphase == "Succeeded":
                # upstream abortJobIfReservationBoundByAnotherPod: never evict for a Reservation gone to another pod
                await self._status(
                    job,
                    phase="Failed",
                    reason="ForbiddenMigratePod",
                    message="Reservation is already bound by another Pod",
                )
                return
            if pod is not None and not await self._evict(job, pod):
                return
        ruid = str((reservation.get("metadata") or {}).get("uid") or rref.get("uid") or "")
        bound = self._bound_pod(reservation, ruid)
        if bound is None:
            if rphase == PHASE_AVAILABLE and await self._bound_elsewhere(job, reservation, rref["name"]):
                return
            if status_message(job) != "WaitForPodBindReservation":
                await self._status(job, message="WaitForPodBindReservation")
            return
        bmeta = bound["metadata"]
        new_ref = {"namespace": bmeta.get("namespace") or "default", "name": bmeta["name"], "uid": bmeta.get("uid", "")}
        if not _ready(bound):
            if status_message(job) != "WaitForBoundPodReady":
                await self._status(
                    job,
                    message="WaitForBoundPodReady",
                    condition={"type": "PodBoundReservation", "reason": "PodBoundReservation"},
                )
            return
        await self._status(
            job,
            phase="Succeeded",
            reason="",
            message="migration succeeded",
            podRef=new_ref,
            condition={"type": "BoundPodReady", "reason": "BoundPodReady"},
        )


def status_message(job: dict[str, Any]) -> str:
    """The job's ``status.message`` ("" when none)."""
    return str((job.get("status") or {}).get("message") or "")
