"""The slo-controller's NodeSLO and batch-resource (noderesource) controllers over any Source.

One :class:`SLOControllers` keeps, per node, one NodeSLO (``pkg/slo-controller/nodeslo``) and the
node's ``kubernetes.io/batch-cpu`` / ``kubernetes.io/batch-memory`` in ``status.allocatable`` and
``status.capacity`` (``pkg/slo-controller/noderesource``), reading everything from the snapshot
cache and writing through the source:

- NodeSLO: ``source.create_or_update(NodeSLO)`` when the derived spec differs from the cached one
  (created with an ownerReference to its Node, so Kubernetes' garbage collector deletes it with
  the node). When a node is gone its NodeSLO is deleted (``source.delete``), unless the NodeSLO
  has an ownerReference to a Node and the source's backend garbage-collects owned objects
  (:attr:`~app.sources.base.Source.owner_gc`, the API server): the embedded mode has no garbage
  collector.
- Device resources (:mod:`app.manager.deviceresource`): ``koordinator.sh/gpu-*`` and ``koordinator.sh/rdma``
  in ``status.capacity`` / ``status.allocatable`` from the healthy devices of the node's Device object, and
  its GPU labels on the Node, patched whenever they differ (the Device marks its node dirty).
- Batch resources: ``source.patch("Node", name, {"status": {"allocatable": ..., "capacity": ...}},
  subresource="status")``; removed (``null``) when colocation is disabled for the node or its
  NodeMetric is missing/stale. Written when this instance has not written the node yet, when
  ``updateTimeThresholdSeconds`` passed since its last write, or when a value moved by more than
  ``resourceDiffThreshold`` (relative), as upstream's ``isNodeResourceSyncNeeded``.

Cache events mark nodes dirty (a listener: Node, its pods, its NodeMetric, the ConfigMap marks
all); :meth:`SLOControllers.run` reconciles dirty nodes every ``interval`` seconds and every node
every ``resync_seconds``. The ConfigMap ``koordinator-system/slo-controller-config`` is re-read
on change; a malformed key keeps its last good value, is logged, counted in
``koord_slo_controller_config_errors_total{key}`` and listed in :attr:`SLOControllers.config_errors`.
Nothing runs until the source is ready (an empty cache would reset every node).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from app.api.koordext import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from app.api.quantity import QuantityError, format_resource, parse_resource_list
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo
from app.cache.snapshot import ClusterCache
from app.client.errors import ApiError, NotFound
from app.manager.batch import ReclaimResult, calculate_batch, is_resource_diff
from app.manager.colocation import (
    COLOCATION_CONFIG_KEY,
    ColocationConfig,
    ColocationConfigError,
    ColocationStrategy,
    node_strategy,
    parse_colocation_config,
)
from app.manager.deviceresource import DeviceResourceError, device_resources, node_patches
from app.manager.inputs import metric_input, node_input, pod_inputs
from app.manager.mid import calculate_mid
from app.manager.sloconfig import SLOConfig, node_slo_spec, parse_slo_config
from app.sources.base import Source

log = logging.getLogger(__name__)

#: ``sloconfig.ConfigNameSpace`` / ``SLOCtrlConfigMap``.
CONFIG_NAMESPACE = "koordinator-system"
CONFIG_NAME = "slo-controller-config"
CONFIG_KEY = f"{CONFIG_NAMESPACE}/{CONFIG_NAME}"
RESET_MESSAGE = "node colocation is disabled in Config, reason: DisableInConfig"


class _DirtyListener(CacheListener):
    """Marks nodes dirty on cache events (runs on the event loop thread)."""

    def __init__(self, owner: SLOControllers) -> None:
        self.owner = owner

    def on_node(self, name: str, node: NodeState | None) -> None:
        self.owner.dirty.add(name)

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        for pod in (old, new):
            if pod is not None and pod.node_name:
                self.owner.dirty.add(pod.node_name)

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        if kind in ("NodeMetric", "NodeSLO", "Device"):
            self.owner.dirty.add(key)
        elif kind == "ConfigMap" and key == CONFIG_KEY:
            self.owner.config_changed = True


def summarize_writes(writes: collections.Counter[str]) -> str:
    """One line for a round's batch-resource writes: ``3 nodes updated, 2 reset (reason)``, updates first."""
    parts = []
    updated = writes.get("updated", 0)
    if updated:
        parts.append(f"{updated} node{'s' if updated != 1 else ''} updated")
    for key in sorted(k for k in writes if k != "updated"):
        count = writes[key]
        label = key if parts else f"node{'s' if count != 1 else ''} {key}"
        parts.append(f"{count} {label}")
    return ", ".join(parts)


class SLOControllers:
    """NodeSLO and batch-resource controllers (see the module docstring).

    Args:
        cache: the snapshot cache the source feeds (Node, Pod, NodeMetric, NodeSLO, ConfigMap).
        source: where NodeSLOs and node status patches are written.
        registry: Prometheus registry for the controller metrics (a private one if None).
        clock: epoch seconds (injectable for tests).
        interval: seconds between reconciles of dirty nodes.
        resync_seconds: seconds between reconciles of every node (stale NodeMetrics, update interval).
    """

    def __init__(
        self,
        cache: ClusterCache,
        source: Source,
        *,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        interval: float = 1.0,
        resync_seconds: float = 60.0,
    ) -> None:
        self.cache = cache
        self.source = source
        self.clock = clock
        self.interval = interval
        self.resync_seconds = resync_seconds
        self.dirty: set[str] = set()
        #: This round's batch-resource writes: "updated" or "reset (<reason>)" -> nodes (one INFO line each round).
        self.round_writes: collections.Counter[str] = collections.Counter()
        self.config_changed = True
        self.colocation = ColocationConfig()
        #: False until colocation-config was usable once: batch resources are left alone meanwhile
        #: (upstream's ``IsCfgAvailable``), so a bad config at start never resets every node.
        self.colocation_available = False
        self.slo = SLOConfig()
        #: Last problem per ConfigMap key (empty when every key was usable).
        self.config_errors: dict[str, str] = {}
        self.last_synced: dict[str, float] = {}
        registry = registry or CollectorRegistry()
        self.config_error_count = Counter(
            "koord_slo_controller_config_errors",
            "Malformed slo-controller-config keys (the last good value is kept), by key.",
            ["key"],
            registry=registry,
        )
        self.config_error_gauge = Gauge(
            "koord_slo_controller_config_invalid",
            "1 while a slo-controller-config key is malformed and its last good value is in use.",
            ["key"],
            registry=registry,
        )
        self.writes = Counter(
            "koord_slo_controller_writes",
            "Writes by the slo-controller, by object and result.",
            ["object", "result"],
            registry=registry,
        )
        cache.add_listener(_DirtyListener(self))

    # ------------------------------------------------------------------ config
    def _report(self, key: str, message: str | None) -> None:
        if message:
            if self.config_errors.get(key) != message:
                log.error("slo-controller-config: keeping the last good %s: %s", key, message)
                self.config_error_count.labels(key).inc()
            self.config_errors[key] = message
            self.config_error_gauge.labels(key).set(1)
        else:
            self.config_errors.pop(key, None)
            self.config_error_gauge.labels(key).set(0)

    def reload_config(self) -> None:
        """Re-read the ConfigMap from the cache (absent: defaults); mark every node dirty."""
        self.config_changed = False
        cm = self.cache.objects.get("ConfigMap", {}).get(CONFIG_KEY)
        data = (cm or {}).get("data") or {} if cm is not None else None
        try:
            self.colocation = parse_colocation_config(data.get(COLOCATION_CONFIG_KEY) if data is not None else None)
            self.colocation_available = True
            self._report(COLOCATION_CONFIG_KEY, None)
        except ColocationConfigError as exc:
            self._report(COLOCATION_CONFIG_KEY, str(exc))
        self.slo, errors = parse_slo_config(data, self.slo)
        failed = {e.split(":", 1)[0].split(".", 1)[0] for e in errors}
        for key in ("resource-threshold-config", "resource-qos-config", "cpu-burst-config", "system-config"):
            self._report(key, next((e for e in errors if e.startswith(key)), None) if key in failed else None)
        self._report("host-application-config", next((e for e in errors if e.startswith("host-application")), None))
        self.dirty.update(self.cache.nodes)

    # ------------------------------------------------------------------ NodeSLO
    def desired_nodeslo(self, node: NodeState) -> dict[str, Any]:
        """The NodeSLO object ``node`` should have."""
        uid = (node.obj.get("metadata") or {}).get("uid")
        meta: dict[str, Any] = {"name": node.name}
        if uid:
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid}]
        return {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": meta,
            "spec": node_slo_spec(self.slo, node.labels, node.annotations),
        }

    async def sync_nodeslo(self, node: NodeState) -> bool:
        """Create or update the node's NodeSLO when its spec changed; True if written.

        Raises:
            ApiError: the source refused the write.
        """
        desired = self.desired_nodeslo(node)
        current = self.cache.objects.get("NodeSLO", {}).get(node.name)
        if current is not None and current.get("spec") == desired["spec"]:
            return False
        await self.source.create_or_update(desired)
        self.writes.labels("NodeSLO", "ok").inc()
        return True

    async def delete_orphan_nodeslo(self, name: str) -> bool:
        """Delete the NodeSLO of node ``name``, which is gone; True if a delete was sent.

        Skipped when there is no such NodeSLO, or when it is owned by a Node and the source
        garbage-collects owned objects. A 404 (already deleted) counts as done.

        Raises:
            ApiError: the source refused the delete (other than NotFound).
        """
        current = self.cache.objects.get("NodeSLO", {}).get(name)
        if current is None:
            return False
        owners = (current.get("metadata") or {}).get("ownerReferences") or []
        owned = any(isinstance(o, dict) and o.get("kind") == "Node" for o in owners)
        if owned and self.source.owner_gc:
            return False
        with contextlib.suppress(NotFound):  # already deleted: done
            await self.source.delete("NodeSLO", name)
        log.info("node %s is gone: deleted its NodeSLO", name)
        self.writes.labels("NodeSLODelete", "ok").inc()
        return True

    # ------------------------------------------------------------------ batch resources
    def strategy_for(self, node: NodeState) -> dict[str, Any]:
        """The merged colocation strategy of ``node``."""
        return node_strategy(self.colocation, node.labels, node.annotations)

    def compute(self, node: NodeState) -> ReclaimResult:
        """Batch resources ``node`` should have now (reset when colocation is disabled for it)."""
        return self.compute_all(node)[0]

    def compute_all(self, node: NodeState) -> tuple[ReclaimResult, ReclaimResult]:
        """Batch and mid resources ``node`` should have now, from one read of its inputs (both reset when
        colocation is disabled for it; :mod:`app.manager.mid` for the mid formula)."""
        strategy = self.strategy_for(node)
        if not self.colocation.strategy.get("enable") or not strategy.get("enable"):
            return (
                ReclaimResult(reset=True, cpu_message=RESET_MESSAGE, memory_message=RESET_MESSAGE),
                ReclaimResult(reset=True, cpu_message=RESET_MESSAGE, memory_message=RESET_MESSAGE),
            )
        metric = metric_input(self.cache.objects.get("NodeMetric", {}).get(node.name))
        typed = ColocationStrategy.of(strategy)
        node_in = node_input(node.obj, node.allocatable, node.annotations)
        pods = pod_inputs(self.cache, node.name)
        now = self.clock()
        return calculate_batch(typed, node_in, pods, metric, now), calculate_mid(typed, node_in, pods, metric, now)

    def status_patch(
        self, node: NodeState, result: ReclaimResult, mid: ReclaimResult | None = None
    ) -> dict[str, Any] | None:
        """The node status merge patch to send (batch resources, and mid ones when ``mid`` is given), or None
        when no sync is needed (upstream's ``NeedSync`` of the BatchResource and MidResource plugins)."""
        strategy = ColocationStrategy.of(self.strategy_for(node))
        names = (BATCH_CPU, BATCH_MEMORY) + ((MID_CPU, MID_MEMORY) if mid is not None else ())
        old = {r: node.allocatable.get(r) for r in names}
        new: dict[str, int | None] = (
            {BATCH_CPU: None, BATCH_MEMORY: None}
            if result.reset
            else {BATCH_CPU: result.cpu, BATCH_MEMORY: result.memory}
        )
        if mid is not None:
            new.update({MID_CPU: None, MID_MEMORY: None} if mid.reset else {MID_CPU: mid.cpu, MID_MEMORY: mid.memory})
        last = self.last_synced.get(node.name)
        expired = last is None or self.clock() - last > strategy.update_seconds
        changed = any(is_resource_diff(old[r], new[r], strategy.diff_threshold) for r in old)
        if not (expired or changed):
            return None
        values: dict[str, str | None] = {  # the cpu ones are milli-core integers: "3000", not DecimalSI's "3k"
            r: None
            if new[r] is None
            else str(new[r])
            if r in (BATCH_CPU, MID_CPU)
            else format_resource(r, int(new[r] or 0))
            for r in names
        }
        capacity = ((node.obj.get("status") or {}).get("capacity")) or {}
        if all(new[r] is None for r in names) and all(old[r] is None and r not in capacity for r in old):
            self.last_synced[node.name] = self.clock()
            return None  # nothing to remove
        return {"status": {"allocatable": values, "capacity": values}}

    async def sync_node_resources(self, node: NodeState) -> bool:
        """Patch the node's batch resources when needed; True if written.

        Raises:
            ApiError: the source refused the patch.
        """
        if not self.colocation_available:
            return False
        result, mid = self.compute_all(node)
        patch = self.status_patch(node, result, mid)
        if patch is None:
            return False
        messages = (result.cpu_message, result.memory_message, mid.cpu_message, mid.memory_message)
        reasons = dict.fromkeys(r for r in messages if r)  # a shared reason once
        what = "reset" if result.reset else f"batch-cpu={result.cpu} batch-memory={result.memory}"
        if not (result.reset and mid.reset):
            what += ", mid reset" if mid.reset else f", mid-cpu={mid.cpu} mid-memory={mid.memory}"
        log.debug("node %s batch resources: %s (%s)", node.name, what, "; ".join(reasons))
        await self.source.patch("Node", node.name, patch, subresource="status")
        self.round_writes[f"reset ({result.cpu_message})" if result.reset else "updated"] += 1
        self.last_synced[node.name] = self.clock()
        self.writes.labels("NodeStatus", "ok").inc()
        return True

    # ------------------------------------------------------------------ device resources
    async def sync_device_resources(self, node: NodeState) -> bool:
        """Patch the node's device resources (status) and GPU labels (metadata) when they differ from what
        its Device gives; True if anything was written. A malformed Device is logged and the node left alone.

        Raises:
            ApiError: the source refused a patch.
        """
        device = self.cache.objects.get("Device", {}).get(node.name)
        try:
            desired = device_resources(device)
        except DeviceResourceError as exc:
            log.warning("node %s: ignoring its Device: %s", node.name, exc)
            return False
        obj = node.obj
        try:
            capacity = parse_resource_list((obj.get("status") or {}).get("capacity"), field="status.capacity")
        except QuantityError:
            capacity = {}
        status, meta = node_patches(desired, node.allocatable, capacity, node.labels)
        if status is not None:
            log.info("node %s device resources: %s", node.name, status["status"]["allocatable"])
            await self.source.patch("Node", node.name, status, subresource="status")
            self.writes.labels("NodeDeviceResources", "ok").inc()
        if meta is not None:
            log.info("node %s GPU labels: %s", node.name, meta["metadata"]["labels"])
            await self.source.patch("Node", node.name, meta)
            self.writes.labels("NodeDeviceLabels", "ok").inc()
        return status is not None or meta is not None

    # ------------------------------------------------------------------ loop
    async def reconcile(self, names: set[str]) -> None:
        """Reconcile the named nodes; a failed write leaves the node dirty for the next round.

        Each node's batch-resource write is logged at DEBUG; the round's writes are summed up in one INFO
        line (``batch resources: 4998 nodes updated, 2 reset (NodeMetric expired)``), so a 5,000-node cluster
        does not log 5,000 lines at start.
        """
        self.round_writes.clear()
        try:
            await self._reconcile(names)
        finally:
            if self.round_writes:
                log.info("batch resources: %s", summarize_writes(self.round_writes))

    async def _reconcile(self, names: set[str]) -> None:
        for name in sorted(names):
            node = self.cache.nodes.get(name)
            if node is None:
                self.last_synced.pop(name, None)
                try:
                    await self.delete_orphan_nodeslo(name)
                except ApiError as exc:
                    log.warning("deleting NodeSLO of gone node %s failed: %s", name, exc)
                    self.writes.labels("NodeSLODelete", "error").inc()
                    self.dirty.add(name)
                continue
            for sync, what in (
                (self.sync_nodeslo, "NodeSLO"),
                (self.sync_node_resources, "NodeStatus"),
                (self.sync_device_resources, "NodeDeviceResources"),
            ):
                try:
                    await sync(node)
                except ApiError as exc:
                    log.warning("writing %s of node %s failed: %s", what, name, exc)
                    self.writes.labels(what, "error").inc()
                    self.dirty.add(name)

    async def run_once(self, full: bool = False) -> None:
        """Reload the config if it changed, then reconcile the dirty nodes (all nodes if ``full``)."""
        if self.config_changed:
            self.reload_config()
        names = set(self.cache.nodes) | set(self.cache.objects.get("NodeSLO", {})) if full else self.dirty
        self.dirty = set()
        await self.reconcile(names)

    async def run(self) -> None:
        """Wait for the source to be ready, then reconcile until cancelled."""
        while not self.source.ready():
            await asyncio.sleep(0.1)
        last_full = 0.0
        while True:
            now = time.monotonic()
            full = now - last_full >= self.resync_seconds
            if full:
                last_full = now
            await self.run_once(full)
            await asyncio.sleep(self.interval)
