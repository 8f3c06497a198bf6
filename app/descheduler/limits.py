"""Eviction limits of one round (the sigs descheduler's ``PodEvictor``, koordinator's
``evictions.go``): ``maxNoOfPodsToEvictPerNode``, ``maxNoOfPodsToEvictPerNamespace``,
``maxNoOfPodsToEvictTotal``; None means unlimited."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EvictionLimits:
    """Counts evictions of the round and refuses those over a limit."""

    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None
    by_node: dict[str, int] = field(default_factory=dict)
    by_namespace: dict[str, int] = field(default_factory=dict)
    count: int = 0

    def refusal(self, node: str, namespace: str) -> str | None:
        """Why another eviction from ``node`` in ``namespace`` is over a limit, or None."""
        if self.total is not None and self.count >= self.total:
            return f"maximum number of evicted pods in total reached ({self.total})"
        if self.per_node is not None and self.by_node.get(node, 0) >= self.per_node:
            return f"maximum number of evicted pods per node reached ({self.per_node})"
        if self.per_namespace is not None and self.by_namespace.get(namespace, 0) >= self.per_namespace:
            return f"maximum number of evicted pods per namespace reached ({self.per_namespace})"
        return None

    def record(self, node: str, namespace: str) -> None:
        """Count one eviction."""
        self.count += 1
        self.by_node[node] = self.by_node.get(node, 0) + 1
        self.by_namespace[namespace] = self.by_namespace.get(namespace, 0) + 1
