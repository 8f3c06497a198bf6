"""The quota tree and its accounting (upstream ``core/group_quota_manager.go``, default tree only).

State is updated on cache events:

- quota add/update/delete marks the structure dirty; the next read rebuilds the tree, the
  calculators and the per-quota sums from every cached pod in one pass (O(pods + quotas)), so a
  burst of quota events costs one rebuild;
- pod events, when the structure is clean, move the pod's masked request (and, if assigned, its
  used) along the path to the root: O(depth x resources);
- node events keep the cluster's allocatable total.

Runtime is computed lazily top-down along a quota's path (:meth:`QuotaManager.refresh_runtime`),
reusing each parent's calculator result until one of its inputs or its total changes.

Semantics: request = own pods (pending and assigned) + children's requests capped at their max,
raised to min for a quota that does not lend; used = assigned pods, propagated to the root; the
root's total = cluster allocatable - used(system) - used(default). The system and default quotas
are not part of the root's calculator: their runtime is their max. Terminated pods count nowhere.
"""

from __future__ import annotations

import logging
from typing import Any

from app.api import elasticquota as n
from app.cache.podinfo import PodInfo
from app.plugins.elasticquota.args import ElasticQuotaArgs
from app.plugins.elasticquota.calculator import ChildQuota, RuntimeCalculator
from app.plugins.elasticquota.quotainfo import PodEntry, QuotaInfo, quota_from_object
from app.plugins.elasticquota.resourcelist import (
    ResourceList,
    add,
    is_zero,
    mask,
    subtract,
)

log = logging.getLogger(__name__)


def _clamp(rl: ResourceList) -> ResourceList:
    return {k: (v if v > 0 else 0) for k, v in rl.items()}


def _same_entry_inputs(a: PodInfo, b: PodInfo) -> bool:
    """``QuotaManager._entry`` gives equal entries for ``a`` and ``b`` under one tree: it reads only the
    terminated flag, whether a node is set, the labels (quota name, preemptible), namespace, name,
    priority and requests."""
    return (
        a.terminated == b.terminated
        and bool(a.node_name) == bool(b.node_name)
        and a.namespace == b.namespace
        and a.name == b.name
        and a.priority == b.priority
        and a.requests == b.requests
        and a.labels == b.labels
    )


class QuotaManager:
    """Quotas by name, their calculators, the pods they account and the cluster total.

    Args:
        args: the plugin args (reserved quotas' max, min scaling, runtime on/off).
    """

    def __init__(self, args: ElasticQuotaArgs) -> None:
        self.args = args
        self.objects: dict[str, dict[str, Any]] = {}
        self.quotas: dict[str, QuotaInfo] = {}
        self.calculators: dict[str, RuntimeCalculator] = {}
        self.entries: dict[str, PodEntry] = {}
        self.node_alloc: dict[str, ResourceList] = {}
        self.cluster_total: ResourceList = {}
        self.namespace_index: dict[str, str] = {}
        self.dirty = True
        self._pods: dict[str, PodInfo] = {}

    # ------------------------------------------------------------------ inputs
    @property
    def active(self) -> bool:
        """At least one ElasticQuota other than the root/system/default ones exists."""
        return any(name not in n.RESERVED_QUOTA_NAMES for name in self.objects)

    def set_quota_object(self, name: str, obj: dict[str, Any] | None) -> None:
        """An ElasticQuota was added/changed (``obj``) or deleted (None): rebuild on the next read."""
        if obj is None:
            self.objects.pop(name, None)
        else:
            self.objects[name] = obj
        self.dirty = True

    def set_node(self, name: str, allocatable: ResourceList | None) -> None:
        """Node ``name`` has ``allocatable`` (None: deleted); the cluster total follows."""
        old = self.node_alloc.pop(name, None)
        if old is not None:
            self.cluster_total = subtract(self.cluster_total, old)
        if allocatable is not None:
            self.node_alloc[name] = dict(allocatable)
            self.cluster_total = add(self.cluster_total, allocatable)

    def set_pod(self, uid: str, pod: PodInfo | None) -> None:
        """Pod ``uid`` changed (None: deleted): move its request/used between quotas incrementally.

        While the tree stands, ``entries[uid]`` is the entry of ``_pods[uid]`` (both are set together here
        and by the rebuild), so a new version that agrees with the held one on all an entry is made of (see
        :func:`_same_entry_inputs`: the bound and Running updates of a pod) changes nothing (issue 29).
        """
        if pod is None:
            held = self._pods.pop(uid, None)
        else:
            held = self._pods.get(uid)
            self._pods[uid] = pod
        if self.dirty:
            return
        if held is not None and pod is not None and _same_entry_inputs(held, pod):
            return
        new = self._entry(pod) if pod is not None else None
        old = self.entries.get(uid)
        if old == new:
            return
        if old is not None:
            self._account(uid, old, -1)
        if new is not None:
            self._account(uid, new, +1)

    # ------------------------------------------------------------------ association
    def quota_name_of(self, labels: dict[str, str], namespace: str) -> str:
        """The quota a pod belongs to (``getPodAssociateQuotaName``): its ``quota.scheduling.koordinator.sh/name``
        label if that quota exists, else a quota named like its namespace in that namespace, else the quota
        whose ``namespaces`` annotation lists the namespace, else the default quota."""
        self.ensure()
        name = n.pod_quota_label(labels)
        if not name:
            same = self.quotas.get(namespace)
            if same is not None and same.namespace == namespace:
                name = namespace
            else:
                name = self.namespace_index.get(namespace, n.DEFAULT_QUOTA_NAME)
        if name in self.quotas and name != n.ROOT_QUOTA_NAME:
            return name
        return n.DEFAULT_QUOTA_NAME

    def _entry(self, pod: PodInfo) -> PodEntry | None:
        if pod.terminated:
            return None
        quota = self.quota_name_of(pod.labels, pod.namespace)
        info = self.quotas[quota]
        return PodEntry(
            quota=quota,
            request=mask(pod.requests, info.max),
            assigned=bool(pod.node_name),
            non_preemptible=n.is_pod_non_preemptible(pod.labels),
            namespace=pod.namespace,
            name=pod.name,
            priority=pod.priority or 0,
        )

    # ------------------------------------------------------------------ propagation
    def _account(self, uid: str, entry: PodEntry, sign: int) -> None:
        info = self.quotas[entry.quota]
        req = entry.request if sign > 0 else {k: -v for k, v in entry.request.items()}
        np_req = req if entry.non_preemptible else {}
        if sign > 0:
            info.pods[uid] = entry
            self.entries[uid] = entry
        else:
            info.pods.pop(uid, None)
            self.entries.pop(uid, None)
        self._add_request(info, req, np_req)
        if entry.assigned:
            self._add_used(info, req, np_req)

    def _add_request(self, info: QuotaInfo, delta: ResourceList, np_delta: ResourceList) -> None:
        """``recursiveUpdateGroupTreeWithDeltaRequest``: own pods' delta at ``info``, capped deltas above."""
        info.self_request = _clamp(add(info.self_request, delta))
        info.self_np_request = _clamp(add(info.self_np_request, np_delta))
        cur: QuotaInfo | None = info
        seen: set[str] = set()
        while cur is not None and cur.name not in seen:
            seen.add(cur.name)
            cur.np_request = _clamp(add(cur.np_request, np_delta))
            if cur.name == n.ROOT_QUOTA_NAME:
                cur.request = _clamp(add(cur.request, delta))
                return
            old_limited = cur.limited_request()
            cur.child_request = _clamp(add(cur.child_request, delta))
            cur.request = cur.real_request()
            new_limited = cur.limited_request()
            delta = subtract(new_limited, old_limited)
            calc = self.calculators.get(cur.parent)
            if calc is not None:
                calc.set_request(cur.name, new_limited)
            if is_zero(delta) and is_zero(np_delta):
                return
            cur = self.quotas.get(cur.parent)

    def _add_used(self, info: QuotaInfo, delta: ResourceList, np_delta: ResourceList) -> None:
        """``updateGroupDeltaUsedNoLock``: used of the quota and of every ancestor."""
        info.self_used = _clamp(add(info.self_used, delta))
        info.self_np_used = _clamp(add(info.self_np_used, np_delta))
        for cur in self.path_to_root(info.name):
            cur.used = _clamp(add(cur.used, delta))
            cur.np_used = _clamp(add(cur.np_used, np_delta))

    def path_to_root(self, name: str) -> list[QuotaInfo]:
        """``getCurToAllParentGroupQuotaInfoNoLock``: the quota, its parent, ... up to the root
        (shorter when an ancestor is missing or the parents form a cycle)."""
        out: list[QuotaInfo] = []
        seen: set[str] = set()
        cur = self.quotas.get(name)
        while cur is not None and cur.name not in seen:
            out.append(cur)
            seen.add(cur.name)
            if cur.name == n.ROOT_QUOTA_NAME:
                break
            cur = self.quotas.get(cur.parent)
        return out

    # ------------------------------------------------------------------ rebuild
    def ensure(self) -> None:
        """Rebuild the tree if a quota changed since the last read."""
        if self.dirty:
            self._rebuild()

    def _reserved(self, name: str, max_: ResourceList) -> QuotaInfo:
        obj = self.objects.get(name)
        info = QuotaInfo(name=name, namespace=self.args.quota_group_namespace, max=dict(max_))
        if obj is not None:
            try:
                spec = quota_from_object(obj)
            except n.QuotaSpecError:
                return info
            if spec.max:
                info.max = spec.max
            info.namespace = spec.namespace or info.namespace
        info.shared_weight = dict(info.max)
        return info

    def _rebuild(self) -> None:
        self.dirty = False
        quotas: dict[str, QuotaInfo] = {
            n.ROOT_QUOTA_NAME: QuotaInfo(
                name=n.ROOT_QUOTA_NAME,
                namespace=self.args.quota_group_namespace,
                parent="",
                is_parent=True,
                allow_lent=False,
            ),
            n.SYSTEM_QUOTA_NAME: self._reserved(n.SYSTEM_QUOTA_NAME, self.args.system_quota_group_max),
            n.DEFAULT_QUOTA_NAME: self._reserved(n.DEFAULT_QUOTA_NAME, self.args.default_quota_group_max),
        }
        for name, obj in self.objects.items():
            if name in n.RESERVED_QUOTA_NAMES:
                continue
            try:
                quotas[name] = quota_from_object(obj)
            except n.QuotaSpecError as exc:
                log.warning("ignoring ElasticQuota %s: %s", name, exc)
        self.namespace_index = {}
        for name in sorted(quotas):
            for ns in quotas[name].namespaces:
                self.namespace_index.setdefault(ns, name)
        for info in quotas.values():
            parent = quotas.get(info.parent)
            if parent is not None and info.name != n.ROOT_QUOTA_NAME:
                parent.children.add(info.name)
        self.quotas = quotas
        self.calculators = {}
        all_keys: set[str] = set()
        for info in quotas.values():
            if info.name not in n.RESERVED_QUOTA_NAMES:
                all_keys |= set(info.max)
        for info in quotas.values():
            kids = [c for c in info.children if c not in n.RESERVED_QUOTA_NAMES]
            if not kids and info.name != n.ROOT_QUOTA_NAME:
                continue
            calc = RuntimeCalculator(info.name)
            calc.set_keys(all_keys if info.name == n.ROOT_QUOTA_NAME else set(info.max))
            self.calculators[info.name] = calc
        # Own pods per quota.
        self.entries = {}
        for uid, pod in self._pods.items():
            entry = self._entry(pod)
            if entry is None:
                continue
            self.entries[uid] = entry
            info = quotas[entry.quota]
            info.pods[uid] = entry
            info.self_request = add(info.self_request, entry.request)
            if entry.non_preemptible:
                info.self_np_request = add(info.self_np_request, entry.request)
            if entry.assigned:
                info.self_used = add(info.self_used, entry.request)
                if entry.non_preemptible:
                    info.self_np_used = add(info.self_np_used, entry.request)
        # Children before parents.
        for info in sorted(quotas.values(), key=lambda q: -len(self.path_to_root(q.name))):
            child_limited: ResourceList = {}
            used, np_used, np_req = dict(info.self_used), dict(info.self_np_used), dict(info.self_np_request)
            for c in info.children:
                child = quotas[c]
                child_limited = add(child_limited, child.limited_request())
                used = add(used, child.used)
                np_used = add(np_used, child.np_used)
                np_req = add(np_req, child.np_request)
            info.used, info.np_used, info.np_request = used, np_used, np_req
            if info.name == n.ROOT_QUOTA_NAME:  # upstream never fills the root's childRequest
                info.request = add(info.self_request, child_limited)
            else:
                info.child_request = add(info.self_request, child_limited)
                info.request = info.real_request()
        for name, calc in self.calculators.items():
            for c in quotas[name].children:
                if c in n.RESERVED_QUOTA_NAMES:
                    continue
                child = quotas[c]
                calc.set_child(c, ChildQuota(child.limited_request(), child.min, child.shared_weight, child.allow_lent))

    # ------------------------------------------------------------------ runtime
    def root_total(self) -> ResourceList:
        """Cluster allocatable minus the system and default quotas' used."""
        total = dict(self.cluster_total)
        for name in (n.SYSTEM_QUOTA_NAME, n.DEFAULT_QUOTA_NAME):
            info = self.quotas.get(name)
            if info is not None:
                total = subtract(total, info.used)
        return total

    def refresh_runtime(self, name: str) -> ResourceList | None:
        """Recompute the runtime of ``name`` and its ancestors (``RefreshRuntime``); None for unknown quotas.

        Returns the runtime masked to the quota's max names; the unmasked one stays on the quota.
        """
        self.ensure()
        info = self.quotas.get(name)
        if info is None:
            return None
        if name == n.ROOT_QUOTA_NAME:
            info.runtime = self.root_total()
            return dict(info.runtime)
        if name in (n.SYSTEM_QUOTA_NAME, n.DEFAULT_QUOTA_NAME):
            info.runtime = dict(info.max)
            return dict(info.max)
        path = self.path_to_root(name)
        reaches_root = path[-1].name == n.ROOT_QUOTA_NAME
        total = self.root_total() if reaches_root else {}
        for q in reversed(path):
            if q.name == n.ROOT_QUOTA_NAME:
                continue
            calc = self.calculators.get(q.parent)
            if calc is None:  # orphan: its parent is missing
                q.runtime, q.auto_min = {}, dict(q.min)
                total = {}
                continue
            runtime = calc.compute(total, self.args.enable_min_quota_scale)
            q.runtime = dict(runtime.get(q.name, {}))
            q.auto_min = dict(calc.auto_min.get(q.name, q.min))
            q.runtime_version = calc.version
            total = q.runtime
        return mask(info.runtime, info.max)

    def refresh_all(self) -> None:
        """Refresh the runtime of every quota (each parent's calculator runs at most once)."""
        self.ensure()
        for name in self.quotas:
            self.refresh_runtime(name)

    def used_limit(self, info: QuotaInfo) -> ResourceList:
        """``getQuotaInfoUsedLimit``: runtime when runtime quota is enabled, else max."""
        return info.runtime if self.args.enable_runtime_quota else info.max
