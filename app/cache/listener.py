"""How plugins learn about cache changes, to precompute on events instead of per request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.cache.nodestate import NodeState
    from app.cache.podinfo import PodInfo


class CacheListener:
    """Base class for components that keep derived state in step with the snapshot cache.

    Every hook is called on the event loop thread right after the cache applied the change.
    Override only the hooks you need; the defaults do nothing. A listener whose class keeps the default
    ``on_pod`` is not called for pod events at all (the cache's most frequent ones).
    """

    def on_node(self, name: str, node: NodeState | None) -> None:
        """Node ``name`` was added or changed (``node`` is its new state) or deleted (``node`` is None)."""

    def on_pod(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """A pod changed: ``old`` is its previous view (None when new), ``new`` the current (None when gone).

        Assumed pods appear here with ``node_name`` set as soon as they are assumed, and again
        without it when forgotten.
        """

    def on_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Another kind (NodeMetric, ElasticQuota, ...) was added/changed (``obj``) or deleted (None)."""
