"""The quota topology the ElasticQuota webhooks check against, built from the cache's ElasticQuotas.

Follows ``pkg/webhook/elasticquota/quota_topology.go`` and ``quota_topology_check.go``: the
checks and their messages are upstream's; a parent-chain cycle check is added (upstream has none).
"""

from __future__ import annotations

from typing import Any

from app.api import elasticquota as n
from app.api.elasticquota import ElasticQuotaView
from app.api.quantity import QuantityError, format_resource, parse_resource_list
from app.cache.snapshot import ClusterCache
from app.plugins.elasticquota.resourcelist import ResourceList, add, go_list, less_equal_completely


class QuotaCheckError(ValueError):
    """A quota fails a webhook check; the message is upstream's."""


def parse_quota(obj: dict[str, Any]) -> ElasticQuotaView:
    """The webhook's view of an ElasticQuota object (:func:`app.api.elasticquota.parse_elastic_quota`).

    Raises:
        QuotaCheckError: no name, or min/max are not valid ResourceLists.
    """
    try:
        return n.parse_elastic_quota(obj)
    except n.QuotaSpecError as exc:
        raise QuotaCheckError(str(exc)) from None


class QuotaTopology:
    """Quotas by name, children by parent and namespace bindings, from ``cache.objects["ElasticQuota"]``.

    Malformed stored quotas are skipped.
    """

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.quotas: dict[str, ElasticQuotaView] = {}
        self.children: dict[str, set[str]] = {n.ROOT_QUOTA_NAME: set()}
        self.namespace_to_quota: dict[str, str] = {}
        for obj in cache.objects.get("ElasticQuota", {}).values():
            try:
                q = parse_quota(obj)
            except QuotaCheckError:
                continue
            self.quotas[q.name] = q
            self.children.setdefault(q.name, set())
            self.children.setdefault(q.parent, set()).add(q.name)
            for ns in q.namespaces:
                self.namespace_to_quota[ns] = q.name

    # ------------------------------------------------------------------ pods
    def bound_pods(self, name: str, namespaces: list[str] | None = None) -> list[str]:
        """Names of pods labelled with quota ``name`` (or, when given, in one of ``namespaces``), sorted."""
        nss = set(namespaces or [])
        return sorted(
            p.name
            for p in self.cache.pods.values()
            if n.pod_quota_label(p.labels) == name or (p.namespace in nss and not n.pod_quota_label(p.labels))
        )

    # ------------------------------------------------------------------ entry points
    def valid_add(self, obj: dict[str, Any]) -> None:
        """``ValidAddQuota``. Raises QuotaCheckError."""
        quota = parse_quota(obj)
        if quota.name in self.quotas:
            raise QuotaCheckError(f"AddQuota quota already exist:{quota.name}")
        for ns in quota.namespaces:
            bound = self.namespace_to_quota.get(ns)
            if bound is not None:
                raise QuotaCheckError(
                    f"AddQuota quota {quota.name}'s annotation namespace {ns} is already bound to quota {bound}"
                )
        validate_self(obj, quota)
        self.validate_topology(None, quota)

    def valid_update(self, old_obj: dict[str, Any] | None, obj: dict[str, Any]) -> None:
        """``ValidUpdateQuota``. Raises QuotaCheckError."""
        quota = parse_quota(obj)
        if old_obj is not None and _relevant(old_obj) == _relevant(obj):
            return
        if quota.name in (n.SYSTEM_QUOTA_NAME, n.ROOT_QUOTA_NAME):
            raise QuotaCheckError(f"invalid quota {quota.name}")
        for ns in quota.namespaces:
            bound = self.namespace_to_quota.get(ns)
            if bound is not None and bound != quota.name:
                raise QuotaCheckError(
                    f"UpdadteQuota, quota {quota.name} update namespaces, "
                    f"but namespace {ns} is already bound to quota {bound}"
                )
        old = self.quotas.get(quota.name)
        if old is None:
            raise QuotaCheckError(f"UpdateQuota quota not exist in quotaInfoMap:{quota.name}")
        validate_self(obj, quota)
        old_namespaces = n.quota_namespaces(old_obj) if old_obj is not None else old.namespaces
        self.validate_topology(old, quota, old_namespaces)

    def valid_delete(self, obj: dict[str, Any]) -> None:
        """``ValidDeleteQuota``. Raises QuotaCheckError."""
        name = n.quota_name_of(obj)
        if name in n.RESERVED_QUOTA_NAMES:
            raise QuotaCheckError(f"can not delete quotaGroup :{name}")
        if name not in self.quotas:
            raise QuotaCheckError(f"not found quota:{name}")
        children = self.children.get(name, set())
        if children:
            raise QuotaCheckError(f"delete quota failed, quota {name} has {len(children)} child quotas")
        pods = self.bound_pods(name)
        if pods:
            shown = pods if len(pods) <= 2 else [*pods[:2], "..."]
            raise QuotaCheckError(f"delete quota failed, quota {name} has {len(pods)} child pods: {', '.join(shown)}")

    # ------------------------------------------------------------------ topology
    def validate_topology(
        self, old: ElasticQuotaView | None, quota: ElasticQuotaView, old_namespaces: list[str] | None = None
    ) -> None:
        """``validateQuotaTopology`` plus a cycle check. Raises QuotaCheckError."""
        if quota.name == n.ROOT_QUOTA_NAME:
            return
        self._check_is_parent_change(old, quota, old_namespaces or [])
        self._check_tree_id(old, quota)
        self._check_cycle(quota)
        if quota.parent == n.ROOT_QUOTA_NAME and not quota.is_parent:
            return
        self._check_parent(quota)
        self._check_keys(quota)
        self._check_min(quota)

    def _check_is_parent_change(
        self, old: ElasticQuotaView | None, quota: ElasticQuotaView, old_namespaces: list[str]
    ) -> None:
        if old is None or old.is_parent == quota.is_parent:
            return
        if self.children.get(old.name) and not quota.is_parent:
            raise QuotaCheckError(f"quota has children, isParent is forbidden to modify as false, quotaName:{old.name}")
        if quota.is_parent and self.bound_pods(old.name, old_namespaces):
            raise QuotaCheckError(
                f"quota has bound pods, isParent is forbidden to modify as true, quotaName: {old.name}"
            )

    def _check_tree_id(self, old: ElasticQuotaView | None, quota: ElasticQuotaView) -> None:
        if old is not None and old.tree_id != quota.tree_id:
            raise QuotaCheckError(f"{quota.name} tree id changed [{old.tree_id}] vs [{quota.tree_id}]")
        if quota.parent != n.ROOT_QUOTA_NAME:
            parent = self.quotas.get(quota.parent)
            if parent is not None and parent.tree_id != quota.tree_id:
                raise QuotaCheckError(
                    f"{quota.name} tree id is different from parent {parent.name}, "
                    f"[{quota.tree_id}] vs [{parent.tree_id}]"
                )
        for name in sorted(self.children.get(quota.name, set())):
            child = self.quotas.get(name)
            if child is not None and child.tree_id != quota.tree_id:
                raise QuotaCheckError(
                    f"{quota.name} tree id is different from child {child.name}, [{quota.tree_id}] vs [{child.tree_id}]"
                )

    def _check_cycle(self, quota: ElasticQuotaView) -> None:
        chain = [quota.name]
        parent = quota.parent
        while parent and parent != n.ROOT_QUOTA_NAME:
            if parent in chain:
                raise QuotaCheckError(f"{quota.name} parent chain forms a cycle: {go_list([*chain, parent])}")
            chain.append(parent)
            nxt = self.quotas.get(parent)
            parent = nxt.parent if nxt is not None else ""

    def _check_parent(self, quota: ElasticQuotaView) -> None:
        if quota.parent == n.ROOT_QUOTA_NAME:
            return
        parent = self.quotas.get(quota.parent)
        if parent is None:
            raise QuotaCheckError(f"{quota.name} has parentName {quota.parent} but not find parentInfo in quotaInfoMap")
        if not parent.is_parent:
            raise QuotaCheckError(
                f"{quota.name} has parentName {quota.parent} but the parentQuotaInfo's IsParent is false"
            )

    def _check_keys(self, quota: ElasticQuotaView) -> None:
        prefix = "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
        if quota.parent != n.ROOT_QUOTA_NAME:
            parent = self.quotas[quota.parent]
            if set(parent.max) != set(quota.max):
                raise QuotaCheckError(f"{prefix}{quota.parent}'s max keys are not the same with {quota.name}'s")
            if not set(quota.min) <= set(parent.min):
                raise QuotaCheckError(f"{prefix}{quota.name}'s min keys are not all included in {quota.parent}'s")
        for name in sorted(self.children.get(quota.name, set())):
            child = self.quotas.get(name)
            if child is None:
                continue
            if set(quota.max) != set(child.max):
                raise QuotaCheckError(f"{prefix}{name}'s max keys are not the same with {quota.name}'s")
            if not set(child.min) <= set(quota.min):
                raise QuotaCheckError(f"{prefix}{name}'s min keys are not all included in {quota.name}'s")

    def _child_min_sum(self, parent: str, skip: str) -> ResourceList:
        total: ResourceList = {}
        if parent == n.ROOT_QUOTA_NAME:
            return total
        for name in self.children.get(parent, set()):
            if name != skip and name in self.quotas:
                total = add(total, self.quotas[name].min)
        return total

    def _check_min(self, quota: ElasticQuotaView) -> None:
        if quota.allow_force_update or quota.is_tree_root:
            return
        if quota.parent != n.ROOT_QUOTA_NAME:
            siblings = add(self._child_min_sum(quota.parent, quota.name), quota.min)
            if not less_equal_completely(siblings, self.quotas[quota.parent].min):
                raise QuotaCheckError(
                    f"checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {quota.parent}"
                )
        children_min = self._child_min_sum(quota.name, "")
        if self.children.get(quota.name) and not less_equal_completely(children_min, quota.min):
            raise QuotaCheckError(f"checkMinQuotaSum all children's MinQuota > current MinQuota, current: {quota.name}")


def validate_self(obj: dict[str, Any], quota: ElasticQuotaView) -> None:
    """``validateQuotaSelfItem``: no negative max/min/shared-weight, min keys within max and min <= max,
    ``max >= status.used`` for the keys in ``max-strict-check-resource-keys``. Raises QuotaCheckError."""
    neg = sorted(k for k, v in quota.max.items() if v < 0)
    if neg:
        raise QuotaCheckError(f"{quota.name} quota.Spec.Max's value < 0, in dimensions :{go_list(neg)}")
    neg = sorted(k for k, v in quota.min.items() if v < 0)
    if neg:
        raise QuotaCheckError(f"{quota.name} quota.Spec.Min's value < 0, in dimensions :{go_list(neg)}")
    try:
        raw = n.annotation_json(obj, n.ANNOTATION_SHARED_WEIGHT)
        weights = parse_resource_list(raw, field=n.ANNOTATION_SHARED_WEIGHT) if raw is not None else {}
    except (ValueError, QuantityError) as exc:
        raise QuotaCheckError(
            f"{quota.name} quota.Annotation[{n.ANNOTATION_SHARED_WEIGHT}]'s value is invalid: {exc}"
        ) from None
    neg = sorted(k for k, v in weights.items() if v < 0)
    if neg:
        raise QuotaCheckError(
            f"{quota.name} quota.Annotation[{n.ANNOTATION_SHARED_WEIGHT}]'s value < 0, in dimension :{go_list(neg)}"
        )
    for key in sorted(quota.min):
        if key not in quota.max:
            raise QuotaCheckError(
                f"resourceKey {key} of quota {quota.name} is included in min, which is not included in max"
            )
        if quota.max[key] < quota.min[key]:
            raise QuotaCheckError(
                f"resourceKey {key} of quota {quota.name} min {format_resource(key, quota.min[key])} > "
                f"max {format_resource(key, quota.max[key])}"
            )
    try:
        keys = n.annotation_json(obj, n.ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS) or []
        used = parse_resource_list(((obj.get("status") or {}).get("used")), field="status.used")
    except (ValueError, QuantityError) as exc:
        raise QuotaCheckError(
            f"{quota.name} quota.Annotation[{n.ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS}]'s value is invalid: {exc}"
        ) from None
    if not isinstance(keys, list):
        raise QuotaCheckError(
            f"{quota.name} quota.Annotation[{n.ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS}]'s value is invalid: "
            "expected a list of resource names"
        )
    for key in keys:
        if key not in used:
            continue
        if key not in quota.max:
            raise QuotaCheckError(
                f"resourceKey {key} of quota {quota.name} is included in used, which is not included in max "
                "but should check max >= used"
            )
        if quota.max[key] < used[key]:
            raise QuotaCheckError(
                f"resourceKey {key} of quota {quota.name} max {format_resource(key, quota.max[key])} < "
                f"used {format_resource(key, used[key])}"
            )


def _relevant(obj: dict[str, Any]) -> tuple[Any, ...]:
    """``quotaFieldsCopy``: the fields whose change needs validation."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return (
        labels.get(n.LABEL_QUOTA_PARENT),
        labels.get(n.LABEL_QUOTA_IS_PARENT),
        labels.get(n.LABEL_QUOTA_TREE_ID),
        annotations.get(n.ANNOTATION_QUOTA_NAMESPACES),
        obj.get("spec"),
    )
