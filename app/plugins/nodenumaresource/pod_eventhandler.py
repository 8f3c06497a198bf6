"""Keeping the cpu holders in step with the cache (upstream ``pod_eventhandler.go``,
``topology_eventhandler.go``), and knowing which nodes have node-side policies.

- A pod with a ``resource-status`` on a node holds its cpuset / NUMA resources there; a pod this
  service reserved keeps its Reserve allocation until its own annotation shows up. A pod deleted,
  terminated or forgotten (its assumption dropped) releases them. A malformed ``resource-status`` is
  logged and ignored (the pod holds nothing here; the rest keeps flowing).
- An active Reservation with a ``resource-status`` holds its cpus (keyed by its reserve pod's uid);
  it releases them when it stops being active.
- ``policy_nodes``: nodes with a cpu-bind policy (label, or kubelet static ``full-pcpus-only``) or a
  NUMA topology policy (label or NRT): only there must a plain pod be looked at.
"""

from __future__ import annotations

import logging
from typing import Any

from app.api.reservation import is_active, reserve_pod_uid
from app.api.topology import NodeTopology
from app.cache.listener import CacheListener
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo
from app.framework.handle import Handle
from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.cpu_manager import CPUManager, PodAllocation
from app.plugins.nodenumaresource.podspec import SpecError, resource_spec, resource_status
from app.plugins.nodenumaresource.topology_options import node_cpu_bind_policy, node_numa_policy

log = logging.getLogger(__name__)


class ReservedCPUs:
    """An active Reservation's cpus on its node (``reserve`` uid is its reserve pod's)."""

    __slots__ = ("cpus", "name", "node", "uid")

    def __init__(self, name: str, uid: str, node: str, cpus: frozenset[int]) -> None:
        self.name, self.uid, self.node, self.cpus = name, uid, node, cpus


class AllocationTracker(CacheListener):
    """See the module docstring."""

    def __init__(self, handle: Handle, manager: CPUManager, on_pod_seen: Any = None) -> None:
        self.handle = handle
        self.manager = manager
        self.reservations: dict[str, ReservedCPUs] = {}
        self.policy_nodes: set[str] = set()
        self._reservation_uids: dict[str, str] = {}
        self._on_pod_seen = on_pod_seen
        handle.add_listener(self)

    # ------------------------------------------------------------------ nodes
    def _check_policies(self, name: str, node: NodeState | None, topo: NodeTopology | None) -> None:
        if node is not None and (
            node_cpu_bind_policy(node.labels, topo) != n.NODE_CPU_BIND_NONE or node_numa_policy(node.labels, topo)
        ):
            self.policy_nodes.add(name)
        else:
            self.policy_nodes.discard(name)

    def on_node(self, name: str, node: NodeState | None) -> None:
        """Track node-side policies; a deleted node's holders are dropped with it."""
        self._check_policies(name, node, self.handle.snapshot.topology(name))
        self.manager.dirty.add(name)
        if node is None:
            self.manager.nodes.pop(name, None)

    # ------------------------------------------------------------------ pods
    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """Account a pod's resource-status; release a deleted, terminated or forgotten pod."""
        if new is None or new.terminated or (old is not None and old.node_name and not new.node_name):
            uid = new.uid if new is not None else old.uid if old is not None else ""
            self.manager.release(uid)
            return
        if self._on_pod_seen is not None:
            self._on_pod_seen(new)
        if not new.node_name or n.ANNOTATION_RESOURCE_STATUS not in new.annotations:
            return
        try:
            status = resource_status(new.annotations)
            exclusive = resource_spec(new.annotations).preferred_cpu_exclusive_policy
        except SpecError as exc:
            log.warning("pod %s: %s; it holds no cpuset here", new.key, exc)
            return
        if status is None or (not status.cpus and not status.numa):
            return
        held = self.manager.get(new.uid)
        alloc = PodAllocation(new.uid, new.key, status.cpus, exclusive, status.numa)
        if held is not None and held[0] == new.node_name and held[1].cpus == alloc.cpus and held[1].numa == alloc.numa:
            return
        self.manager.add(new.node_name, alloc)

    # ------------------------------------------------------------------ other kinds
    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """NodeResourceTopology: re-check the node's policies. Reservation: account its cpus while active."""
        if kind == "NodeResourceTopology":
            self._check_policies(key, self.handle.snapshot.node(key), self.handle.snapshot.topology(key))
            self.manager.dirty.add(key)
            return
        if kind != "Reservation":
            return
        previous = self.reservations.pop(key, None)
        if obj is None or not is_active(obj):
            uid = self._reservation_uids.pop(key, previous.uid if previous is not None else "")
            self.manager.release(uid)  # also a Reserve allocation never written onto the Reservation
            return
        self._reservation_uids[key] = reserve_pod_uid(obj)
        if previous is not None:
            self.manager.release(previous.uid)
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, dict) or n.ANNOTATION_RESOURCE_STATUS not in annotations:
            return  # the placement's own Reserve allocation (keyed by the reserve pod's uid) stays
        try:
            status = resource_status(annotations)
        except SpecError as exc:
            log.warning("reservation %s: %s; it holds no cpuset here", key, exc)
            return
        if status is None:
            return
        uid = reserve_pod_uid(obj)
        node = str((obj.get("status") or {}).get("nodeName", ""))
        self.reservations[key] = ReservedCPUs(key, uid, node, status.cpus)
        self.manager.add(node, PodAllocation(uid, f"reservation/{key}", status.cpus, "", status.numa))

    def reservation_remainder(self, name: str) -> tuple[str, frozenset[int]] | None:
        """(node, cpus of reservation ``name`` no other pod holds): what its owners may take."""
        r = self.reservations.get(name)
        if r is None or not r.cpus:
            return None
        na = self.manager.node(r.node)
        used: set[int] = set()
        for uid, alloc in na.pods.items():
            if uid != r.uid:
                used |= alloc.cpus & r.cpus
        return r.node, r.cpus - used
