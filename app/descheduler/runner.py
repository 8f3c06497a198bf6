"""One descheduling round against the cluster cache, and the metrics it exports.

:func:`view_from_cache` snapshots the :class:`~app.cache.snapshot.ClusterCache` into a
:class:`~app.descheduler.model.ClusterView`; :class:`Descheduler` plans with LowNodeLoad under the
configuration's limits and, unless dry-run, evicts through :class:`~app.descheduler.evictor.PodEvictor`
(the Eviction API, or the file source's recording in embedded mode). Mirrors the round loop of
``pkg/descheduler/descheduler.go``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.cache.snapshot import ClusterCache
from app.client.errors import ApiError
from app.descheduler.classify import NodeClass
from app.descheduler.config import DeschedulerConfig
from app.descheduler.evictor import PodEvictor
from app.descheduler.limits import EvictionLimits
from app.descheduler.lownodeload import LowNodeLoad, RoundResult
from app.descheduler.migration import new_job
from app.descheduler.model import ClusterView, PodView, node_view
from app.sources.base import ClusterClient

log = logging.getLogger("koord.descheduler")


def view_from_cache(cache: ClusterCache, now: float) -> ClusterView:
    """The cache's nodes, their non-terminated pods, NodeMetrics and PDBs as a :class:`ClusterView`."""
    nodes = {name: node_view(state.obj, state.allocatable, state.requested) for name, state in cache.nodes.items()}
    by_node: dict[str, list[PodView]] = {name: [] for name in nodes}
    for uid, info in cache.pods.items():
        if info.terminated or not info.node_name or uid not in cache.pod_objects:
            continue
        by_node.setdefault(info.node_name, []).append(PodView(info, cache.pod_objects[uid]))
    for pods in by_node.values():
        pods.sort(key=lambda p: p.key)
    metrics = dict(cache.objects.get("NodeMetric", {}).items())
    pdbs = list(cache.objects.get("PodDisruptionBudget", {}).values())
    migrating = {}
    for job in cache.objects.get("PodMigrationJob", {}).values():
        if (job.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Aborted"):
            continue
        ref = (job.get("spec") or {}).get("podRef") or {}
        migrating[f"{ref.get('namespace') or 'default'}/{ref.get('name')}"] = str(job["metadata"]["name"])
    return ClusterView(nodes, by_node, metrics, pdbs, now, migrating)


class DeschedulerMetrics:
    """``koord_descheduler_*`` metrics in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.evicted = Counter(
            "koord_descheduler_pods_evicted",
            "Pods evicted by the descheduler.",
            ["node", "namespace", "reason"],
            registry=self.registry,
        )
        self.round_seconds = Histogram(
            "koord_descheduler_round_duration_seconds", "Duration of a descheduling round.", registry=self.registry
        )
        self.nodes_by_class = Gauge(
            "koord_descheduler_nodes",
            "Nodes by LowNodeLoad class in the last round.",
            ["class"],
            registry=self.registry,
        )


class Descheduler:
    """Runs rounds: plan (LowNodeLoad) then execute (unless dry-run), keeping the last round for ``explain``.

    Args:
        config: the parsed DeschedulerConfiguration.
        evictor: executes evictions (None only for dry-run use).
        dry_run: force dry-run (``--dry-run``), besides the config's own ``dryRun`` and LowNodeLoad's.
        clock: epoch seconds.
        jobs: where to create PodMigrationJobs when the config enables MigrationController (the source).
    """

    def __init__(
        self,
        config: DeschedulerConfig,
        evictor: PodEvictor | None,
        dry_run: bool = False,
        metrics: DeschedulerMetrics | None = None,
        clock: Callable[[], float] = time.time,
        jobs: ClusterClient | None = None,
    ) -> None:
        if config.low_node_load is None:
            raise ValueError("the configuration enables no LowNodeLoad plugin: nothing to do")
        self.config = config
        self.plugin = LowNodeLoad(config.low_node_load, config.evictor)
        self.evictor = evictor
        self.dry_run = dry_run or config.dry_run or config.low_node_load.dry_run or evictor is None
        self.metrics = metrics or DeschedulerMetrics()
        #: Where PodMigrationJobs are created when MigrationController is the evictor (else None: evict directly).
        self.jobs = jobs if config.migration_enabled else None
        self.clock = clock
        self.last: dict[str, Any] | None = None

    async def run_once(self, view: ClusterView) -> dict[str, Any]:
        """One round; returns (and keeps) its JSON report: the plan plus ``dryRun`` and, when executed,
        each eviction's ``evicted`` / ``error``."""
        started = time.monotonic()
        cfg = self.config
        limits = EvictionLimits(cfg.max_pods_per_node, cfg.max_pods_per_namespace, cfg.max_pods_total)
        result: RoundResult = self.plugin.balance(view, limits, cfg.node_selector)
        report = result.to_json()
        report["dryRun"] = self.dry_run
        report["time"] = view.now
        for cls in NodeClass:
            self.metrics.nodes_by_class.labels(str(cls)).set(sum(1 for n in result.nodes if n.node_class == cls))
        if not self.dry_run and self.jobs is not None:
            for planned, entry in zip(result.evictions, report["evictions"], strict=True):
                job = new_job(
                    planned.pod,
                    f"{planned.name[:200]}-{planned.uid[:8] or 'pod'}-{int(view.now)}",
                    cfg.migration.default_job_mode,
                    cfg.migration.default_job_ttl,
                    planned.reason,
                )
                try:
                    await self.jobs.create_or_update(job)
                    entry["podMigrationJob"] = job["metadata"]["name"]
                    self.metrics.evicted.labels(planned.node, planned.namespace, "LowNodeLoad").inc()
                except ApiError as exc:
                    entry["error"] = f"creating PodMigrationJob: {exc}"
        elif not self.dry_run:
            assert self.evictor is not None
            for planned, entry in zip(result.evictions, report["evictions"], strict=True):
                outcome = await self.evictor.evict(planned.namespace, planned.name, planned.uid, planned.reason)
                entry["evicted"] = outcome.evicted
                if outcome.error:
                    entry["error"] = outcome.error
                if outcome.evicted:
                    self.metrics.evicted.labels(planned.node, planned.namespace, "LowNodeLoad").inc()
                else:
                    log.warning("could not evict %s/%s: %s", planned.namespace, planned.name, outcome.error)
        else:
            for e in result.evictions:
                log.info("Evict pod in dry run mode: %s/%s from %s to %s", e.namespace, e.name, e.node, e.target or "?")
        self.metrics.round_seconds.observe(time.monotonic() - started)
        self.last = report
        return report
