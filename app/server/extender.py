"""The extender verbs as plain Python over the snapshot cache and the framework (no HTTP here).

Each verb takes a validated wire model and returns the wire answer as a JSON-shaped dict, as
k8s.io/kube-scheduler/extender/v1 spells it. Errors of the pod or the plugins are answered in
the protocol's ``Error`` field; malformed input is rejected earlier with HTTP 400.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import orjson
from cachetools import LRUCache

from app.api.extender import RAW_NULL, ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs
from app.api.jsonbytes import stored_json
from app.cache.changestamps import ChangeStamps, Stamp
from app.cache.nodestate import NodeState
from app.cache.podinfo import PodInfo, parse_pod
from app.cache.snapshot import ClusterCache
from app.framework.bindingcycle import BindingCycle
from app.framework.cyclestate import CycleState
from app.framework.interfaces import (
    FilterExplainer,
    FilterFailures,
    NodeBatch,
    NodeDetailPlugin,
    PodVerdictPlugin,
    PreemptionPlugin,
)
from app.framework.preemption import Candidate, fit_shortfall
from app.framework.runtime import Framework, ScoreError, ScoreResult
from app.framework.status import SUCCESS, Code, Status
from app.plugins.noderesources.fit import kube_scheduler_fit
from app.server.wire import BadRequest, ExtenderCall, HostPriorityEncoder, NameLists
from app.sources.base import Source

log = logging.getLogger(__name__)

#: Reason for a node the cache does not know (upstream LoadAware's "node not found").
REASON_NODE_NOT_FOUND = "node not found"

#: A v1 Pod's TypeMeta as JSON members, first (the API server's order) or last (the Kubernetes source's
#: ``fill`` of a list item): what a cached Pod may carry that kube-scheduler's copy does not.
_POD_TYPE_HEAD = b'{"kind":"Pod","apiVersion":"v1",'
_POD_TYPE_TAIL = b',"kind":"Pod","apiVersion":"v1"}'

#: The ExtenderArgs of /filter and /prioritize: as the HTTP verbs decode them (the pod kept as bytes) or validated.
VerbArgs = ExtenderArgs | ExtenderCall

#: Pods whose parse is kept by their request JSON (:meth:`ExtenderService.request_pod`): kube-scheduler's
#: ``/prioritize`` follows its ``/filter`` for the same pod, so a few suffice.
_BY_JSON_MAX = 64


class _MetaHead(msgspec.Struct):
    """What :meth:`ExtenderService._cached_parse_json` reads of a pod's metadata (the rest is skipped)."""

    uid: str = ""
    resourceVersion: str = ""
    managedFields: msgspec.Raw = RAW_NULL


class _PodHead(msgspec.Struct):
    """What :meth:`ExtenderService._cached_parse_json` reads of a pod (the rest is skipped)."""

    metadata: _MetaHead | None = None
    kind: msgspec.Raw = RAW_NULL
    apiVersion: msgspec.Raw = RAW_NULL


_POD_HEAD = msgspec.json.Decoder(_PodHead)


def _same_as_stored(stored: bytes, probe: bytes, type_meta: bool) -> bool:
    """Whether a request's pod JSON ``probe`` (managedFields already left out) is the cache's ``stored`` JSON of
    it byte for byte, but for the TypeMeta: when the request carries no ``kind`` / ``apiVersion``
    (``type_meta`` False: a typed Go object such as kube-scheduler's informer copy leaves them out), the
    stored JSON may have them at its head (the API server's watch) or tail. Any other difference (content,
    key order) is a miss."""
    if stored == probe:
        return True
    if type_meta or probe[:1] != b"{" or probe == b"{}":
        return False
    members = probe[1:-1]
    return stored == _POD_TYPE_HEAD + members + b"}" or stored == b"{" + members + _POD_TYPE_TAIL


_MESSAGE = attrgetter("message")

#: Shared name lists kept (:class:`~app.server.wire.NameLists`) and batches kept for them: enough for
#: kube-scheduler's rotating ``/filter`` windows to come round again (50 windows at 500 nodes) with the
#: passing list each ``/filter`` keeps in between (about 100 distinct lists between two uses of a window).
_SHARED_BATCHES = 128


#: A preemption decided at filter time: the plugin that runs it, the preemptor and the chosen candidate.
Preemption = tuple[PreemptionPlugin, PodInfo, Candidate]

#: Seconds a ``/prioritize`` answer worked out ahead (:meth:`ExtenderService.score_ahead`) stays usable: kube-scheduler
#: asks within milliseconds of the ``/filter`` answer. The bound keeps what the scores read of the clock
#: (NodeMetric freshness, LoadAware's estimation windows) within this much of the request.
AHEAD_MAX_AGE_S = 0.25


@dataclass(slots=True)
class _Ahead:
    """A ``/prioritize`` answer worked out ahead: for the pod of ``pod_json`` over ``names``, while ``stamp``
    holds; ``at`` is ``time.monotonic()`` then."""

    pod_json: bytes
    names: list[str]
    stamp: Stamp
    answer: orjson.Fragment
    at: float


class ExtenderService:
    """Answers filter / prioritize / preempt / bind / explain.

    Args:
        cache: the snapshot cache.
        framework: the enabled plugins.
        source: where bindings are written.
    """

    def __init__(self, cache: ClusterCache, framework: Framework, source: Source) -> None:
        self.cache = cache
        self.framework = framework
        self.source = source
        self.binding = BindingCycle(cache, framework)
        self._recent: LRUCache[str, tuple[PodInfo, dict[str, Any]]] = LRUCache(maxsize=4096)
        #: the PodInfo of the last requests' pods by their exact JSON bytes, oldest first
        self._by_json: dict[bytes, PodInfo] = {}
        self._preemptions: set[asyncio.Task[None]] = set()
        #: Nodes the filter verb rejected since start, by (plugin, status label): /metrics reads it.
        self.rejections: Counter[tuple[str, str]] = Counter()
        self._priorities = HostPriorityEncoder()
        #: the batch :meth:`_batch` answers again: (table generation, the names it is for, the batch)
        self._last_batch: tuple[int, list[str], NodeBatch] | None = None
        #: recent NodeNames lists by their JSON bytes (:func:`~app.server.wire.decode_extender_args`)
        self.name_lists = NameLists(_SHARED_BATCHES)
        #: batches of shared name lists (:attr:`~app.server.wire.ExtenderCall.names_shared`) by the list's id:
        #: (the list, table generation, the batch); the entry holds the list, so its id is not reused meanwhile
        self._shared_batches: dict[int, tuple[list[str], int, NodeBatch]] = {}
        #: change counters of the cache's nodes, for answers worked out ahead (:meth:`score_ahead`)
        self.stamps = ChangeStamps(cache.table)
        cache.add_listener(self.stamps)
        #: what the last ``/filter`` passed, to score ahead: (pod JSON, pod, passing names, their rows)
        self._to_score: tuple[bytes, PodInfo, list[str], npt.NDArray[np.int64]] | None = None
        self._ahead: _Ahead | None = None
        #: ``/prioritize`` calls answered with the answer worked out ahead, and calls that found one unusable
        #: (/metrics reads them as ``koord_extender_prioritize_ahead_total{outcome}``)
        self.ahead_outcomes: Counter[str] = Counter()

    # ------------------------------------------------------------------ helpers
    def pod_info(self, obj: dict[str, Any]) -> PodInfo:
        """Parse the request's pod, reusing the parse of an equal pod (same uid and resourceVersion, and
        the same content: a request that reuses the pair with other content is parsed again; comparing
        the two dicts costs about 2 us for a 3 KB pod, a parse about 35 us).

        The first request for a pod version (its ``/filter``) reuses the cache's own parse of it, made
        when its watch event arrived (:meth:`_cached_parse`), instead of parsing it a second time.

        Raises:
            PodError: the pod is malformed.
        """
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        uid = rv = ""
        if isinstance(meta, dict):
            uid, rv = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        if uid:
            hit = self._recent.get(uid)
            if hit is not None and rv and hit[0].resource_version == rv and hit[1] == obj:
                return hit[0]
        pod = (self._cached_parse(uid, rv, obj) if uid and rv else None) or parse_pod(obj)
        if uid:
            self._recent[uid] = (pod, obj)
        return pod

    def request_pod(self, args: VerbArgs) -> PodInfo:
        """The PodInfo of the request's pod: for an :class:`~app.server.wire.ExtenderCall` whose pod JSON is
        byte for byte that of a recent request (kept for the last few pods), that request's PodInfo, with
        no decode at all (a dict lookup of the bytes, about 2 us for a 3 KB pod, against 10-20 us to decode
        and compare); else the cache's parse of the same version when the bytes match its stored JSON
        (:meth:`_cached_parse_json`, the first ``/filter`` of a pod the watch brought), else :meth:`pod_info` of
        the decoded pod; then kept by its bytes. Equal bytes are an equal pod, so the answer is what
        :meth:`pod_info` would give.

        Raises:
            PodError: the pod is malformed.
            BadRequest: the pod's JSON does not decode (:attr:`~app.server.wire.ExtenderCall.Pod`).
        """
        pod_json = args.pod_json if isinstance(args, ExtenderCall) else None
        if pod_json is None:
            return self.pod_info(args.Pod)
        by_json = self._by_json
        pod = by_json.get(pod_json)
        if pod is None:
            pod = self._cached_parse_json(pod_json) or self.pod_info(args.Pod)
            if len(by_json) >= _BY_JSON_MAX:
                del by_json[next(iter(by_json))]
            by_json[pod_json] = pod
        return pod

    def _cached_parse_json(self, pod_json: bytes) -> PodInfo | None:
        """:meth:`_cached_parse` from the request pod's JSON bytes, without decoding them: the cache's PodInfo of
        the pod when its stored JSON is ``pod_json`` byte for byte but for ``metadata.managedFields`` (cut out
        of ``pod_json`` where msgspec found it, when it occurs once) and the TypeMeta, else None (the caller
        then decodes the pod and tries :meth:`pod_info`). Equal bytes are an equal pod, so the answer is what
        :meth:`_cached_parse` gives the decoded pod; the stored JSON is orjson's output, so a match also
        means the bytes are JSON orjson takes. Reading uid, resourceVersion and managedFields costs about
        3 us for a 3 KB pod, decoding it and encoding it again for :meth:`_cached_parse` about 15 us.
        """
        try:
            head = _POD_HEAD.decode(pod_json)
        except (msgspec.DecodeError, RecursionError):
            return None
        meta = head.metadata
        if meta is None or not meta.uid or not meta.resourceVersion:
            return None
        found = self._stored_version(meta.uid, meta.resourceVersion)
        if found is None:
            return None
        probe = pod_json
        if meta.managedFields != RAW_NULL:
            field = b'"managedFields":' + bytes(meta.managedFields)
            at = probe.find(field)
            if at < 0 or probe.find(field, at + 1) >= 0:  # spaced out, or found twice: not cut out here
                return None
            end = at + len(field)
            if probe[end : end + 1] == b",":
                probe = probe[:at] + probe[end + 1 :]
            elif probe[at - 1 : at] == b",":
                probe = probe[: at - 1] + probe[end:]
            else:  # spaced out (a uid is always beside it)
                return None
        cached, stored = found
        type_meta = head.kind != RAW_NULL or head.apiVersion != RAW_NULL
        return cached if _same_as_stored(stored, probe, type_meta) else None

    def _cached_parse(self, uid: str, rv: str, obj: dict[str, Any]) -> PodInfo | None:
        """The cache's PodInfo of pod ``uid`` when it is exactly what :func:`parse_pod` would make of ``obj``,
        else None.

        It is when the cache holds the same version (``resourceVersion`` ``rv``), not assumed by a
        binding (an assumed view carries the chosen node, not ``spec.nodeName``), and the cached Pod
        object is ``obj`` byte for byte as JSON, but for what :func:`parse_pod` does not read:
        ``managedFields`` (the Kubernetes source drops them on arrival) and the TypeMeta (``kind`` /
        ``apiVersion``, which a typed Go object such as kube-scheduler's informer copy leaves out of its
        JSON, and the API server's watch puts first). Any other difference (content, key order) is a
        miss, and the request's pod is parsed. Encoding ``obj`` and comparing costs about 5 us for a
        2 KB pod, a parse about 35 us.
        """
        found = self._stored_version(uid, rv)
        if found is None:
            return None
        meta = obj["metadata"]
        probe = obj
        if "managedFields" in meta:
            probe = dict(obj)
            probe["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
        try:
            # plain orjson is encode_object's JSON for a decoded request (no datetimes, no non-string keys)
            # without its exact-size copy
            encoded = orjson.dumps(probe)
        except TypeError:
            return None
        cached, stored = found
        return cached if _same_as_stored(stored, encoded, "kind" in obj or "apiVersion" in obj) else None

    def _stored_version(self, uid: str, rv: str) -> tuple[PodInfo, bytes] | None:
        """The cache's PodInfo of pod ``uid`` and its stored JSON (managedFields dropped, as the Kubernetes
        source stores it) when the cache holds version ``rv`` of it, not assumed by a binding (an assumed view
        carries the chosen node, not ``spec.nodeName``); else None. What :meth:`_cached_parse` and
        :meth:`_cached_parse_json` compare a request's pod with."""
        cache = self.cache
        cached = cache.pods.get(uid)
        if cached is None or cached.resource_version != rv or uid in cache.assumed:
            return None
        stored = cache.pod_objects.encoded(uid)
        if stored is None:
            return None
        try:
            return cached, stored_json(stored)
        except ValueError:
            return None

    @staticmethod
    def candidate_names(args: VerbArgs) -> list[str]:
        """Node names of the request: ``NodeNames`` (nodeCacheCapable) or the names in ``Nodes``."""
        if args.NodeNames is not None:
            return args.NodeNames
        if args.Nodes is not None:
            return [_meta_field(n, "name", f"Nodes.items[{i}]") for i, n in enumerate(args.Nodes.items)]
        return []

    def _call_batch(self, args: VerbArgs, names: list[str]) -> tuple[NodeBatch, Sequence[int], list[int]]:
        """:meth:`_batch` of the request's ``names``; for a shared name list
        (:attr:`~app.server.wire.ExtenderCall.names_shared`) whose nodes are all known, the batch kept for
        that very list while the node table's generation stays (no name hashed or looked up), else found and
        kept for it."""
        if not (isinstance(args, ExtenderCall) and args.names_shared):
            return self._batch(names)
        generation = self.cache.table.generation
        shared = self._shared_batches
        kept = shared.pop(id(names), None)
        if kept is not None and kept[0] is names and kept[1] == generation:
            shared[id(names)] = kept  # now the newest, as its list in name_lists
            return kept[2], range(len(names)), []
        found = self._batch(names)
        if not found[2]:
            self._keep_shared(names, generation, found[0])
        return found

    def _keep_shared(self, names: list[str], generation: int, batch: NodeBatch) -> None:
        """Keep ``batch`` (of all of ``names``, a list no one changes, at ``generation``) for :meth:`_call_batch`."""
        shared = self._shared_batches
        shared.pop(id(names), None)
        if len(shared) >= _SHARED_BATCHES:
            del shared[next(iter(shared))]
        shared[id(names)] = (names, generation, batch)

    def _batch(self, names: list[str]) -> tuple[NodeBatch, Sequence[int], list[int]]:
        """(batch of known nodes, their positions in ``names``, positions of unknown nodes).

        A batch of names all known is kept with the node table's
        :attr:`~app.cache.nodetable.NodeTable.generation`: a call with an equal name list (same names, same
        order) while no node got or lost a row answers it again. That is ``/prioritize`` after ``/filter``,
        which keeps the nodes it passes (:meth:`_remember_batch`): comparing 230 names costs a third of
        hashing and looking them up again. The kept name list is the request's own (a request's lists are
        not changed once decoded); no caller writes a batch's rows (a read-only flag on them would guard it,
        but numpy's ``take`` with a read-only index array is slower: +15-18 us per ``/filter``).
        """
        table = self.cache.table
        generation = table.generation
        last = self._last_batch
        if last is not None and last[0] == generation and last[1] == names:
            return last[2], range(len(names)), []
        rows, missing = table.rows_of(names)
        if not missing:
            batch = NodeBatch(rows, names)
            self._last_batch = (generation, names, batch)
            return batch, range(len(names)), []
        known = np.flatnonzero(rows >= 0)
        positions = known.tolist()
        return NodeBatch(rows[known], [names[i] for i in positions]), positions, missing

    def _remember_batch(self, names: list[str], rows: npt.NDArray[np.int64], share: bool) -> None:
        """Keep the known nodes ``names`` at ``rows`` (of the node table as it is now; parallel) as the batch
        :meth:`_batch` answers a call with the same names: ``/filter`` keeps the nodes it passes, the names
        kube-scheduler sends to the ``/prioritize`` that follows. ``names`` is copied (the caller hands its
        list on in the answer); pass ``rows`` as an array no one else holds. With ``share`` (the request's
        names came through :attr:`name_lists`), the copy is also kept there by its JSON bytes (orjson's, as
        the answer spells the list and the client sends it back), with the batch for :meth:`_call_batch`:
        the ``/prioritize`` then neither decodes the names nor looks them up."""
        kept = list(names)
        generation = self.cache.table.generation
        batch = NodeBatch(rows, kept)
        self._last_batch = (generation, kept, batch)
        if share:
            try:
                encoded = orjson.dumps(kept)
            except TypeError:  # a name orjson does not encode (a lone surrogate): nothing to share
                return
            self.name_lists.keep(encoded, kept)
            self._keep_shared(kept, generation, batch)

    def _scores(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> ScoreResult | None:
        """The framework's scores, or None when a PreScore plugin failed (logged; the pod then gets
        no score from us, as kube-scheduler treats a failing extender priority)."""
        try:
            return self.framework.run_scores(state, pod, batch)
        except ScoreError as exc:
            log.warning("scoring pod %s failed: %s", pod.key, exc)
            return None

    # ------------------------------------------------------------------ filter
    def filter(self, args: VerbArgs) -> dict[str, Any]:
        """ExtenderFilterResult for ``args``: passing nodes in request order, failures with reasons.

        Decides no preemption (:meth:`filter_and_preempt` does)."""
        return self._filter(args, preempt=False)[0]

    def filter_and_preempt(
        self, args: VerbArgs, *, fragments: bool = False
    ) -> tuple[dict[str, Any], Preemption | None]:
        """:meth:`filter` as kube-scheduler's scheduling attempt: when no candidate passes, the framework's
        unschedulable hook runs (upstream's PostFilter moment); when a PreFilter rejected the pod as
        Unschedulable, the framework's preemption inside the service
        (:meth:`~app.framework.runtime.Framework.run_post_filter`) over the known candidate nodes. The answer
        is the same either way (the nodes fail); the preemption returned, if any, is to be started with
        :meth:`start_preemption` once the answer is on its way.

        With ``fragments`` (the HTTP verb, which encodes the answer with orjson), an answer passing every
        candidate of a ``NodeNames`` request gives the request's own JSON array back as an
        :class:`orjson.Fragment` (no list copied, no name encoded again: the cost of the answer no longer grows
        with the candidates); otherwise ``NodeNames`` is a list."""
        return self._filter(args, preempt=True, fragments=fragments)

    def start_preemption(self, preemption: Preemption) -> None:
        """Run the chosen plugin's ``prepare_candidate`` (evictions, nomination) as a background task on
        the running event loop (as kube-scheduler's async preemption), kept until it ends.

        Raises:
            RuntimeError: no event loop is running.
        """
        task = asyncio.get_running_loop().create_task(_prepare(preemption))
        self._preemptions.add(task)
        task.add_done_callback(self._preemptions.discard)

    def _filter(
        self, args: VerbArgs, *, preempt: bool, fragments: bool = False
    ) -> tuple[dict[str, Any], Preemption | None]:
        preemption: Preemption | None = None
        self._to_score = None
        names = self.candidate_names(args)
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        pod = self.request_pod(args)  # PodError, BadRequest -> HTTP 400 upstream of here
        passing_names: list[str] | None = None  # the names of passing_pos, when worked out
        try:
            state = self.framework.new_cycle()
            batch, positions, missing = self._call_batch(args, names)
            for pos in missing:
                failed[names[pos]] = REASON_NODE_NOT_FOUND
            pre = self.framework.run_pre_filter(state, pod)
            if not pre.is_success():
                target = unresolvable if pre.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
                for name in batch.names:
                    target[name] = pre.message
                self.rejections[(pre.plugin, pre.code.label)] += len(batch)
                if preempt and pre.code == Code.UNSCHEDULABLE and len(batch):
                    chosen = self.framework.run_post_filter(state, pod, args.Pod, pre, batch.names)
                    if chosen is not None:
                        preemption = (chosen[0], pod, chosen[1])
                failures: dict[int, Status] = {}
                passing_pos: Sequence[int] = []
            else:
                failures, survivors = self.framework.filter_survivors(state, pod, batch)
                share = isinstance(args, ExtenderCall) and args.names_shared
                if survivors is None:  # no node failed
                    passing_pos = positions
                    if missing:  # else _batch already keeps this batch for these names
                        self._remember_batch(batch.names, batch.rows, share)
                    if len(batch):
                        self._keep_to_score(args, pod, batch.names, batch.rows)
                else:  # ``survivors``: the passing positions in the batch, ascending
                    # the batch's positions are the request's own when every name was known (no list -> array)
                    survivor_list = survivors.tolist()
                    passing_pos = survivor_list if not missing else np.asarray(positions)[survivors].tolist()
                    if survivor_list:
                        passing_names = list(map(batch.names.__getitem__, survivor_list))
                        passing_rows = batch.rows[survivors]
                        self._remember_batch(passing_names, passing_rows, share)
                        self._keep_to_score(args, pod, passing_names, passing_rows)
                self._record_failures(batch.names, failures, failed, unresolvable)
        except Exception as exc:  # a plugin bug must not take the service down
            log.exception("filter failed")
            error: dict[str, Any] = {
                "Nodes": None,
                "NodeNames": None,
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": {},
                "Error": str(exc),
            }
            return error, None
        if preempt and names and not passing_pos:
            self.framework.run_unschedulable(state, pod)  # upstream's PostFilter moment
        result: dict[str, Any] = {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }
        if args.NodeNames is not None or args.Nodes is None:
            everyone = len(passing_pos) == len(names)  # every candidate passed: the request's own list
            names_json = args.names_json if fragments and isinstance(args, ExtenderCall) else None
            if everyone and names_json is not None:
                result["NodeNames"] = orjson.Fragment(names_json)
            elif everyone:
                result["NodeNames"] = list(names)
            else:
                result["NodeNames"] = passing_names if passing_names is not None else [names[p] for p in passing_pos]
        else:
            items = args.Nodes.items
            result["Nodes"] = {"metadata": args.Nodes.metadata or {}, "items": [items[p] for p in passing_pos]}
        return result, preemption

    def _record_failures(
        self, names: list[str], failures: FilterFailures, failed: dict[str, str], unresolvable: dict[str, str]
    ) -> None:
        """Add the batch's ``failures`` (positions into ``names``) to ``failed`` / ``unresolvable`` (name ->
        message, in the order of ``failures``) and to :attr:`rejections`.

        Plugins share one Status per reason, so the few distinct ones are found by identity: with one code class
        for all (the usual case), the names and messages go in with one C-level ``dict.update`` of a zip,
        else one by one (the same order either way)."""
        statuses = failures.values()
        distinct = dict(zip(map(id, statuses), statuses, strict=True))
        if len(distinct) == 1:
            status = next(iter(distinct.values()))
            self.rejections[(status.plugin, status.code.label)] += len(failures)
        else:
            for key, count in Counter(map(id, statuses)).items():
                status = distinct[key]
                self.rejections[(status.plugin, status.code.label)] += count
        unresolvable_code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        codes = {s.code == unresolvable_code for s in distinct.values()}
        if len(codes) == 1:
            target = unresolvable if codes.pop() else failed
            target.update(zip(map(names.__getitem__, failures), map(_MESSAGE, statuses), strict=True))
            return
        for i, status in failures.items():
            target = unresolvable if status.code == unresolvable_code else failed
            target[names[i]] = status.message

    # ------------------------------------------------------------------ prioritize
    def prioritize_answer(self, args: VerbArgs) -> orjson.Fragment:
        """The HostPriorityList (``[{"Host": name, "Score": 0..10}, ...]`` in request order; unknown nodes
        score 0) of :meth:`prioritize_scores`, already encoded for the HTTP verb: no dict per node.

        Raises:
            PodError: the request's pod is malformed (HTTP 400 upstream of here).
        """
        ahead = self._ahead
        if ahead is not None:
            self._ahead = None
            if self._ahead_answers(ahead, args):
                self.ahead_outcomes["used"] += 1
                return ahead.answer
            self.ahead_outcomes["unusable"] += 1
        names, scores, batch = self._prioritize(args)
        if len(batch) == len(names):  # every node known: the batch's rows are the names' rows, found by row
            return self._priorities.encode_rows(names, batch.rows, scores, self.cache.table.generation)
        return self._priorities.encode(names, scores.tolist())

    def _keep_to_score(self, args: VerbArgs, pod: PodInfo, names: list[str], rows: npt.NDArray[np.int64]) -> None:
        """Keep what ``/filter`` passed (``names``, all known, at ``rows``) for :meth:`score_ahead`, when the request's
        pod came as bytes (an HTTP call with ``NodeNames``): the ``/prioritize`` that follows is matched by them. Not
        for a single node: kube-scheduler then binds without asking ``/prioritize`` (``schedulePod``'s one feasible
        node)."""
        if (
            len(names) > 1
            and isinstance(args, ExtenderCall)
            and args.pod_json is not None
            and args.NodeNames is not None
        ):
            self._to_score = (args.pod_json, pod, names, rows)

    def score_ahead(self) -> None:
        """Work out the ``/prioritize`` answer for what the last ``/filter`` passed, once its answer is on its way.

        kube-scheduler asks ``/prioritize`` for the pod and the nodes it kept after its own scoring, which takes a
        few milliseconds; this moves the scoring out of that call. The answer is used by :meth:`prioritize_answer`
        only for the same pod JSON and the same names, within :data:`AHEAD_MAX_AGE_S`, while no change counter of
        those nodes moved (:class:`~app.cache.changestamps.ChangeStamps`: nothing about them changed, nor anything
        tied to no node): the answer is then what scoring at the request gives. A plugin error drops it (the request
        then scores and meets the error itself). Does nothing after a ``/filter`` that passed fewer than two nodes or
        came without pod bytes, nor while the answer worked out last time was never asked for (a scheduler
        configured without ``prioritizeVerb`` pays this work at most every other pod, until a ``/prioritize``
        comes).
        """
        job, self._to_score = self._to_score, None
        if job is None:
            return
        if self._ahead is not None:  # the last one was never asked for (no prioritizeVerb?): wait for a call
            self._ahead = None
            return
        pod_json, pod, names, rows = job
        table = self.cache.table
        try:
            stamp = self.stamps.stamp(rows)
            result = self._scores(self.framework.new_cycle(), pod, NodeBatch(rows, names))
            scores = result.extender_scores() if result is not None else np.zeros(len(names), dtype=np.int64)
            answer = self._priorities.encode_rows(names, rows, scores, table.generation)
        except Exception:  # a plugin bug: the request meets it again and answers as it always did
            log.debug("scoring ahead for a /prioritize failed", exc_info=True)
            return
        self._ahead = _Ahead(pod_json, names, stamp, answer, time.monotonic())

    def _ahead_answers(self, ahead: _Ahead, args: VerbArgs) -> bool:
        """Whether ``ahead`` is the answer to the ``/prioritize`` call ``args`` (see :meth:`score_ahead`)."""
        if not isinstance(args, ExtenderCall) or args.pod_json != ahead.pod_json:
            return False
        names = args.NodeNames
        return (
            (names is ahead.names or names == ahead.names)
            and time.monotonic() - ahead.at <= AHEAD_MAX_AGE_S
            and self.stamps.unchanged(ahead.stamp)
        )

    def prioritize_scores(self, args: VerbArgs) -> tuple[list[str], list[int]]:
        """The request's node names and their extender scores 0..10 (parallel lists); unknown nodes score 0.

        Raises:
            PodError: the request's pod is malformed.
        """
        names, scores, _ = self._prioritize(args)
        return names, scores.tolist()

    def _prioritize(self, args: VerbArgs) -> tuple[list[str], npt.NDArray[np.int64], NodeBatch]:
        """:meth:`prioritize_scores` (the scores as int64, parallel to the names) and the batch of the known
        nodes it scored."""
        names = self.candidate_names(args)
        pod = self.request_pod(args)
        state = self.framework.new_cycle()
        batch, positions, _ = self._call_batch(args, names)
        result = self._scores(state, pod, batch) if len(batch) else None
        if result is None:
            return names, np.zeros(len(names), dtype=np.int64), batch
        known = result.extender_scores()
        if len(known) == len(names):  # every node known: positions are 0..n-1
            return names, known, batch
        scores = np.zeros(len(names), dtype=np.int64)
        scores[np.asarray(positions, dtype=np.int64)] = known
        return names, scores, batch

    # ------------------------------------------------------------------ preempt
    def preempt(self, args: ExtenderPreemptionArgs) -> dict[str, Any]:
        """ExtenderPreemptionResult: the nodes whose victims we evaluated and confirm, with those victims.

        kube-scheduler sends, per candidate node, the victims its in-tree plugins chose (as MetaVictims
        uids with nodeCacheCapable, else as full pods); the answer is always ``NodeNameToMetaVictims``
        (kube-scheduler's ``convertToVictims`` maps the uids back). A node is left out of the answer
        (the reason is logged at debug level) when:

        - it is unknown to the cache, or kube-scheduler proposed no victim there;
        - a victim's uid is unknown to the cache: we cannot judge what removing it frees, and
          kube-scheduler fails the whole preemption on a uid it does not hold;
        - the PostFilter plugins drop it (ElasticQuota: no victim its rules allow, or the quota or the
          node still does not fit);
        - the plugins narrowed the victims and kube-scheduler's in-tree reason is one we cannot
          evaluate: the pod fits the node's resources and pod count as it is (so kube-scheduler chose
          the victims for host ports, anti-affinity, volumes, ...), or the narrowed list leaves the
          node short (``Too many pods``, ``Insufficient cpu``; :func:`~app.framework.preemption.fit_shortfall`);
        - no victim is left (kube-scheduler answers an empty list with ``expected at least one victim
          pod on node``), or the filter plugins still reject the pod with the victims gone.

        ``NumPDBViolations`` is kube-scheduler's count, capped at the number of victims kept (we hold no
        PodDisruptionBudgets to recount it). Victims keep kube-scheduler's order.
        """
        pod = self.pod_info(args.Pod)
        state = self.framework.new_cycle()
        candidates = self._preempt_candidates(args)
        names: list[str] = []
        removed: list[list[PodInfo]] = []
        kept: dict[str, tuple[list[str], int]] = {}
        for node, (uids, pdb) in candidates.items():
            if node not in self.cache.nodes:
                _drop(pod, node, "node not found")
                continue
            if not uids:
                _drop(pod, node, "no victims proposed")
                continue
            unknown = [u for u in uids if u not in self.cache.pods]
            if unknown:
                _drop(pod, node, f"victims unknown to the cache: {unknown}")
                continue
            proposed = [self.cache.pods[u] for u in uids]
            allowed, status = self.framework.run_select_victims(state, pod, node, proposed)
            if not status.is_success():
                _drop(pod, node, f"{status.plugin}: {status.message}")
                continue
            allowed_uids = {p.uid for p in allowed}
            keep = [u for u in uids if u in allowed_uids]
            if not keep:
                _drop(pod, node, "no victims left")
                continue
            gone = [p for p in proposed if p.uid in allowed_uids]
            if len(keep) < len(uids):
                why = _outside_reason(self.cache.nodes[node], pod, gone)
                if why:
                    _drop(pod, node, f"victims narrowed, {why}")
                    continue
            kept[node] = (keep, min(pdb, len(keep)))
            names.append(node)
            removed.append(gone)
        out: dict[str, Any] = {}
        if names:
            rows, _ = self.cache.table.rows_of(names)
            failures = self.framework.run_filters(state, pod, NodeBatch(rows, names, removed))
            for i, node in enumerate(names):
                if i in failures:
                    _drop(pod, node, f"still unschedulable without the victims: {failures[i].message}")
                    continue
                uids, pdb = kept[node]
                out[node] = {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": pdb}
        return {"NodeNameToMetaVictims": out}

    @staticmethod
    def _preempt_candidates(args: ExtenderPreemptionArgs) -> dict[str, tuple[list[str], int]]:
        """Victim uids and PDB-violation count per node, from either wire form (MetaVictims preferred).

        Raises:
            BadRequest: a victim pod's metadata is malformed (the message names the field).
        """
        candidates: dict[str, tuple[list[str], int]] = {}
        if args.NodeNameToMetaVictims is not None:
            for node, mv in args.NodeNameToMetaVictims.items():
                candidates[node] = ([p.UID for p in mv.Pods], mv.NumPDBViolations)
        elif args.NodeNameToVictims is not None:
            for node, v in args.NodeNameToVictims.items():
                uids = [_meta_field(p, "uid", f"NodeNameToVictims.{node}.Pods[{i}]") for i, p in enumerate(v.Pods)]
                candidates[node] = (uids, v.NumPDBViolations)
        return candidates

    # ------------------------------------------------------------------ bind
    async def bind(
        self, args: ExtenderBindingArgs, caller_gone: Callable[[], Awaitable[None]] | None = None
    ) -> dict[str, Any]:
        """ExtenderBindingResult: run the binding cycle (:mod:`app.framework.bindingcycle`) for the pod.

        The pod must be one the source reported: the cached pod of ``PodUID`` whose namespace and name are
        ``PodNamespace`` / ``PodName`` (:meth:`bind_target`). A pod only seen in a filter or prioritize call
        is not a pod: a bind for it, or one naming a cached pod's uid under another name, is refused
        and nothing is written. Every failure is answered in ``Error`` (kube-scheduler then forgets its
        assumption and requeues the pod). ``caller_gone`` completes when the HTTP client disconnected (a
        pod waiting at Permit is then rejected).
        """
        pod, refusal = self.bind_target(args)
        if pod is None:
            log.info("bind of pod %s/%s (uid %r) refused: %s", args.PodNamespace, args.PodName, args.PodUID, refusal)
            return {"Error": refusal}
        outcome = await self.binding.run(pod, args.Node, caller_gone)
        return {"Error": outcome.error}

    def bind_target(self, args: ExtenderBindingArgs) -> tuple[PodInfo | None, str]:
        """The cached pod ``args`` names, matched by uid, namespace and name, or (None, why not).

        A request without ``PodNamespace`` means ``default``, as kube-scheduler's binder reads it; one without
        ``PodUID`` (kube-scheduler always sends it) binds the cached pod of that name, as the API server takes a
        Binding without a uid precondition. The refusals:

        - ``pods "<name>" not found``: no cached pod has the uid (and none has the name);
        - ``pod <ns>/<name> has uid <cached>, not <PodUID>``: the pod of that name is another one (recreated);
        - ``pod uid <PodUID> is pod <ns>/<name>, not <PodNamespace>/<PodName>``: the uid names another pod.
        """
        namespace = args.PodNamespace or "default"
        same_name = self.cache.find_pod("", namespace, args.PodName)
        if not args.PodUID:
            return (same_name, "") if same_name is not None else (None, f'pods "{args.PodName}" not found')
        pod = self.cache.pods.get(args.PodUID)
        if pod is None:
            if same_name is not None:
                return None, f"pod {namespace}/{args.PodName} has uid {same_name.uid}, not {args.PodUID}"
            return None, f'pods "{args.PodName}" not found'
        if pod.namespace != namespace or pod.name != args.PodName:
            return None, f"pod uid {args.PodUID} is pod {pod.key}, not {namespace}/{args.PodName}"
        return pod, ""

    # ------------------------------------------------------------------ explain
    def _kube_scheduler_verdicts(self, pod: PodInfo, name: str) -> dict[str, dict[str, str]]:
        """kube-scheduler's own filter verdicts the extender can compute (``NodeResourcesFit`` on cpu, memory,
        ephemeral-storage, hugepages and the pod count), by plugin name, as ``{"status", "reason"}``."""
        node = self.cache.nodes[name]
        requested, pods = node.requested, len(node.pods)
        if pod.uid in node.pods:  # already there (bound or assumed): judge it as if it were not
            requested = {k: v - pod.requests.get(k, 0) for k, v in requested.items()}
            pods -= 1
        status = kube_scheduler_fit(pod, node.allocatable, requested, pods)
        verdict = {"status": "Success", "reason": ""} if status.is_success() else _verdict(status)
        return {"NodeResourcesFit": verdict}

    def _explain_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[Status, dict[str, dict[str, str]]]:
        """Every PreFilter's verdict by plugin name (``Success``, ``Skip`` or the failure), and the first failure
        as :meth:`~app.framework.runtime.Framework.run_pre_filter` answers it (SUCCESS when none failed).
        Unlike a scheduling cycle every plugin is asked, so a failing gang does not hide the quota's verdict."""
        first = SUCCESS
        verdicts: dict[str, dict[str, str]] = {}
        for plugin in self.framework.pre_filter_plugins:
            status = plugin.pre_filter(state, pod)
            if status.is_success():
                verdicts[plugin.name] = {"status": "Success", "reason": ""}
            elif status.is_skip():
                state.skip_filter.add(plugin.name)
                verdicts[plugin.name] = {"status": "Skip", "reason": ""}
            else:
                verdicts[plugin.name] = _verdict(status)
                if first.is_success():
                    first = status.with_plugin(plugin.name)
        return first, verdicts

    def explain(self, args: ExtenderArgs) -> dict[str, Any]:
        """Why each node passes or fails, and how it scores (docs/cli.md, `koord explain`).

        Per node: ``kubeScheduler`` holds kube-scheduler's own verdicts computed as it would
        (:func:`~app.plugins.noderesources.fit.kube_scheduler_fit`: cpu, memory, ... are checked by
        kube-scheduler before it calls the extender), ``filter`` each plugin's, ``feasible`` all of them;
        ``scores``, ``total`` and ``extenderScore`` only for feasible nodes (``{}`` / ``None`` otherwise, as
        kube-scheduler scores only those). ``preFilter`` holds every PreFilter plugin's verdict on the pod (quota,
        gang, reservation). Plugins with a verdict on the pod as a whole
        (:class:`~app.framework.interfaces.PodVerdictPlugin`) add it under ``podVerdicts`` by plugin name."""
        names = self.candidate_names(args)
        if args.NodeNames is None and args.Nodes is None:
            names = sorted(self.cache.nodes)  # no candidates given: explain every node
        pod = self.pod_info(args.Pod)
        state = self.framework.new_cycle()
        batch, positions, missing = self._batch(names)
        nodes: dict[str, Any] = {}
        for pos in missing:
            nodes[names[pos]] = {
                "feasible": False,
                "kubeScheduler": {},
                "filter": {"Snapshot": {"status": "Unschedulable", "reason": REASON_NODE_NOT_FOUND}},
                "scores": {},
                "total": None,
                "extenderScore": None,
            }
        pre, pre_verdicts = self._explain_pre_filter(state, pod)
        per_plugin = self.framework.explain_filters(state, pod, batch) if pre.is_success() else {}
        unjudged = {
            p.name: p.explain_unjudged(state, pod, batch)
            for p in self.framework.filter_plugins
            if isinstance(p, FilterExplainer) and per_plugin.get(p.name) is not None
        }
        scores = self._scores(state, pod, batch) if len(batch) else None
        ext = scores.extender_scores().tolist() if scores is not None else [0] * len(batch)
        totals = scores.total.tolist() if scores is not None else [0] * len(batch)
        for i, name in enumerate(batch.names):
            verdicts: dict[str, Any] = {}
            if not pre.is_success():
                verdicts[pre.plugin] = _verdict(pre)
            for plugin in self.framework.filter_plugins:
                if not pre.is_success():
                    continue
                plugin_failures = per_plugin.get(plugin.name)
                if plugin_failures is None:  # its PreFilter skipped the pod
                    verdicts[plugin.name] = {"status": "Skip", "reason": ""}
                    continue
                failure = plugin_failures.get(i)
                if failure is not None:
                    verdicts[plugin.name] = _verdict(failure)
                elif i in unjudged.get(plugin.name, {}):
                    verdicts[plugin.name] = {"status": "Skip", "reason": unjudged[plugin.name][i]}
                else:
                    verdicts[plugin.name] = {"status": "Success", "reason": ""}
            kube = self._kube_scheduler_verdicts(pod, name)
            feasible = all(v["status"] in ("Success", "Skip") for v in [*verdicts.values(), *kube.values()])
            nodes[name] = {
                "feasible": feasible,
                "kubeScheduler": kube,
                "filter": verdicts,
                # kube-scheduler scores only the nodes that passed every filter: an infeasible node gets none
                "scores": {p: int(s[i]) for p, s in scores.per_plugin.items()} if scores and feasible else {},
                "total": int(totals[i]) if feasible else None,
                "extenderScore": int(ext[i]) if feasible else None,
            }
        detailers = [p for p in self.framework.plugins if isinstance(p, NodeDetailPlugin)]
        for name in batch.names:
            details = {p.name: d for p in detailers if (d := p.explain_node(name)) is not None}
            if details:
                nodes[name]["details"] = details
        ordered = {names[p]: nodes[names[p]] for p in sorted(set(positions) | set(missing))}
        answer: dict[str, Any] = {"pod": pod.key, "preFilter": pre_verdicts, "nodes": ordered}
        verdicts = {
            p.name: verdict
            for p in self.framework.plugins
            if isinstance(p, PodVerdictPlugin) and (verdict := p.explain_pod(pod)) is not None
        }
        if verdicts:
            answer["podVerdicts"] = verdicts
        return answer


def _meta_field(obj: dict[str, Any], key: str, path: str) -> str:
    """``obj.metadata.<key>`` as a string ("" when absent).

    Raises:
        BadRequest: ``metadata`` is not an object or the field is not a string (the message names ``path``).
    """
    meta = obj.get("metadata")
    if meta is None:
        return ""
    if not isinstance(meta, dict):
        raise BadRequest(f"{path}.metadata: expected an object, got {type(meta).__name__}")
    value = meta.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{path}.metadata.{key}: expected a string, got {type(value).__name__}")
    return value


async def _prepare(preemption: Preemption) -> None:
    """Run ``prepare_candidate``; a plugin bug is logged, never left in an unawaited task."""
    plugin, pod, candidate = preemption
    try:
        await plugin.prepare_candidate(pod, candidate)
    except Exception:  # a plugin bug must not vanish silently
        log.exception("preemption by %s for pod %s on node %s failed", plugin.name, pod.key, candidate.node)


def _outside_reason(node: NodeState, pod: PodInfo, kept: list[PodInfo]) -> str:
    """Why a victim list narrowed to ``kept`` cannot be confirmed on ``node`` ("" when it can): the
    node's in-tree failure is not one of resources or pod count, or ``kept`` does not cure it."""
    if not fit_shortfall(node, pod, []):
        return "but the pod fits the node's resources as it is: kube-scheduler's reason is outside our plugins"
    short = fit_shortfall(node, pod, kept)
    if short:
        return f"but the node stays short without them: {', '.join(short)}"
    return ""


def _drop(pod: PodInfo, node: str, why: str) -> None:
    """Log why ``node`` is left out of the preempt answer for ``pod``."""
    log.debug("preempt %s: node %s left out: %s", pod.key, node, why)


def _verdict(status: Status) -> dict[str, str]:
    label = "Error" if status.code == Code.ERROR else "Unschedulable"
    return {"status": label, "reason": status.message}
