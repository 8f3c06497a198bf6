"""Extension point interfaces. A plugin implements only the points it needs.

Filter and Score are batch-oriented: they receive a :class:`NodeBatch` (rows of the cache's node
table plus names) and answer for every node at once, so plugins can use numpy over precomputed
columns. Positions in results are indices into the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from app.framework.cyclestate import CycleState
from app.framework.status import Status

if TYPE_CHECKING:
    from app.cache.podinfo import PodInfo
    from app.cache.snapshot import ClusterCache

#: kube-scheduler's MaxNodeScore: plugin scores are 0..100.
MAX_NODE_SCORE = 100
#: k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority: extender scores are 0..10.
MAX_EXTENDER_PRIORITY = 10


@dataclass(frozen=True, slots=True)
class NodeBatch:
    """The nodes one call evaluates.

    Attributes:
        rows: int64 rows in the cache's node table, one per node.
        names: node names, parallel to ``rows``.
        removed: for preemption only: per position, the pods to treat as gone from that node
            (victims); None outside preemption.
    """

    rows: npt.NDArray[np.int64]
    names: list[str]
    removed: list[list[PodInfo]] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def subset(self, positions: npt.NDArray[np.int64]) -> NodeBatch:
        """The batch restricted to ``positions`` (indices into this batch), order kept."""
        idx = positions.tolist()
        removed = [self.removed[i] for i in idx] if self.removed is not None else None
        return NodeBatch(self.rows[positions], [self.names[i] for i in idx], removed)


#: Filter answer: position in the batch -> failing status. Absent positions passed.
FilterFailures = dict[int, Status]


class Handle:
    """What plugins may use from the framework: the snapshot cache and the clock."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def now(self) -> float:
        """Current time in epoch seconds (the cache's clock)."""
        return self.cache.clock()


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a name (as upstream spells it, e.g. ``LoadAwareScheduling``)."""

    name: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Runs once per pod before any node is evaluated; may reject the pod for every node."""

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Prepare cycle state; a non-success status fails every node with it."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Decides per node whether the pod may run there."""

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        """Return the failing positions of ``nodes`` with their statuses."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Ranks the feasible nodes, 0..MAX_NODE_SCORE each."""

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64] | None:
        """int64 scores parallel to ``nodes`` (0..100, before normalisation), or None to skip
        this pod (it does not concern the plugin: kube-scheduler's PreScore ``Skip``)."""
        ...


@runtime_checkable
class NormalizeScorePlugin(ScorePlugin, Protocol):
    """A score plugin whose raw scores need rescaling to 0..100 (kube-scheduler's ScoreExtensions)."""

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """Return normalised scores parallel to ``nodes``."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Reserves resources for a pod on the chosen node before binding; undone by unreserve."""

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Reserve; a non-success status aborts the binding."""
        ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo ``reserve`` (binding failed or was aborted)."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    """Runs after reserve and before the binding is written (e.g. to annotate the pod)."""

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """A non-success status aborts the binding (reserve is undone)."""
        ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Takes part in preemption: may veto victims or whole candidate nodes."""

    def select_victims(
        self, state: CycleState, pod: PodInfo, node: str, victims: list[PodInfo]
    ) -> tuple[list[PodInfo], Status]:
        """Return the victims this plugin allows on ``node`` and a status (non-success drops the node)."""
        ...


@runtime_checkable
class ServiceProvider(Plugin, Protocol):
    """A plugin exposing REST endpoints under ``/apis/v1/plugins/<name>/``."""

    def routes(self) -> list[tuple[str, Any]]:
        """(path relative to the plugin prefix, async handler taking the path params as kwargs)."""
        ...


@runtime_checkable
class BackgroundPlugin(Plugin, Protocol):
    """A plugin with a loop running for the service's lifetime (e.g. ElasticQuota's reclaim).

    The app starts ``run_background`` after the source started and cancels it on shutdown; the
    loop must wait for ``source.ready()`` itself if it needs a full cache.
    """

    async def run_background(self, source: Any) -> None:
        """Run until cancelled; ``source`` is the service's :class:`~app.sources.base.Source`."""
        ...
