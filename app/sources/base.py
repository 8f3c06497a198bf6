"""The one interface behind which all cluster access lives.

A source lists and watches the kinds the scheduler needs and writes them into an
:class:`~app.sources.events.EventSink` (the snapshot cache). It also performs the writes the
extender needs (binding a pod). Two implementations exist: :class:`app.sources.files.FileSource`
(YAML files, the embedded default) and :class:`app.sources.kubernetes.KubernetesSource`.

Both raise the typed errors of :mod:`app.client.errors` (``NotFound``, ``Conflict``,
``TooManyRequests``, ...), so callers catch the same classes in embedded and Kubernetes mode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

from app.api.kinds import KINDS, KindInfo
from app.client.errors import BadRequest, MethodNotAllowed, NotFound
from app.sources.events import EventSink
from app.sources.loops import LoopSupervisor

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
    "Namespace",
    "PriorityClass",
    "NodeResourceTopology",
    "PodDisruptionBudget",
)

#: Kinds listed and watched in one namespace only (RBAC grants ConfigMaps in koordinator-system only).
WATCH_NAMESPACES: dict[str, str] = {"ConfigMap": "koordinator-system"}


def write_kind(kind: str) -> KindInfo:
    """API coordinates of ``kind`` for a write.

    Raises:
        NotFound: ``kind`` is not in :data:`app.api.kinds.KINDS` (as the API server answers a resource it does
            not serve).
    """
    info = KINDS.get(kind)
    if info is None:
        raise NotFound(f"unknown kind {kind}")
    return info


def object_to_store(obj: dict[str, Any]) -> tuple[KindInfo, dict[str, Any]]:
    """(kind info, metadata) of an object given to ``create_or_update``.

    Raises:
        BadRequest: unknown kind or no ``metadata.name``.
    """
    kind = str(obj.get("kind") or "")
    info = KINDS.get(kind)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else None
    if info is None or meta is None or not meta.get("name"):
        raise BadRequest(f"cannot store object of kind {kind!r} without metadata.name")
    return info, meta


def updated_object(current: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """``current`` with the ``metadata.labels``/``annotations`` and ``spec`` that ``obj`` gives replacing
    its own (what ``create_or_update`` writes over an existing object); everything else is kept."""
    meta = obj.get("metadata") or {}
    cmeta = dict(current.get("metadata") or {})
    for field in ("labels", "annotations"):
        if field in meta:
            cmeta[field] = meta[field]
    return {**current, "metadata": cmeta, "spec": obj.get("spec", current.get("spec"))}


class ClusterClient(Protocol):
    """The writes the scheduler's plugins and controllers make (kube-scheduler's ``ClientSet``).

    :class:`Source` implements it; so does anything else handed to a plugin's Handle. The default
    bodies refuse with :class:`~app.client.errors.MethodNotAllowed`: an implementation that does not
    write (a read-only source, a unit test's handle) inherits them. Every method raises the typed
    errors of :mod:`app.client.errors`.
    """

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Bind pod ``namespace/name`` (uid ``uid``) to ``node``: a Binding names the pod by those three, so
        no object is handed over (the binding cycle binds only pods the source reported).

        Raises:
            NotFound: the pod (or, embedded, the node) does not exist.
            Conflict: the pod is bound to another node already, or was recreated (uid mismatch).
            MethodNotAllowed: this client does not write.
            ConnectionFailed: the API server did not answer.
            ApiError: any other refusal; ``str(exc)`` is the message for ExtenderBindingResult.Error.
        """
        raise MethodNotAllowed(f"{_name(self)} does not support writes")

    async def patch(
        self,
        kind: str,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386: ``None`` deletes a key) to an object and return it.

        ``subresource="status"`` patches the status subresource (Node allocatable, NodeMetric
        status); otherwise the main resource (e.g. a pod's annotations).

        Raises:
            NotFound: unknown kind or object.
            MethodNotAllowed: this source does not write.
            ApiError: any other refusal, or ConnectionFailed when no answer came.
        """
        raise MethodNotAllowed(f"{_name(self)} does not support writes")

    async def create_or_update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (kind, metadata.name, [namespace] from the object), or replace the
        existing one's ``metadata.labels``/``annotations`` and ``spec``; return the stored object.

        Raises:
            BadRequest: unknown kind or no ``metadata.name``.
            MethodNotAllowed: this source does not write.
            Conflict: the object changed while it was being replaced.
            ApiError: any other refusal, or ConnectionFailed when no answer came.
        """
        raise MethodNotAllowed(f"{_name(self)} does not support writes")

    async def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        """Delete object ``name`` of ``kind`` (in ``namespace`` for namespaced kinds, "default" when None).

        The deletion reaches the sink as a DELETED watch event. Used by the NodeSLO controller
        to drop NodeSLOs of nodes that are gone (upstream relies on the ownerReference's
        garbage collection, which the embedded mode does not have).

        Raises:
            NotFound: unknown kind or object.
            MethodNotAllowed: this source does not write.
            ApiError: any other refusal, or ConnectionFailed when no answer came.
        """
        raise MethodNotAllowed(f"{_name(self)} does not support writes")

    async def evict(self, namespace: str, name: str, uid: str, reason: str) -> None:
        """Evict a pod through the Eviction API (policy/v1), with a uid precondition.

        Embedded sources record the eviction (log, :attr:`evictions`) and kill nothing.

        Raises:
            TooManyRequests: a PodDisruptionBudget blocks it.
            NotFound: the pod is gone.
            MethodNotAllowed: this source does not evict.
            ApiError: any other refusal, or ConnectionFailed when no answer came.
        """
        raise MethodNotAllowed(f"{_name(self)} does not support evictions")


def _name(client: object) -> str:
    """How a refusal names the client: its ``description`` when it has one, else its class."""
    return str(getattr(client, "description", type(client).__name__))


class Source(ClusterClient, ABC):
    """A producer of cluster objects and the target of bind calls.

    Life cycle: ``await start(sink)`` once (returns after the background work is started, not
    after it loaded), ``ready()`` turns true once every kind has been fully listed at least
    once, ``await stop()`` ends the background work.
    """

    #: True when the backend deletes objects whose ownerReferences name a deleted owner (the API
    #: server's garbage collector); controllers then need not delete such objects themselves.
    owner_gc: bool = False

    _loops: LoopSupervisor | None = None

    @property
    def loops(self) -> LoopSupervisor:
        """The supervisor this source's background loops run under (:mod:`app.sources.loops`): the
        service's, assigned before :meth:`start` (the app factory does), else one of the source's own."""
        if self._loops is None:
            self._loops = LoopSupervisor()
        return self._loops

    @loops.setter
    def loops(self, supervisor: LoopSupervisor) -> None:
        self._loops = supervisor

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
    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Bind the pod to ``node`` (see :meth:`ClusterClient.bind`); every source implements it."""

    def watch_restarts(self) -> int:
        """Number of watch streams restarted (relist or reconnect) since start; 0 for sources without watches."""
        return 0

    @property
    @abstractmethod
    def description(self) -> str:
        """A short human-readable description (``files:/path`` or ``kubernetes:https://...``)."""
