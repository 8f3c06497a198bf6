"""Extension point interfaces. A plugin implements only the points it needs, and names them.

Each point is one small Protocol, as kube-scheduler's ``framework.FilterPlugin``,
``framework.ReservePlugin``, ... (k8s.io/kubernetes/pkg/scheduler/framework/interface.go). A plugin
class lists the Protocols it implements among its bases (``class DeviceShare(PreFilterPlugin,
FilterPlugin, ...)``, upstream's ``var _ framework.FilterPlugin = &Plugin{}``), so mypy checks the
signatures and refuses to build a plugin that leaves one out; the framework groups plugins by
``isinstance`` on the same Protocols.

Scheduling cycle (``/filter``, ``/prioritize``, ``/preempt``): PreFilter -> Filter -> PreScore ->
Score (-> NormalizeScore), PostFilter for preemption. Filter and Score are batch-oriented: they
receive a :class:`NodeBatch` (rows of the cache's node table plus names) and answer for every node
at once, so plugins can use numpy over precomputed columns. Positions in results are indices into
the batch.

Binding cycle (``/bind``, see :mod:`app.framework.bindingcycle`): Reserve -> Permit -> PreBind ->
Bind -> PostBind, Unreserve on failure. PreBind and Bind are ``async``: they write through
``handle.client`` themselves and the framework awaits them.

Skip is a status (:meth:`Status.skip`): from PreFilter it skips the plugin's Filter for the pod,
from PreScore its Score, from Bind it hands the binding to the next binder.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from app.framework.cyclestate import CycleState
from app.framework.status import Status

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from app.cache.podinfo import PodInfo
    from app.framework.preemption import Candidate

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
        removed = list(map(self.removed.__getitem__, idx)) if self.removed is not None else None
        return NodeBatch(self.rows[positions], list(map(self.names.__getitem__, idx)), removed)


#: Filter answer: position in the batch -> failing status. Absent positions passed.
FilterFailures = dict[int, Status]

#: A plugin's REST endpoint: (path relative to ``/apis/v1/plugins/<name>``, async handler taking the
#: path parameters as keyword arguments and returning JSON-shaped data, or raising
#: :class:`~app.client.errors.NotFound`).
Route = tuple[str, Callable[..., Awaitable[object]]]


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a name, spelled as upstream (``LoadAwareScheduling``, ``DeviceShare``, ...)."""

    name: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Runs once per pod before any node is evaluated (upstream ``PreFilterPlugin``)."""

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """SUCCESS; SKIP when the pod does not concern the plugin (its Filter is then not run for
        this pod); any other status fails every node with it."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Decides per node whether the pod may run there (upstream ``FilterPlugin``)."""

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterFailures:
        """Return the failing positions of ``nodes`` with their statuses (absent positions pass)."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    """Runs once per pod before Score (upstream ``PreScorePlugin``)."""

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status:
        """SUCCESS, or SKIP when the plugin does not score this pod (it then takes no part in the
        weighted total); an ERROR status fails the scoring."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Ranks the feasible nodes, 0..MAX_NODE_SCORE each (upstream ``ScorePlugin``)."""

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        """int64 scores parallel to ``nodes`` (0..100, before normalisation)."""
        ...


@runtime_checkable
class NormalizeScorePlugin(ScorePlugin, Protocol):
    """A score plugin whose raw scores need rescaling to 0..100 (upstream ``ScoreExtensions``)."""

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """Return normalised scores parallel to ``nodes``."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Accounts the pod on its chosen node before binding (upstream ``ReservePlugin``)."""

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Reserve; a non-success status aborts the binding cycle."""
        ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo ``reserve`` (a later point failed). Must be idempotent and tolerate a Reserve that
        failed half-way."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Approves, rejects or holds the pod before binding (upstream ``PermitPlugin``)."""

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """(status, timeout seconds): SUCCESS (allow), UNSCHEDULABLE (reject, with the reason), or
        WAIT with a timeout (the pod waits in ``handle.waiting_pods`` until every waiting plugin
        allowed it, one rejected it, or the timeout passed). The timeout is ignored unless WAIT."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    """Runs after Permit and before the Binding is written (upstream ``PreBindPlugin``), e.g. to
    annotate the pod through ``handle.client``."""

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """A non-success status aborts the binding (Unreserve runs)."""
        ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Writes the binding (upstream ``BindPlugin``); without one, the framework's default binder
    creates the pod's ``Binding`` through ``handle.client``."""

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """SUCCESS when bound, SKIP to leave the pod to the next binder, else the failure."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    """Informed after a successful binding (upstream ``PostBindPlugin``); cannot fail."""

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Clean up or record after the pod is bound."""
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
class PreemptionPlugin(Plugin, Protocol):
    """Preempts for a pod its own PreFilter rejected, inside the service (upstream ``PostFilterPlugin``
    with a ``preemption.Evaluator``, as ElasticQuota's PostFilter).

    Used where kube-scheduler cannot carry the preemption: its dry run evaluates only in-tree filters and
    keeps only nodes with at least one victim, so a pod that fits in-tree but fails our PreFilter never
    reaches ``/preempt``. The framework runs, in order: :meth:`select_candidates` (eligibility and victims
    per node), its own Filter plugins with the victims removed, the choice of one node
    (:func:`~app.framework.preemption.pick_one_node_for_preemption`), :meth:`nominate`, and, off the
    request path, :meth:`prepare_candidate`.
    """

    def select_candidates(
        self, state: CycleState, pod: PodInfo, pod_obj: dict[str, Any], status: Status, nodes: list[str]
    ) -> list[Candidate]:
        """Nodes of ``nodes`` where removing the returned victims makes room for ``pod``, which PreFilter
        rejected with ``status``; [] when this plugin does not preempt for it (not its rejection, not
        eligible, no victims). ``pod_obj`` is the pod as the request carried it."""
        ...

    def nominate(self, state: CycleState, pod: PodInfo, candidate: Candidate) -> None:
        """Record the chosen candidate before the request is answered (the preemption is now under way)."""
        ...

    async def prepare_candidate(self, pod: PodInfo, candidate: Candidate) -> None:
        """Evict the victims and nominate the node for ``pod`` through the API client; never raises."""
        ...


@runtime_checkable
class UnschedulablePlugin(Plugin, Protocol):
    """Told when a scheduling attempt of a pod found no feasible node: every candidate of kube-scheduler's
    ``/filter`` call failed, or the binding cycle's re-check refused the chosen node. Upstream runs its
    PostFilter plugins at that moment; Coscheduling's rejects the pod's Strict gang group there."""

    def on_unschedulable(self, state: CycleState, pod: PodInfo) -> None:
        """React to ``pod`` being unschedulable in this attempt (must not raise; the answer is unchanged)."""
        ...


@runtime_checkable
class ReservationNominator(Plugin, Protocol):
    """Knows which reservations a pod may use (upstream ``frameworkext.ReservationNominator``), so plugins that
    count capacity (ElasticQuota) can leave out what a reservation already holds for the pod."""

    def reservations_for(self, pod: PodInfo) -> list[tuple[str, dict[str, int]]]:
        """(reservation name, unallocated remainder in internal units) of every active reservation ``pod``
        may use; [] when none."""
        ...


@runtime_checkable
class PodVerdictPlugin(Plugin, Protocol):
    """A plugin whose verdict on a pod is not per node (e.g. Coscheduling's gang state), shown by the
    explain endpoint (``POST /apis/v1/explain``) beside the per-node filter verdicts."""

    def explain_pod(self, pod: PodInfo) -> dict[str, Any] | None:
        """JSON-shaped verdict on ``pod``, or None when the plugin has nothing to say about it."""
        ...


@runtime_checkable
class NodeDetailPlugin(Plugin, Protocol):
    """A plugin with per-node state worth showing beside its verdict (e.g. NodeNUMAResource's free and
    allocated cpus per NUMA node), in ``koord explain`` under each node's ``details``."""

    def explain_node(self, node: str) -> dict[str, Any] | None:
        """JSON-shaped detail of ``node``, or None when the plugin has nothing to show there."""
        ...


@runtime_checkable
class FilterExplainer(Plugin, Protocol):
    """A filter plugin that passes some nodes without judging them (e.g. DeviceShare on a node that reports no
    Device); explain shows those as ``Skip`` with the reason, not as a pass that contradicts another plugin."""

    def explain_unjudged(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> dict[int, str]:
        """Positions of ``nodes`` this plugin lets through without a verdict of its own, with the reason."""
        ...


@runtime_checkable
class ReservationPreBindPlugin(Plugin, Protocol):
    """Writes what its Reserve chose for a reserve pod onto the Reservation before it is marked Available
    (upstream ``frameworkext.ReservationPreBindPlugin``), e.g. DeviceShare's ``device-allocated``."""

    async def pre_bind_reservation(
        self, state: CycleState, reserve_pod: PodInfo, reservation: str, node: str
    ) -> Status:
        """A non-success status aborts the placement (Unreserve runs, the Reservation stays Pending)."""
        ...


@runtime_checkable
class ServiceProvider(Plugin, Protocol):
    """A plugin exposing REST endpoints under ``/apis/v1/plugins/<name>/`` (upstream ``APIServiceProvider``)."""

    def routes(self) -> list[Route]:
        """(path relative to the plugin prefix, async handler taking the path params as kwargs)."""
        ...


@runtime_checkable
class MetricsProvider(Plugin, Protocol):
    """A plugin with Prometheus series of its own state (e.g. ElasticQuota's min / max / runtime / used), read
    at scrape time by the service's ``/metrics`` (nothing is counted on the scheduling path)."""

    def collect_metrics(self) -> Iterable[Metric]:
        """The plugin's metric families now (prometheus_client ``Metric`` objects, e.g. GaugeMetricFamily)."""
        ...


@runtime_checkable
class BackgroundPlugin(Plugin, Protocol):
    """A plugin with a loop running for the service's lifetime (e.g. ElasticQuota's status writer).

    The app starts ``run_background`` after the source started and cancels it on shutdown; the loop
    reaches the cluster through its handle (``handle.client``, ``handle.has_synced()``).
    """

    async def run_background(self) -> None:
        """Run until cancelled."""
        ...
