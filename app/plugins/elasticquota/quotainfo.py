"""One quota's spec and its accounting (upstream ``core/quota_info.go`` QuotaInfo / QuotaCalculateInfo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.api import elasticquota as n
from app.plugins.elasticquota.resourcelist import ResourceList


@dataclass(slots=True)
class PodEntry:
    """A pod as its quota accounts it.

    Attributes:
        quota: the quota it is associated with.
        request: its requests masked to the quota's max names (internal units).
        assigned: bound (or assumed) to a node and not terminated: counts as used.
        non_preemptible: labelled ``preemptible: "false"``.
        namespace, name: identity (the pod cache key is ``namespace/name`` upstream).
        priority: ``spec.priority`` (0 when unset).
    """

    quota: str
    request: ResourceList
    assigned: bool
    non_preemptible: bool
    namespace: str
    name: str
    priority: int


@dataclass(slots=True)
class QuotaInfo:
    """A quota of the tree with its spec (from the object) and calculated state.

    Spec: ``max``, ``min``, ``shared_weight`` (ResourceLists), ``parent``, ``is_parent``,
    ``allow_lent``, ``tree_id``, ``namespaces`` (the ``namespaces`` annotation).
    State (per resource, internal units): ``self_request``/``self_used`` (its own pods),
    ``child_request`` (own pods + children's capped requests), ``request`` (child_request, raised to
    min when the quota does not lend), ``used`` (own + descendants' assigned pods), the
    non-preemptible counterparts, ``runtime`` and ``auto_min`` (from the parent's calculator).
    """

    name: str
    namespace: str = ""
    parent: str = n.ROOT_QUOTA_NAME
    is_parent: bool = False
    allow_lent: bool = True
    tree_id: str = ""
    max: ResourceList = field(default_factory=dict)
    min: ResourceList = field(default_factory=dict)
    shared_weight: ResourceList = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    children: set[str] = field(default_factory=set)
    self_request: ResourceList = field(default_factory=dict)
    self_used: ResourceList = field(default_factory=dict)
    self_np_request: ResourceList = field(default_factory=dict)
    self_np_used: ResourceList = field(default_factory=dict)
    child_request: ResourceList = field(default_factory=dict)
    request: ResourceList = field(default_factory=dict)
    used: ResourceList = field(default_factory=dict)
    np_request: ResourceList = field(default_factory=dict)
    np_used: ResourceList = field(default_factory=dict)
    runtime: ResourceList = field(default_factory=dict)
    auto_min: ResourceList = field(default_factory=dict)
    runtime_version: int = 0
    pods: dict[str, PodEntry] = field(default_factory=dict)

    def limited_request(self) -> ResourceList:
        """``getLimitRequestNoLock``: request with each dimension capped at max (when max has it)."""
        out = dict(self.request)
        for k, v in out.items():
            cap = self.max.get(k)
            if cap is not None and v > cap:
                out[k] = cap
        return out

    def real_request(self) -> ResourceList:
        """Request reported for ``child_request``: raised to min per dimension when not lending."""
        if self.allow_lent:
            return dict(self.child_request)
        out = dict(self.child_request)
        for k, v in self.min.items():
            if v > out.get(k, 0):
                out[k] = v
        return out


def quota_from_object(obj: dict[str, Any]) -> QuotaInfo:
    """A :class:`QuotaInfo` (spec only) from an ElasticQuota object (``NewQuotaInfoFromQuota``).

    The object is read by :func:`app.api.elasticquota.parse_elastic_quota`; the shared weight is
    the ``shared-weight`` annotation or ``max`` (``GetSharedWeight``).

    Raises:
        QuotaSpecError: no name, or ``spec.min``/``spec.max`` are not ResourceLists of valid quantities.
    """
    view = n.parse_elastic_quota(obj)
    return QuotaInfo(
        name=view.name,
        namespace=view.namespace,
        parent=view.parent,
        is_parent=view.is_parent,
        allow_lent=view.allow_lent_resource,
        tree_id=view.tree_id,
        max=view.max,
        min=view.min,
        shared_weight=n.shared_weight(obj, view.max),
        namespaces=view.namespaces,
    )
