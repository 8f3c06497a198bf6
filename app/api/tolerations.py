"""Taints and tolerations as ``k8s.io/api/core/v1`` helpers evaluate them (``ToleratesTaint``,
``FindMatchingUntoleratedTaint`` over NoSchedule/NoExecute taints): reserve pods on nodes and owner pods
on reservations (``spec.taints`` against the reservation affinity's ``tolerations``), and the
descheduler's nodeFit of an evicted pod on a target node."""

from __future__ import annotations

from typing import Any

#: The taint a node's (or a reservation's) ``spec.unschedulable`` stands for.
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def tolerates(tolerations: list[Any], taint: dict[str, Any]) -> bool:
    """Whether some toleration matches the taint: same effect (or none), same key (or an empty key with
    ``Exists``), and ``Exists`` or an equal value."""
    for tol in tolerations:
        if not isinstance(tol, dict):
            continue
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("key") and tol.get("key") != taint.get("key"):
            continue
        if not tol.get("key") and tol.get("operator") != "Exists":
            continue
        if tol.get("operator") == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def untolerated_taint(taints: list[Any], tolerations: list[Any]) -> dict[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration matches, or None."""
    for taint in taints:
        blocking = isinstance(taint, dict) and taint.get("effect") in ("NoSchedule", "NoExecute")
        if blocking and not tolerates(tolerations, taint):
            return taint
    return None
