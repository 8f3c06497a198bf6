"""What plugins may use from the framework: kube-scheduler's ``framework.Handle``.

A plugin gets one :class:`Handle` at construction and reaches the cluster only through it:

- ``handle.snapshot``: a read-only :class:`SnapshotLister` over the cache (nodes, pods, the pod
  objects, other kinds by name, the node table's columns), as upstream's ``SnapshotSharedLister``;
- ``handle.add_listener``: event hooks on cache changes, as upstream's ``SharedInformerFactory``
  event handlers (the listener is replayed the current state at once);
- ``handle.client``: the API client (:class:`~app.sources.base.ClusterClient`, the source's writes), as upstream's
  ``ClientSet``: PreBind plugins patch pods through it themselves;
- ``handle.waiting_pods``: the pods held at Permit (:class:`~app.framework.waiting.WaitingPods`),
  as upstream's ``GetWaitingPod`` / ``IterateOverWaitingPods`` / ``RejectWaitingPod``;
- ``handle.now()``: the clock (epoch seconds), injectable in tests;
- ``handle.has_synced()``: whether the first full list of every kind is in (background loops wait for it);
- ``handle.is_leader()``: whether this replica does the cluster writes of background loops (status
  writes, evictions), as only the leading koord-scheduler runs its controllers upstream;
- ``handle.framework``: the framework that built the plugins (set by it), for a plugin that schedules
  objects of its own through every plugin (the Reservation plugin places reserve pods), as upstream's
  ``frameworkext.ExtendedHandle`` reaches the scheduler.

Mirrors k8s.io/kubernetes/pkg/scheduler/framework/interface.go (``Handle``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from app.api.topology import NodeTopology
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.nodetable import NodeTable
from app.cache.podinfo import PodInfo
from app.cache.snapshot import ClusterCache
from app.framework.waiting import WaitingPods
from app.sources.base import ClusterClient


class NoClient(ClusterClient):
    """The :class:`~app.sources.base.ClusterClient` of a handle built without one (a plugin's unit
    test): every write raises :class:`~app.client.errors.MethodNotAllowed`."""

    description = "a handle without an API client"


class SnapshotLister:
    """Read-only view of the snapshot cache for plugins (upstream ``SnapshotSharedLister``).

    Everything returned is the cache's own object, shared and not copied: plugins must not change
    it. Lookups are O(1); nothing here awaits, so one request sees one consistent snapshot.
    """

    __slots__ = ("_cache",)

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache

    @property
    def nodes(self) -> Mapping[str, NodeState]:
        """Every node by name."""
        return self._cache.nodes

    def node(self, name: str) -> NodeState | None:
        """Node ``name``, or None."""
        return self._cache.nodes.get(name)

    @property
    def table(self) -> NodeTable:
        """The node table: one row per node, numpy columns plugins add and fill (``table.column(key)``)."""
        return self._cache.table

    def row(self, name: str) -> int | None:
        """The node's row in :attr:`table`, or None when unknown."""
        return self._cache.table.row(name)

    @property
    def pods(self) -> Mapping[str, PodInfo]:
        """Every pod (bound, assumed, pending) by uid."""
        return self._cache.pods

    def pod(self, uid: str) -> PodInfo | None:
        """Pod ``uid``, or None."""
        return self._cache.pods.get(uid)

    def pod_object(self, uid: str) -> dict[str, Any] | None:
        """The v1 Pod object of ``uid`` as last received (JSON-shaped dict), or None."""
        return self._cache.pod_objects.get(uid)

    def in_flight(self, uid: str) -> bool:
        """True while a binding cycle holds pod ``uid`` assumed and has not yet written its Binding (the
        pod's ``node_name`` is then the assumed node, not a bound one)."""
        entry = self._cache.assumed.get(uid)
        return entry is not None and entry.deadline is None

    def topology(self, name: str) -> NodeTopology | None:
        """The parsed NodeResourceTopology of node ``name`` (its CPU layout), or None when it reports none."""
        return self._cache.node_topologies.get(name)

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """Objects of another kind (``NodeMetric``, ``ElasticQuota``, ...) by ``[namespace/]name``."""
        return self._cache.objects.get(kind, {})

    def allocatable_and_requested(
        self, resource: str, rows: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """int64 allocatable and requested (assumed pods included) of ``resource`` at ``rows``
        (milli-cores for cpu-like resources, base units otherwise; zeros for unknown resources)."""
        return self._cache.allocatable_and_requested(resource, rows)


class Handle:
    """What plugins may use from the framework (see the module docstring).

    Args:
        cache: the snapshot cache the lister reads and listeners register with.
        client: the API client (the source); None gives :class:`NoClient`, whose writes raise.
        waiting_pods: the Permit waiting map (a new one when None; the framework shares it).
        synced: whether the source has listed every kind once (the source's ``ready``); None: always.
        leading: whether this replica leads (:class:`app.sources.leaderlease.LeaseFollower`); None: always.
    """

    def __init__(
        self,
        cache: ClusterCache,
        client: ClusterClient | None = None,
        waiting_pods: WaitingPods | None = None,
        synced: Callable[[], bool] | None = None,
        leading: Callable[[], bool] | None = None,
    ) -> None:
        self._cache = cache
        self.snapshot = SnapshotLister(cache)
        self.client: ClusterClient = client if client is not None else NoClient()
        self.waiting_pods = waiting_pods if waiting_pods is not None else WaitingPods()
        self._synced = synced
        self._leading = leading
        #: The :class:`~app.framework.runtime.Framework` using this handle (None until it is built).
        self.framework: Any = None

    def has_synced(self) -> bool:
        """True once the source delivered its first full list of every kind (upstream ``HasSynced``)."""
        return self._synced() if self._synced is not None else True

    def is_leader(self) -> bool:
        """True when this replica should do background cluster writes: always for a single replica, else
        only while the kube-scheduler beside it holds the leader Lease. Verbs are answered either way."""
        return self._leading() if self._leading is not None else True

    def now(self) -> float:
        """Current time in epoch seconds (the cache's clock)."""
        return self._cache.clock()

    def add_listener(self, listener: CacheListener) -> None:
        """Call ``listener`` on every cache change from now on, after replaying the current state into it."""
        self._cache.add_listener(listener)
