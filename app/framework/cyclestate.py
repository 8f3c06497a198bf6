"""Per-pod scheduling cycle state (kube-scheduler's CycleState)."""

from __future__ import annotations

from typing import Any


class CycleState:
    """Key/value data written in PreFilter and read by later points for the same pod and request.

    Plugins use their own name as key prefix. ``now`` is the cycle's clock reading (epoch seconds),
    taken once so every node is judged at the same instant.
    """

    __slots__ = ("_data", "now")

    def __init__(self, now: float) -> None:
        self._data: dict[str, Any] = {}
        self.now = now

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
