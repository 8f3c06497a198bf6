"""The simulator's embedded source: a :class:`FileSource` on an empty directory that can also delete.

Objects are written with ``create_or_update`` (nodes, Devices, arriving pods) and bound through
the extender's ``/bind``; timed mode removes departed pods with :meth:`SimSource.delete`, which
delivers a DELETED watch event exactly as a pod deletion on an API server would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.api.kinds import KINDS
from app.sources.base import WriteError
from app.sources.events import Event, EventType
from app.sources.files import FileSource


class SimSource(FileSource):
    """An embedded source without files: no polling, no NodeMetric re-stamping, deletions allowed.

    Args:
        path: an empty directory (the file source needs one; nothing is ever read from it).
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, poll_interval=0, restamp_interval=0)

    @property
    def description(self) -> str:
        """``sim:<path>``."""
        return f"sim:{self.path}"

    async def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete an object written through this source and deliver the DELETED event on the next loop turn.

        Raises:
            WriteError: unknown kind or object (status 404).
        """
        info = KINDS.get(kind)
        if info is None:
            raise WriteError(f"unknown kind {kind}", 404)
        key = f"{namespace or 'default'}/{name}" if info.namespaced else name
        current = self._objects.get(kind, {}).pop(key, None)
        if current is None:
            raise WriteError(f'{info.plural} "{name}" not found', 404)
        self._created.get(kind, {}).pop(key, None)
        self._patches.get(kind, {}).pop(key, None)
        if kind == "Pod":
            self._adopted.pop(key, None)
            self._bindings.pop(key, None)
        sink = self._sink
        if sink is not None and kind in self.kinds:
            asyncio.get_running_loop().call_soon(sink.apply, Event(kind, EventType.DELETED, current))
