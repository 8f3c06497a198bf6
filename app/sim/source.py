"""The simulator's embedded source: a :class:`FileSource` on an empty directory, without polling.

Objects are written with ``create_or_update`` (nodes, Devices, arriving pods) and bound through
the extender's ``/bind``; timed mode removes departed pods with :meth:`FileSource.delete`, which
delivers a DELETED watch event exactly as a pod deletion on an API server would.
"""

from __future__ import annotations

from pathlib import Path

from app.sources.files import FileSource


class SimSource(FileSource):
    """An embedded source without files: no polling, no NodeMetric re-stamping.

    Args:
        path: an empty directory (the file source needs one; nothing is ever read from it).
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, poll_interval=0, restamp_interval=0)

    @property
    def description(self) -> str:
        """``sim:<path>``."""
        return f"sim:{self.path}"
