"""A pod's required node affinity as ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``
evaluates it: ``spec.nodeSelector`` (every pair) AND ``requiredDuringSchedulingIgnoredDuringExecution``
(terms ORed; inside a term ``matchExpressions`` on labels and ``matchFields`` on ``metadata.name``
ANDed; a term with neither matches nothing; no terms = no constraint).

Used by the Reservation placement (reserve pods, e.g. the descheduler's "not on the current node"
reservations) and by the descheduler's nodeFit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _requirement(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False  # unknown operator: the term fails, as the API server would have refused it


def required_affinity_matches(spec: Mapping[str, Any], labels: Mapping[str, str], node_name: str) -> bool:
    """Whether a node (``labels``, ``node_name``) satisfies the pod ``spec``'s nodeSelector and
    required node affinity. Malformed parts (not maps/lists) fail the match rather than raise."""
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping) or any(labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        (node_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity or {}, Mapping)
        else None
    )
    if not required:
        return True
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list) or not terms:
        return True
    for term in terms:
        if not isinstance(term, Mapping):
            continue
        exprs = [e for e in term.get("matchExpressions") or [] if isinstance(e, Mapping)]
        fields = [e for e in term.get("matchFields") or [] if isinstance(e, Mapping)]
        if not exprs and not fields:
            continue
        if all(_requirement(e, labels.get(str(e.get("key")))) for e in exprs) and all(
            e.get("key") == "metadata.name" and _requirement(e, node_name) for e in fields
        ):
            return True
    return False
