"""Per-pod cycle state (kube-scheduler's ``CycleState``, pkg/scheduler/framework/cycle_state.go)."""

from __future__ import annotations

from typing import Any


class CycleState:
    """Key/value data written at one extension point and read by later ones for the same pod.

    A scheduling cycle (one ``/filter``, ``/prioritize`` or ``/preempt`` request) and a binding
    cycle (one ``/bind`` request) each get their own state. Plugins use their own name as key
    prefix. ``now`` is the cycle's clock reading (epoch seconds), taken once so every node is
    judged at the same instant. ``skip_filter`` / ``skip_score`` hold the plugins whose PreFilter /
    PreScore answered Skip for this pod (upstream ``SkipFilterPlugins`` / ``SkipScorePlugins``).
    """

    __slots__ = ("_data", "now", "skip_filter", "skip_score")

    def __init__(self, now: float) -> None:
        self._data: dict[str, Any] = {}
        self.now = now
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def read(self, key: str) -> Any:
        """Value stored under ``key``.

        Raises:
            KeyError: nothing was written under ``key``.
        """
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        """Value under ``key`` or ``default``."""
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        self._data[key] = value

    def delete(self, key: str) -> None:
        """Remove ``key`` (absent: no-op)."""
        self._data.pop(key, None)
