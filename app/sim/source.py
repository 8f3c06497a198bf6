"""The simulator's embedded source: a :class:`FileSource` on an empty directory, without polling.

Objects are written with ``create_or_update`` (nodes, Devices, arriving pods) and bound through
the extender's ``/bind``; timed mode removes departed pods with :meth:`FileSource.delete`, which
delivers a DELETED watch event exactly as a pod deletion on an API server would. Each
``create_or_update`` stamps ``metadata.resourceVersion`` as an API server does, so the pod
kube-scheduler would send (its informer's copy) carries one: the extender then reuses its parse of
the pod from ``/filter`` in ``/prioritize`` (it keys that reuse on uid and resourceVersion).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.sources.files import FileSource


class SimSource(FileSource):
    """An embedded source without files: no polling, no NodeMetric re-stamping.

    Args:
        path: an empty directory (the file source needs one; nothing is ever read from it).
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, poll_interval=0, restamp_interval=0)
        self._version = 0

    async def create_or_update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """:meth:`FileSource.create_or_update` with ``metadata.resourceVersion`` set to the next of a
        counter (a decimal string; ``obj`` itself is not changed).

        Raises:
            BadRequest: unknown kind or no ``metadata.name``.
        """
        self._version += 1
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            obj = {**obj, "metadata": {**meta, "resourceVersion": str(self._version)}}
        return await super().create_or_update(obj)

    @property
    def description(self) -> str:
        """``sim:<path>``."""
        return f"sim:{self.path}"
