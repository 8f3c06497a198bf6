"""The in-memory snapshot cache: nodes, pods (bound, assumed, pending) and every other watched kind.

Events from a source are applied here on the event loop thread; per-node aggregates (requested
resources, pod sets) are updated incrementally, and registered :class:`CacheListener` s (the
plugins) update their own precomputed state in the same call. Request handlers run without
awaiting between reads, so a scheduling cycle always sees one consistent snapshot.

Assume/forget follows kube-scheduler's cache (pkg/scheduler/internal/cache): a pod bound through
us is accounted on its node at once; it stays "assumed" until a watch event shows it bound, and
is forgotten if no event confirms it within the TTL after binding finished.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.api.kinds import object_key
from app.api.topology import NodeTopology, TopologyError, parse_node_resource_topology
from app.cache.encodedobjects import EncodedObjects, UnencodableObject
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeError, NodeState, parse_node
from app.cache.nodetable import NodeTable
from app.cache.podinfo import PodError, PodInfo, parse_pod
from app.cache.quantityfields import ObjectQuantityError, check_quantities
from app.sources.events import Event, EventType

log = logging.getLogger(__name__)

#: Kinds stored encoded (:class:`EncodedObjects`): big, and read after their event only off the hot path.
ENCODED_KINDS = frozenset({"NodeMetric"})

#: kube-scheduler's default time to keep an assumed pod that no watch event confirmed.
DEFAULT_ASSUMED_POD_TTL = 15 * 60.0


class AssumeError(Exception):
    """A pod cannot be assumed (unknown node, or already bound elsewhere)."""


@dataclass(slots=True, eq=False)
class AssumedPod:
    """Book-keeping of one assumed pod: its node and, once binding finished, its expiry (epoch s)."""

    node: str
    deadline: float | None = None


def alloc_column(resource: str) -> str:
    """Name of the NodeTable column holding allocatable of ``resource``."""
    return f"alloc:{resource}"


def requested_column(resource: str) -> str:
    """Name of the NodeTable column holding requested (incl. assumed) of ``resource``."""
    return f"req:{resource}"


def _occupies(pod: PodInfo) -> bool:
    return bool(pod.node_name) and not pod.terminated


class ClusterCache:
    """Snapshot of the cluster, implementing :class:`~app.sources.events.EventSink`.

    Args:
        assumed_pod_ttl: seconds an assumed pod is kept after binding finished without a
            confirming watch event.
        clock: returns epoch seconds (injectable for tests).
    """

    def __init__(
        self, assumed_pod_ttl: float = DEFAULT_ASSUMED_POD_TTL, clock: Callable[[], float] = time.time
    ) -> None:
        self.table = NodeTable()
        self.nodes: dict[str, NodeState] = {}
        self.pods: dict[str, PodInfo] = {}
        #: Raw Pod objects by uid, kept as JSON bytes (each read decodes a fresh copy).
        self.pod_objects = EncodedObjects()
        #: Other kinds by kind, then ``[namespace/]name``; :data:`ENCODED_KINDS` are kept as JSON bytes.
        self.objects: dict[str, MutableMapping[str, dict[str, Any]]] = {}
        self.assumed: dict[str, AssumedPod] = {}
        self.assumed_pod_ttl = assumed_pod_ttl
        self.clock = clock
        self.resources: set[str] = set()
        self._by_name: dict[str, str] = {}
        self._listeners: list[CacheListener] = []
        #: The listeners that override ``on_pod`` (pod events are the most frequent: the others are not called).
        self._pod_listeners: list[CacheListener] = []
        #: Malformed objects refused since start, by kind (``koord_cache_rejected_objects_total{kind}``).
        self.rejected_by_kind: dict[str, int] = {}
        #: Parsed NodeResourceTopology objects by node name (the object's name), valid ones only.
        self.node_topologies: dict[str, NodeTopology] = {}

    # ----------------------------------------------------------------- listeners
    def add_listener(self, listener: CacheListener) -> None:
        """Register ``listener`` and replay the current state into it (nodes, then objects, then pods)."""
        self._listeners.append(listener)
        if getattr(type(listener), "on_pod", None) not in (None, CacheListener.on_pod):
            self._pod_listeners.append(listener)
        for name, node in self.nodes.items():
            listener.on_node(name, node)
        for kind, objs in self.objects.items():
            for key, obj in objs.items():
                listener.on_object(kind, key, obj)
        for pod in self.pods.values():
            listener.on_pod(None, pod)

    # ----------------------------------------------------------------- EventSink
    def apply(self, event: Event) -> None:
        """Apply one watch event; malformed objects are logged and counted, never raised.

        A Node or Pod is parsed before anything changes, so a malformed one (a bad field, a quantity
        beyond int64) leaves the cache exactly as it was. A listener that cannot take an object (its
        own parse fails) is logged and counted the same way; the cache and the other listeners keep
        the object.
        """
        try:
            if event.kind == "Node":
                self._apply_node(event.type, event.obj)
            elif event.kind == "Pod":
                self._apply_pod(event.type, event.obj)
            else:
                self._apply_object(event.kind, event.type, event.obj)
        except (NodeError, PodError, ObjectQuantityError, UnencodableObject, TopologyError) as exc:
            self._reject(event.kind, object_key(event.obj) if isinstance(event.obj, dict) else "?", exc)

    def _reject(self, kind: str, key: str, exc: BaseException) -> None:
        self.rejected_by_kind[kind] = self.rejected_by_kind.get(kind, 0) + 1
        log.warning("ignoring malformed %s %s: %s", kind, key, exc)

    @property
    def rejected_objects(self) -> int:
        """Malformed objects refused since start, every kind together (see :attr:`rejected_by_kind`)."""
        return sum(self.rejected_by_kind.values())

    def _notify(self, kind: str, key: str, call: Callable[[CacheListener], None]) -> None:
        """Call every listener; one that raises is logged and counted as a rejection of the object."""
        for listener in self._listeners:
            try:
                call(listener)
            except Exception as exc:  # a plugin's own parse failed: that plugin skips the object
                self._reject(kind, f"{key} ({type(listener).__name__})", exc)

    def replace(self, kind: str, objects: Iterable[dict[str, Any]]) -> None:
        """Make the cache hold exactly ``objects`` of ``kind`` (deleting the rest), as after a relist.
        ``objects`` is iterated once."""
        keep: set[str] = set()
        for obj in objects:
            if kind == "Pod":
                keep.add(self._pod_uid(obj))
            else:
                keep.add(object_key(obj))
            self.apply(Event(kind, EventType.MODIFIED, obj))
        if kind == "Node":
            gone = [n for n in self.nodes if n not in keep]
            for name in gone:
                self._apply_node(EventType.DELETED, {"metadata": {"name": name}})
        elif kind == "Pod":
            for uid in [u for u in self.pods if u not in keep]:
                self._delete_pod(uid)
        else:
            for key in [k for k in self.objects.get(kind, {}) if k not in keep]:
                self._apply_object(kind, EventType.DELETED, self.objects[kind][key])

    # ----------------------------------------------------------------- nodes
    def _apply_node(self, etype: EventType, obj: dict[str, Any]) -> None:
        if etype == EventType.DELETED:
            name = (obj.get("metadata") or {}).get("name", "")
            old = self.nodes.pop(name, None)
            if old is None:
                return
            self.table.remove(name)
            self._notify("Node", name, lambda listener: listener.on_node(name, None))
            return
        node = parse_node(obj)
        old = self.nodes.get(node.name)
        node.row = self.table.add(node.name)
        if old is not None:
            node.requested, node.pods = old.requested, old.pods
        else:
            # Pods that arrived before their node are accounted now.
            for uid, pod in self.pods.items():
                if pod.node_name == node.name and not pod.terminated:
                    node.pods.add(uid)
                    _add_into(node.requested, pod.requests)
        self.nodes[node.name] = node
        self._write_node_columns(node)
        self._notify("Node", node.name, lambda listener: listener.on_node(node.name, node))

    def _write_node_columns(self, node: NodeState) -> None:
        row = node.row
        for res in set(node.allocatable) | set(node.requested) | self.resources:
            self._ensure_resource(res)
            self.table.column(alloc_column(res))[row] = node.allocatable.get(res, 0)
            self.table.column(requested_column(res))[row] = node.requested.get(res, 0)

    def _ensure_resource(self, res: str) -> None:
        if res not in self.resources:
            self.resources.add(res)
            self.table.column(alloc_column(res))
            self.table.column(requested_column(res))
            for node in self.nodes.values():
                if node.row >= 0:
                    self.table.column(alloc_column(res))[node.row] = node.allocatable.get(res, 0)
                    self.table.column(requested_column(res))[node.row] = node.requested.get(res, 0)

    # ----------------------------------------------------------------- pods
    def _pod_uid(self, obj: dict[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if uid:
            return str(uid)
        return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"

    def _apply_pod(self, etype: EventType, obj: dict[str, Any]) -> None:
        uid = self._pod_uid(obj)
        if etype == EventType.DELETED:
            self._delete_pod(uid)
            return
        new = parse_pod(obj)
        new.uid = uid
        # encoded before anything changes: an unencodable object is refused whole. A pending pod's version is
        # held as plain JSON (not compressed with the young ones): its binding replaces it soon
        self.pod_objects.put(uid, obj, held=not new.node_name)
        assumed = self.assumed.get(uid)
        if assumed is not None:
            if new.node_name:
                del self.assumed[uid]  # confirmed by the watch
            else:
                new = new.with_node_name(assumed.node)  # not yet observed bound: keep our assumption
        self._set_pod(uid, new)

    def _set_pod(self, uid: str, new: PodInfo | None) -> None:
        old = self.pods.get(uid)
        # most updates (status, annotations, the kubelet's reports) leave what the pod takes where it is
        same_place = (
            old is not None
            and new is not None
            and old.node_name == new.node_name
            and old.requests == new.requests
            and _occupies(old) == _occupies(new)
        )
        if old is not None and _occupies(old) and not same_place:
            self._unaccount(uid, old)
        if new is None:
            self.pods.pop(uid, None)
            if old is not None:
                self._by_name.pop(old.key, None)
        else:
            self.pods[uid] = new
            self._by_name[new.key] = uid
            if _occupies(new) and not same_place:
                self._account(uid, new)
        for listener in self._pod_listeners:  # _notify, inlined: four pod events per scheduled pod
            try:
                listener.on_pod(old, new)
            except Exception as exc:  # a plugin's own parse failed: that plugin skips the object
                self._reject("Pod", f"{uid} ({type(listener).__name__})", exc)

    def _delete_pod(self, uid: str) -> None:
        self.assumed.pop(uid, None)
        self.pod_objects.pop(uid, None)
        if uid in self.pods:
            self._set_pod(uid, None)

    def _account(self, uid: str, pod: PodInfo) -> None:
        node = self.nodes.get(pod.node_name)
        if node is None:
            return
        node.pods.add(uid)
        _add_into(node.requested, pod.requests)
        self._write_requested(node, pod.requests)

    def _unaccount(self, uid: str, pod: PodInfo) -> None:
        node = self.nodes.get(pod.node_name)
        if node is None or uid not in node.pods:
            return
        node.pods.discard(uid)
        _add_into(node.requested, {k: -v for k, v in pod.requests.items()})
        self._write_requested(node, pod.requests)

    def _write_requested(self, node: NodeState, changed: dict[str, int]) -> None:
        for res in changed:
            self._ensure_resource(res)
            self.table.column(requested_column(res))[node.row] = node.requested.get(res, 0)

    # ----------------------------------------------------------------- other kinds
    def _apply_object(self, kind: str, etype: EventType, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        store = self.objects.get(kind)
        if store is None:
            store = self.objects[kind] = EncodedObjects() if kind in ENCODED_KINDS else {}
        if etype == EventType.DELETED:
            if store.pop(key, None) is None:
                return
            if kind == "NodeResourceTopology":
                self.node_topologies.pop(key, None)
            self._notify(kind, key, lambda listener: listener.on_object(kind, key, None))
            return
        check_quantities(kind, obj)  # before storing: a bad object is skipped whole
        if kind == "NodeResourceTopology":
            self.node_topologies[key] = parse_node_resource_topology(obj)
        store[key] = obj
        self._notify(kind, key, lambda listener: listener.on_object(kind, key, obj))

    # ----------------------------------------------------------------- lookups
    def find_pod(self, uid: str = "", namespace: str = "", name: str = "") -> PodInfo | None:
        """A cached pod by uid, else by ``namespace/name``."""
        if uid and uid in self.pods:
            return self.pods[uid]
        found = self._by_name.get(f"{namespace or 'default'}/{name}")
        return self.pods.get(found) if found else None

    def assumed_on(self, node: str) -> list[PodInfo]:
        """Pods assumed on ``node`` and not yet confirmed by a watch event."""
        return [self.pods[u] for u, a in self.assumed.items() if a.node == node and u in self.pods]

    def counts(self) -> dict[str, int]:
        """Object counts per kind (Node, Pod, AssumedPod and every other cached kind)."""
        out = {"Node": len(self.nodes), "Pod": len(self.pods), "AssumedPod": len(self.assumed)}
        for kind, objs in self.objects.items():
            out[kind] = len(objs)
        return out

    # ----------------------------------------------------------------- assume / forget
    def assume(self, pod: PodInfo, node: str) -> PodInfo:
        """Account ``pod`` on ``node`` now, before the API server confirms the binding.

        Returns the cached PodInfo as assumed; ``self.assumed[uid]`` is the assumption's entry
        (pass it to :meth:`forget` so a failed binding removes only its own assumption).

        Raises:
            AssumeError: ``node`` is not in the cache; the pod is already assumed (its binding is in
                flight, or sent and not yet confirmed); or it is already bound to a node.
        """
        if node not in self.nodes:
            raise AssumeError(f"node {node} not found")
        uid = pod.uid or f"{pod.namespace}/{pod.name}"
        current = self.pods.get(uid) or self.find_pod(namespace=pod.namespace, name=pod.name)
        if current is not None:
            uid = current.uid
            entry = self.assumed.get(uid)
            if entry is not None and entry.deadline is None:
                raise AssumeError(
                    f"pod {current.key} is already assumed on node {entry.node!r}: its binding is in flight"
                )
            if current.node_name:
                raise AssumeError(f"pod {current.key} is already assigned to node {current.node_name!r}")
            pod = current
        assumed = pod.with_node_name(node)
        assumed.uid = uid
        self.assumed[uid] = AssumedPod(node=node)
        self._set_pod(uid, assumed)
        return assumed

    def finish_binding(self, uid: str) -> None:
        """Start the expiry clock of assumed pod ``uid`` (binding was sent successfully)."""
        entry = self.assumed.get(uid)
        if entry is not None:
            entry.deadline = self.clock() + self.assumed_pod_ttl

    def forget(self, uid: str, entry: AssumedPod | None = None) -> None:
        """Undo an assumption: the pod goes back to pending (e.g. the bind call failed).

        With ``entry`` (the assumption a binding made), nothing happens unless that very assumption
        is still in place: a binding never removes a pod another binding placed or a watch event
        confirmed.
        """
        current = self.assumed.get(uid)
        if current is None or (entry is not None and current is not entry):
            return
        del self.assumed[uid]
        pod = self.pods.get(uid)
        if pod is not None:
            self._set_pod(uid, pod.with_node_name(""))

    def cleanup_expired(self) -> int:
        """Forget assumed pods whose TTL passed without a confirming event; return how many."""
        now = self.clock()
        expired = [u for u, a in self.assumed.items() if a.deadline is not None and a.deadline <= now]
        for uid in expired:
            log.info("assumed pod %s expired without confirmation; forgetting it", uid)
            self.forget(uid)
        return len(expired)

    # ----------------------------------------------------------------- arrays
    def allocatable_and_requested(self, resource: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Allocatable and requested of ``resource`` at ``rows`` (zeros for unknown resources)."""
        if resource not in self.resources:
            zeros = np.zeros(len(rows), dtype=np.int64)
            return zeros, zeros
        return (
            self.table.column(alloc_column(resource))[rows],
            self.table.column(requested_column(resource))[rows],
        )


def _add_into(into: dict[str, int], delta: dict[str, int]) -> None:
    for k, v in delta.items():
        into[k] = into.get(k, 0) + v
