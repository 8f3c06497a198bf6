"""Per-pod scheduling cycle state (kube-scheduler's CycleState)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any


class CycleState:
    """Key/value data written in PreFilter and read by later points for the same pod and request.

    Plugins use their own name as key prefix. ``now`` is the cycle's clock reading (epoch seconds),
    taken once so every node is judged at the same instant.
    """

    __slots__ = ("_data", "_pre_bind_waits", "now")

    def __init__(self, now: float) -> None:
        self._data: dict[str, Any] = {}
        self._pre_bind_waits: list[Awaitable[None]] = []
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

    def add_pre_bind_wait(self, write: Awaitable[None]) -> None:
        """Register an API write started in PreBind (e.g. DeviceShare's pod annotation).

        PreBind is synchronous here; the extender's bind awaits every registered write before it
        writes the Binding, so the order stays upstream's (annotate, then bind). A write that
        raises aborts the binding.
        """
        self._pre_bind_waits.append(write)

    def take_pre_bind_waits(self) -> list[Awaitable[None]]:
        """The registered PreBind writes (the list is emptied)."""
        waits, self._pre_bind_waits = self._pre_bind_waits, []
        return waits
