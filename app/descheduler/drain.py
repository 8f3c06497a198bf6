"""The DrainNode controller of koord-descheduler (``DrainNodeController``), after koordinator's
``pkg/descheduler/controllers/drain/node/controller.go`` and its reservation interpreter.

A ``DrainNode`` (``scheduling.koordinator.sh/v1alpha1``, :mod:`app.api.drain`) names a node to empty. One
:meth:`DrainNodeController.reconcile` pass moves every DrainNode one step:

- ``""`` -> ``Pending``.
- ``Pending``: the node is cordoned: label ``drain.descheduler.koordinator.sh/node-planning`` (which keeps the
  drain's Reservations off it), with ``cordonPolicy.mode: Taint`` a ``drain-node=<name>:NoSchedule`` taint, with
  ``Label`` the policy's labels; and, as ``kubectl drain`` does, ``spec.unschedulable: true`` (this rebuild's:
  upstream leaves the kube cordon to the operator) with the annotation ``cordoned-by=<name>`` -> ``Running``.
- ``Running``: every pod on the node becomes one ``pogMigrations`` entry (DaemonSet and mirror pods are not
  charted; a pod the DefaultEvictor filter refuses is ``Unmigratable``) and moves through upstream's phases:
  ``Waiting`` (``migrationPolicy``: ``MigrateDirectly`` at once, ``WaitFirst`` after ``waitDuration``, 1 h by
  default; a pod's own ``drain.descheduler.koordinator.sh/migration-policy`` annotation wins) -> ``Ready``: a
  Reservation ``<drain>-<uid[:8]>`` from the pod (owned by the DrainNode, owners = the pod's controller,
  ``allocateOnce``, required node affinity ``node-planning DoesNotExist``) -> ``Available`` once the scheduler
  reserved room elsewhere (``Unavailable`` when it failed, or, in this rebuild, when it reports the
  Reservation unschedulable: the message says why) -> with ``confirmState: Confirmed``, ``Migrating``: a
  ReservationFirst PodMigrationJob of the same name naming that Reservation, which the MigrationController
  carries out under its limits (``maxMigratingPerNode`` ...) through the Eviction API (a PDB's 429 waits) ->
  ``Succeed`` (or ``Failed`` with the job). Nothing is evicted for a pod whose Reservation is not Available.
- When no entry can progress (none Waiting, Ready, Available or Migrating) -> ``Complete``; the node stays
  cordoned. Conditions say what is left: ``UnmigratablePodExists``, ``UnavailableReservationExists``,
  ``FailedMigrationJobExists``, ``UnexpectedReservationExists``, ``OnceAvailable``,
  ``UnexpectedPodAfterCompleteExists``, with the pods and reasons in their messages.
- ``confirmState: Rejected`` or ``Aborted`` (undo): the node is uncordoned (what the drain added is removed),
  and unless it was Complete the DrainNode becomes ``Aborted``, whose Reservations and PodMigrationJobs
  (label ``drain-node=<name>``) are deleted. A DrainNode with ``spec.ttl`` is aborted and deleted 5 minutes
  after it expired.

Status writes are merge patches of the status subresource, sent only when something changed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson

from app.api import drain as api
from app.api.duration import parse_duration
from app.api.reservation import PHASE_AVAILABLE
from app.api.timeparse import format_time, parse_time
from app.cache.snapshot import ClusterCache
from app.client.errors import ApiError, NotFound
from app.descheduler.config import DefaultEvictorArgs
from app.descheduler.evictorfilter import ANNOTATION_MIRROR, evict_filter
from app.descheduler.migration import PMJ_API_VERSION
from app.descheduler.model import PodView
from app.sources.base import ClusterClient

log = logging.getLogger("koord.descheduler.drain")

NAME = "DrainNodeController"
MIGRATION_JOB_PHASES_FAILED = ("Failed", "Aborted")


def _controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def owner_ref(dn: dict[str, Any]) -> dict[str, Any]:
    """The controller ownerReference pointing at DrainNode ``dn`` (``metav1.NewControllerRef``)."""
    meta = dn.get("metadata") or {}
    return {
        "apiVersion": api.DRAIN_API_VERSION,
        "kind": api.KIND_DRAIN_NODE,
        "name": meta.get("name"),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def drain_affinity(affinity: dict[str, Any] | None) -> dict[str, Any]:
    """The pod's affinity with the drain's rules merged in (``mergeAffinity``): every required node selector
    term also requires ``node-planning DoesNotExist`` (so no Reservation lands on a node being drained), and a
    weight-100 preference for nodes without ``node-group``."""
    out = dict(affinity or {})
    node_affinity = dict(out.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    need = {"key": api.LABEL_PLANNING, "operator": "DoesNotExist"}
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)] or [{}]
    for term in terms:
        term["matchExpressions"] = [*(term.get("matchExpressions") or []), need]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    prefer = {"weight": 100, "preference": {"matchExpressions": [{"key": api.LABEL_GROUP, "operator": "DoesNotExist"}]}}
    node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
        *(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []),
        prefer,
    ]
    out["nodeAffinity"] = node_affinity
    return out


def reservation_for(dn: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """The Reservation that holds room for ``pod`` elsewhere (upstream's ``CreateReservation``).

    Raises:
        ValueError: the pod has no controller (upstream: ``pod OwnerReference is nil``).
    """
    meta = pod.get("metadata") or {}
    controller = _controller_of(pod)
    if controller is None:
        raise ValueError(f"pod {meta.get('namespace')}/{meta.get('name')} has no controller ownerReference")
    spec = dict(pod.get("spec") or {})
    spec.pop("nodeName", None)
    spec["affinity"] = drain_affinity(spec.get("affinity"))
    namespace = meta.get("namespace") or "default"
    labels = {**(meta.get("labels") or {}), api.LABEL_POD_NAME: meta.get("name")}
    name = str((dn.get("metadata") or {}).get("name"))
    return {
        "apiVersion": api.DRAIN_API_VERSION,
        "kind": "Reservation",
        "metadata": {
            "name": api.migration_name(name, str(meta.get("uid") or "")),
            "labels": {
                api.LABEL_DRAIN_NODE: name,
                api.LABEL_POD_NAMESPACE: namespace,
                api.LABEL_POD_NAME: meta.get("name"),
            },
            "ownerReferences": [owner_ref(dn)],
        },
        "spec": {
            "template": {
                "metadata": {
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": dict(meta.get("annotations") or {}),
                    "ownerReferences": list(meta.get("ownerReferences") or []),
                },
                "spec": spec,
            },
            "owners": [
                {
                    "controller": {
                        **{k: controller.get(k) for k in ("apiVersion", "kind", "name", "uid")},
                        "controller": True,
                        "namespace": namespace,
                    }
                }
            ],
            "allocateOnce": True,
        },
    }


def migration_job_for(dn: dict[str, Any], entry: dict[str, Any], reservation: dict[str, Any]) -> dict[str, Any]:
    """The PodMigrationJob of one pod (upstream's ``createMigration``): named as its Reservation, labelled and
    owned by the DrainNode, ReservationFirst through that Reservation; paused when the DrainNode asks for it
    (``paused-after-confirmed``) and the pod was charted after the drain was confirmed."""
    rmeta = reservation.get("metadata") or {}
    name = str((dn.get("metadata") or {}).get("name"))
    paused = str(
        ((dn.get("metadata") or {}).get("annotations") or {}).get(api.ANNOTATION_PAUSED_AFTER_CONFIRMED)
    ) == "true" and bool(entry.get("chartedAfterDrainNodeConfirmed"))
    return {
        "apiVersion": PMJ_API_VERSION,
        "kind": "PodMigrationJob",
        "metadata": {
            "name": rmeta.get("name"),
            "labels": {api.LABEL_DRAIN_NODE: name},
            "annotations": {"scheduling.koordinator.sh/eviction-reason": f"drain node {dn['spec']['nodeName']}"},
            "ownerReferences": [owner_ref(dn)],
        },
        "spec": {
            "paused": paused,
            "mode": "ReservationFirst",
            "podRef": {"namespace": entry.get("namespace"), "name": entry.get("podName"), "uid": entry.get("uid")},
            "reservationOptions": {
                "reservationRef": {
                    "apiVersion": api.DRAIN_API_VERSION,
                    "kind": "Reservation",
                    "name": rmeta.get("name"),
                    "uid": rmeta.get("uid", ""),
                }
            },
        },
        "status": {"phase": "Pending"},
    }


def _policy(raw: Any) -> tuple[str, float | None] | None:
    """(mode, waitDuration seconds or None) of a MigrationPolicy, or None when its mode is not a valid one."""
    if not isinstance(raw, dict) or raw.get("mode") not in (api.MODE_WAIT_FIRST, api.MODE_MIGRATE_DIRECTLY):
        return None
    wait = raw.get("waitDuration")
    try:
        return str(raw["mode"]), parse_duration(wait) if wait else None
    except ValueError:
        return str(raw["mode"]), None


def _pod_policy(pod: dict[str, Any]) -> tuple[str, float | None] | None:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(api.ANNOTATION_MIGRATION_POLICY)
    if not text:
        return None
    try:
        return _policy(orjson.loads(text))
    except orjson.JSONDecodeError:
        return None


def _reservation_unschedulable(reservation: dict[str, Any]) -> str | None:
    """The scheduler's reason when it reports the Reservation unschedulable, else None."""
    for cond in (reservation.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("reason") == "Unschedulable" and cond.get("status") == "False":
            return str(cond.get("message") or "unschedulable")
    return None


class DrainNodeController:
    """Reconciles the DrainNodes held in ``cache`` and writes through ``client`` (see the module docstring).

    Args:
        cache: the cluster cache (DrainNode, Node, Pod, Reservation and PodMigrationJob objects).
        client: the source: status patches, Node patches, Reservation and PodMigrationJob create/delete.
        evictor_args: the DefaultEvictor's args (which pods are Unmigratable).
        clock: epoch seconds.
    """

    def __init__(
        self,
        cache: ClusterCache,
        client: ClusterClient,
        evictor_args: DefaultEvictorArgs | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache, self.client, self.clock = cache, client, clock
        self.evictor_args = evictor_args or DefaultEvictorArgs()
        #: DrainNodes already warned about a missing node (warned once, not every pass).
        self._warned: set[str] = set()

    # ---------------------------------------------------------------------------------- reading
    def drains(self) -> list[dict[str, Any]]:
        """The DrainNodes in the cache, by name."""
        return sorted(self.cache.objects.get(api.KIND_DRAIN_NODE, {}).values(), key=lambda d: d["metadata"]["name"])

    def _labelled(self, kind: str, name: str) -> list[dict[str, Any]]:
        return [
            o
            for o in self.cache.objects.get(kind, {}).values()
            if ((o.get("metadata") or {}).get("labels") or {}).get(api.LABEL_DRAIN_NODE) == name
        ]

    def _charted_pods(self, node: str) -> list[dict[str, Any]]:
        """The node's pods a drain charts: not terminated, not DaemonSet or mirror pods (upstream's ``Ignore``)."""
        out = []
        for uid, info in self.cache.pods.items():
            if info.node_name != node or info.terminated or uid not in self.cache.pod_objects:
                continue
            if info.daemonset or ANNOTATION_MIRROR in info.annotations:
                continue
            out.append(self.cache.pod_objects[uid])
        return sorted(out, key=lambda p: (p["metadata"].get("namespace") or "", p["metadata"]["name"]))

    # -------------------------------------------------------------------------------- reconcile
    async def reconcile(self) -> None:
        """Move every DrainNode one step; an API failure on one is logged and retried next pass."""
        for dn in self.drains():
            try:
                if await self._gc(dn):
                    continue
                await self._dispatch(dn)
            except ApiError as exc:
                log.warning("DrainNode %s: %s (retrying)", dn["metadata"]["name"], exc)

    async def _gc(self, dn: dict[str, Any]) -> bool:
        """Abort and delete a DrainNode whose ``ttl`` passed more than 5 minutes ago (``doGC``)."""
        ttl_text = (dn.get("spec") or {}).get("ttl")
        if not ttl_text:
            return False
        try:
            ttl = parse_duration(ttl_text)
            created = parse_time(dn["metadata"].get("creationTimestamp") or format_time(self.clock()))
        except ValueError:
            return False
        if ttl <= 0 or self.clock() - created < ttl + api.TTL_MARGIN:
            return False
        await self._abort(dn)
        await self._cleanup(dn)
        with contextlib.suppress(NotFound):
            await self.client.delete(api.KIND_DRAIN_NODE, dn["metadata"]["name"])
        log.info("DrainNode %s expired (ttl %s): deleted", dn["metadata"]["name"], ttl_text)
        return True

    async def _dispatch(self, dn: dict[str, Any]) -> None:
        status = dn.get("status") or {}
        phase = status.get("phase") or ""
        confirm = (dn.get("spec") or {}).get("confirmState") or api.CONFIRM_WAIT
        undo = confirm in (api.CONFIRM_REJECTED, api.CONFIRM_ABORTED)
        if phase == "":
            await self._write(dn, {"phase": api.PHASE_PENDING})
        elif phase == api.PHASE_PENDING:
            if undo:
                await self._abort(dn)
                return
            if not await self._cordon(dn):
                return
            await self._write(dn, {"phase": api.PHASE_RUNNING})
        elif phase in (api.PHASE_RUNNING, api.PHASE_COMPLETE):
            if undo:
                await self._abort(dn)
                return
            await self._progress(dn)
        elif phase == api.PHASE_ABORTED:
            await self._cleanup(dn)

    async def _write(self, dn: dict[str, Any], status: dict[str, Any]) -> None:
        old = dn.get("status") or {}
        if all(old.get(k) == v for k, v in status.items()):
            return
        dn["status"] = {**old, **status}
        await self.client.patch(api.KIND_DRAIN_NODE, dn["metadata"]["name"], {"status": status}, subresource="status")
        if status.get("phase") and status["phase"] != old.get("phase"):
            log.info("DrainNode %s (node %s): %s", dn["metadata"]["name"], dn["spec"].get("nodeName"), status["phase"])

    # ---------------------------------------------------------------------------- cordon / undo
    async def _cordon(self, dn: dict[str, Any]) -> bool:
        """Cordon the node (see the module docstring); False (and a condition-free retry) when it is missing."""
        name, node_name = dn["metadata"]["name"], dn["spec"].get("nodeName") or ""
        state = self.cache.nodes.get(node_name)
        if state is None:
            if name not in self._warned:
                log.warning("DrainNode %s: node %r not found; it stays Pending until the node exists", name, node_name)
                self._warned.add(name)
            return False
        self._warned.discard(name)
        spec = state.obj.get("spec") or {}
        labels: dict[str, Any] = {api.LABEL_PLANNING: ""}
        patch: dict[str, Any] = {"metadata": {"labels": labels}}
        policy = (dn.get("spec") or {}).get("cordonPolicy") or {}
        if policy.get("mode") == api.CORDON_TAINT:
            taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
            if not any(t.get("key") == api.LABEL_DRAIN_NODE for t in taints):
                taints.append({"key": api.LABEL_DRAIN_NODE, "value": name, "effect": "NoSchedule"})
                patch["spec"] = {"taints": taints}
        elif policy.get("mode") == api.CORDON_LABEL:
            labels.update({str(k): str(v) for k, v in (policy.get("labels") or {}).items()})
        if not spec.get("unschedulable"):
            patch.setdefault("spec", {})["unschedulable"] = True
            patch["metadata"]["annotations"] = {api.ANNOTATION_CORDONED_BY: name}
        await self.client.patch("Node", node_name, patch)
        return True

    async def _uncordon(self, dn: dict[str, Any]) -> None:
        name, node_name = dn["metadata"]["name"], dn["spec"].get("nodeName") or ""
        state = self.cache.nodes.get(node_name)
        if state is None:
            return
        meta, spec = state.obj.get("metadata") or {}, state.obj.get("spec") or {}
        labels: dict[str, Any] = {api.LABEL_PLANNING: None}
        patch: dict[str, Any] = {"metadata": {"labels": labels}}
        policy = (dn.get("spec") or {}).get("cordonPolicy") or {}
        if policy.get("mode") == api.CORDON_TAINT:
            taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
            kept = [t for t in taints if not (t.get("key") == api.LABEL_DRAIN_NODE and t.get("value") == name)]
            if len(kept) != len(taints):
                patch["spec"] = {"taints": kept or None}
        elif policy.get("mode") == api.CORDON_LABEL:
            labels.update({str(k): None for k in policy.get("labels") or {}})
        if (meta.get("annotations") or {}).get(api.ANNOTATION_CORDONED_BY) == name:
            patch.setdefault("spec", {})["unschedulable"] = None
            patch["metadata"]["annotations"] = {api.ANNOTATION_CORDONED_BY: None}
        await self.client.patch("Node", node_name, patch)

    async def _abort(self, dn: dict[str, Any]) -> None:
        """Undo (upstream's ``abort``): uncordon; unless Complete or Aborted already, -> Aborted."""
        await self._uncordon(dn)
        if (dn.get("status") or {}).get("phase") in (api.PHASE_COMPLETE, api.PHASE_ABORTED):
            return
        await self._write(dn, {"phase": api.PHASE_ABORTED})

    async def _cleanup(self, dn: dict[str, Any]) -> None:
        """Delete an aborted drain's Reservations and PodMigrationJobs (``handleAbortedDrainNode``)."""
        name = dn["metadata"]["name"]
        for kind in ("Reservation", "PodMigrationJob"):
            for obj in self._labelled(kind, name):
                with contextlib.suppress(NotFound):
                    await self.client.delete(kind, obj["metadata"]["name"])

    # -------------------------------------------------------------------------------- progress
    def _chart(self, dn: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The recorded entries, then one ``Waiting`` (or ``Unmigratable``) entry per pod not yet charted
        (``getActualPodMigrations``)."""
        entries = [dict(e) for e in (dn.get("status") or {}).get(api.STATUS_POD_MIGRATIONS) or []]
        known = {e.get("uid") for e in entries}
        confirmed = (dn.get("spec") or {}).get("confirmState") == api.CONFIRM_CONFIRMED
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("uid") in known:
                continue
            info = self.cache.pods.get(meta.get("uid", ""))
            why = evict_filter(PodView(info, pod), self.evictor_args) if info is not None else "pod not in cache"
            entry: dict[str, Any] = {
                "uid": meta.get("uid"),
                "namespace": meta.get("namespace") or "default",
                "podName": meta["name"],
                "phase": api.POD_UNMIGRATABLE if why else api.POD_WAITING,
                "startTimestamp": format_time(self.clock()),
            }
            if why:
                entry["message"] = why
            if confirmed:
                entry["chartedAfterDrainNodeConfirmed"] = True
            entries.append(entry)
        return entries

    async def _progress(self, dn: dict[str, Any]) -> None:
        name = dn["metadata"]["name"]
        status = dn.get("status") or {}
        pods = {p["metadata"].get("uid"): p for p in self._charted_pods(dn["spec"].get("nodeName") or "")}
        entries: list[dict[str, Any]] = []
        for entry in self._chart(dn, list(pods.values())):
            pod = pods.get(entry.get("uid"))
            if pod is None or entry.get("phase") == api.POD_SUCCEED:
                if not await self._complete(entry):
                    continue
            elif status.get("phase") != api.PHASE_COMPLETE:
                await self._step(dn, entry, pod)
            entries.append(entry)
        summary = {phase: 0 for phase in api.POD_PHASES}
        for entry in entries:
            summary[entry["phase"]] = summary.get(entry["phase"], 0) + 1
        conditions = self._conditions(dn, entries, summary)
        out: dict[str, Any] = {
            api.STATUS_POD_MIGRATIONS: entries,
            api.STATUS_POD_MIGRATION_SUMMARY: summary,
            "conditions": conditions,
        }
        if not any(summary[p] for p in api.POD_IN_PROGRESS) and status.get("phase") != api.PHASE_COMPLETE:
            out["phase"] = api.PHASE_COMPLETE
            log.info("DrainNode %s: complete (%s)", name, _summary_text(summary))
        await self._write(dn, out)

    async def _complete(self, entry: dict[str, Any]) -> bool:
        """A pod gone or migrated (``makeMigrationComplete``): True keeps the entry (as ``Succeed``) for
        auditing; a Reservation made without a job is no longer needed and deleted."""
        if entry.get("reservationName") and not entry.get("podMigrationJobName"):
            with contextlib.suppress(NotFound):
                await self.client.delete("Reservation", entry["reservationName"])
        elif entry.get("podMigrationJobName"):
            job = self.cache.objects.get("PodMigrationJob", {}).get(entry["podMigrationJobName"])
            if job is not None:
                entry["podMigrationJobPhase"] = (job.get("status") or {}).get("phase") or "Pending"
                entry["podMigrationJobPaused"] = bool((job.get("spec") or {}).get("paused"))
        else:
            return False
        entry["phase"] = api.POD_SUCCEED
        entry.pop("message", None)
        return True

    def _ready(self, dn: dict[str, Any], entry: dict[str, Any], pod: dict[str, Any]) -> bool:
        now = self.clock()
        try:
            started = parse_time(entry.get("startTimestamp") or format_time(now))
            created = parse_time(dn["metadata"].get("creationTimestamp") or format_time(now))
        except ValueError:
            started = created = now
        drain_policy = _policy((dn.get("spec") or {}).get("migrationPolicy"))
        drain_wait = drain_policy[1] if drain_policy and drain_policy[1] is not None else api.DEFAULT_WAIT_DURATION
        by_drain_mode = drain_policy is not None and drain_policy[0] == api.MODE_MIGRATE_DIRECTLY
        by_drain_time = now - created > drain_wait
        pod_policy = _pod_policy(pod)
        if pod_policy is None:
            return by_drain_mode or by_drain_time
        pod_wait = pod_policy[1] if pod_policy[1] is not None else api.DEFAULT_WAIT_DURATION
        return pod_policy[0] == api.MODE_MIGRATE_DIRECTLY or now - started > pod_wait or by_drain_time

    async def _step(self, dn: dict[str, Any], entry: dict[str, Any], pod: dict[str, Any]) -> None:
        """Move one pod's migration as far as it goes this pass (``progressMigration``)."""
        phase = entry.get("phase")
        if phase == api.POD_WAITING:
            if not self._ready(dn, entry, pod):
                return
            entry["phase"] = phase = api.POD_READY
        if phase == api.POD_READY:
            rname = api.migration_name(dn["metadata"]["name"], str(entry.get("uid") or ""))
            reservation = self.cache.objects.get("Reservation", {}).get(rname)
            if reservation is None:
                try:
                    reservation = await self.client.create_or_update(reservation_for(dn, pod))
                except ValueError as exc:
                    entry["message"] = str(exc)
                    return
                log.info("DrainNode %s: pod %s/%s: Reservation %s created", dn["metadata"]["name"],
                         entry["namespace"], entry["podName"], rname)  # fmt: skip
            rstatus = reservation.get("status") or {}
            entry["reservationName"] = rname
            entry["reservationPhase"] = rstatus.get("phase") or "Pending"
            if rstatus.get("nodeName"):
                entry["targetNode"] = rstatus["nodeName"]
            unschedulable = _reservation_unschedulable(reservation)
            if entry["reservationPhase"] == "Failed" or (
                entry["reservationPhase"] == "Succeeded" and not entry.get("podMigrationJobName")
            ):
                entry["phase"] = api.POD_UNAVAILABLE
                entry["message"] = f"reservation {rname} is {entry['reservationPhase']}"
                return
            if unschedulable is not None:
                entry["phase"] = api.POD_UNAVAILABLE
                entry["message"] = f"reservation {rname} cannot be scheduled: {unschedulable}"
                return
            if entry["reservationPhase"] != PHASE_AVAILABLE:
                return
            entry["phase"] = phase = api.POD_AVAILABLE
            entry.pop("message", None)
        if phase == api.POD_AVAILABLE:
            if (dn.get("spec") or {}).get("confirmState") != api.CONFIRM_CONFIRMED:
                return
            entry["phase"] = phase = api.POD_MIGRATING
        if phase == api.POD_MIGRATING:
            jname = entry.get("reservationName") or api.migration_name(dn["metadata"]["name"], str(entry["uid"]))
            job = self.cache.objects.get("PodMigrationJob", {}).get(jname)
            if job is None:
                reservation = self.cache.objects.get("Reservation", {}).get(jname)
                if reservation is None:
                    entry["message"] = f"reservation {jname} not found"
                    return
                job = await self.client.create_or_update(migration_job_for(dn, entry, reservation))
                log.info("DrainNode %s: pod %s/%s: PodMigrationJob %s created", dn["metadata"]["name"],
                         entry["namespace"], entry["podName"], jname)  # fmt: skip
            jstatus = job.get("status") or {}
            entry["podMigrationJobName"] = jname
            entry["podMigrationJobPhase"] = jstatus.get("phase") or "Pending"
            entry["podMigrationJobPaused"] = bool((job.get("spec") or {}).get("paused"))
            if jstatus.get("message"):
                entry["message"] = str(jstatus["message"])
            if entry["podMigrationJobPhase"] in MIGRATION_JOB_PHASES_FAILED:
                entry["phase"] = api.POD_FAILED
            elif entry["podMigrationJobPhase"] == "Succeeded":
                entry["phase"] = api.POD_SUCCEED

    def _conditions(
        self, dn: dict[str, Any], entries: list[dict[str, Any]], summary: dict[str, int]
    ) -> list[dict[str, Any]]:
        """Upstream's conditions, with the pods and reasons in the messages."""
        old = {c.get("type"): c for c in (dn.get("status") or {}).get("conditions") or [] if isinstance(c, dict)}
        out = dict(old)
        now = format_time(self.clock())

        def put(kind: str, true: bool, reason: str, message: str) -> None:
            status = "True" if true else "False"
            prev = old.get(kind) or {}
            since = prev.get("lastTransitionTime") if prev.get("status") == status else now
            out[kind] = {"type": kind, "status": status, "reason": reason, "message": message,
                         "lastTransitionTime": since}  # fmt: skip

        def pods_in(phase: str) -> str:
            return "; ".join(
                f"{e['namespace']}/{e['podName']}" + (f": {e['message']}" if e.get("message") else "")
                for e in entries
                if e["phase"] == phase
            )

        planned = {e.get("reservationName") for e in entries if e.get("reservationName")}
        node = dn["spec"].get("nodeName") or ""
        unexpected = sorted(
            r["metadata"]["name"]
            for r in self.cache.objects.get("Reservation", {}).values()
            if (r.get("status") or {}).get("nodeName") == node and r["metadata"]["name"] not in planned
        )
        put(api.COND_UNEXPECTED_RESERVATION_EXISTS, bool(unexpected),
            f"unexpected reservation count: {len(unexpected)}", f"unexpectedRR: {unexpected}")  # fmt: skip
        n = summary[api.POD_UNMIGRATABLE]
        put(api.COND_UNMIGRATABLE_POD_EXISTS, n > 0, f"unmigratable pod count: {n}", pods_in(api.POD_UNMIGRATABLE))
        n = summary[api.POD_UNAVAILABLE]
        put(api.COND_UNAVAILABLE_RESERVATION_EXISTS, n > 0, f"unavailable reservation count: {n}",
            pods_in(api.POD_UNAVAILABLE))  # fmt: skip
        n = summary[api.POD_FAILED]
        put(api.COND_FAILED_MIGRATION_JOB_EXISTS, n > 0, f"failed job count: {n}", pods_in(api.POD_FAILED))
        if not (summary[api.POD_READY] + summary[api.POD_UNAVAILABLE] + summary[api.POD_UNMIGRATABLE]):
            put(api.COND_ONCE_AVAILABLE, True, api.COND_ONCE_AVAILABLE,
                "no unmigratable, waiting, ready and unavailable migration")  # fmt: skip
        if (dn.get("status") or {}).get("phase") == api.PHASE_COMPLETE:
            late = [e for e in entries if e["phase"] in api.POD_IN_PROGRESS]
            kind = api.COND_UNEXPECTED_POD_AFTER_COMPLETE_EXISTS
            put(kind, bool(late), kind, "; ".join(f"{e['namespace']}/{e['podName']}" for e in late))
        elif not any(summary[p] for p in api.POD_IN_PROGRESS):
            put(api.COND_UNEXPECTED_POD_AFTER_COMPLETE_EXISTS, False, "", "")
        return [out[k] for k in sorted(out, key=str)]


def _summary_text(summary: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in summary.items() if v) or "no pods"
