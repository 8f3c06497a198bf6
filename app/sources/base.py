"""The one interface behind which all cluster access lives.

A source lists and watches the kinds the scheduler needs and writes them into an
:class:`~app.sources.events.EventSink` (the snapshot cache). It also performs the writes the
extender needs (binding a pod). Two implementations exist: :class:`app.sources.files.FileSource`
(YAML files, the embedded default) and :class:`app.sources.kubernetes.KubernetesSource`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from app.sources.events import EventSink

#: Kinds the scheduler service lists and watches, in the order they are loaded.
WATCHED_KINDS: tuple[str, ...] = (
    "Node",
    "Pod",
    "NodeMetric",
    "NodeSLO",
    "Reservation",
    "ElasticQuota",
    "PodGroup",
    "Device",
    "PodMigrationJob",
    "ClusterColocationProfile",
)


class BindError(Exception):
    """Binding a pod failed; the message says why (returned in ExtenderBindingResult.Error)."""


class Source(ABC):
    """A producer of cluster objects and the target of bind calls.

    Life cycle: ``await start(sink)`` once (returns after the background work is started, not
    after it loaded), ``ready()`` turns true once every kind has been fully listed at least
    once, ``await stop()`` ends the background work.
    """

    @abstractmethod
    async def start(self, sink: EventSink) -> None:
        """Begin listing and watching; deliver events into ``sink`` on the running loop."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop all background work. Safe to call twice."""

    @abstractmethod
    def ready(self) -> bool:
        """True once every watched kind has completed its first full list."""

    @abstractmethod
    async def bind(self, namespace: str, name: str, uid: str, node: str, pod: dict[str, Any] | None = None) -> None:
        """Bind pod ``namespace/name`` (uid ``uid``) to ``node``; ``pod`` is the object if known.

        Raises:
            BindError: the binding was refused or could not be written.
        """

    def watch_restarts(self) -> int:
        """Number of watch streams restarted (relist or reconnect) since start; 0 for sources without watches."""
        return 0

    @property
    @abstractmethod
    def description(self) -> str:
        """A short human-readable description (``files:/path`` or ``kubernetes:https://...``)."""
