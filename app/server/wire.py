"""Decoding request bodies and encoding answers for the JSON endpoints.

Malformed JSON, valid JSON of the wrong shape, JSON nested deeper than
:data:`~app.api.jsondepth.MAX_JSON_DEPTH` levels (:func:`decode`: the webhooks, ``/preempt``, ``/bind``,
``POST /apis/v1/explain``) and malformed pods are all :class:`BadRequest` (HTTP 400 with ``{"message": ...}``),
never FastAPI's default 422 nor a 500. A ``/filter`` or ``/prioritize`` body the verbs' fast path
(:func:`decode_extender_args`, msgspec) takes is not walked for depth: those are kube-scheduler's pods, three
calls per pod, and the pod reader wants strings where labels and annotations could nest (400); a body msgspec
refuses for its nesting goes to :func:`decode` and its limit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from operator import getitem
from typing import Any, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt
import orjson
from fastapi import Response
from pydantic import BaseModel, ValidationError

from app.api.extender import RAW_NULL, ExtenderArgs, NodeList, RawExtenderArgs
from app.api.jsondepth import TooDeep, check_body_depth

M = TypeVar("M", bound=BaseModel)


class BadRequest(Exception):
    """The request body is unusable; the message says why (answered as HTTP 400)."""


def describe_validation_error(exc: ValidationError) -> str:
    """First pydantic error as ``<field path>: <message>`` (e.g. ``NodeNames.2: Input should be a valid string``)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
    return f"{loc}: {err.get('msg', 'invalid')}"


def decode(body: bytes, model: type[M]) -> M:
    """Parse ``body`` as JSON and validate it against ``model``.

    Raises:
        BadRequest: empty body, invalid JSON, JSON nested deeper than :data:`~app.api.jsondepth.MAX_JSON_DEPTH`
            levels, or a shape ``model`` rejects; the message names the field.
    """
    if not body:
        raise BadRequest(f"empty request body: expected a JSON {model.__name__}")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    try:
        check_body_depth(body, data)
    except TooDeep as exc:
        raise BadRequest(f"request body is not valid: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(f"expected a JSON object ({model.__name__}), got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(f"invalid {model.__name__}: {describe_validation_error(exc)}") from None


class ExtenderCall:
    """The ExtenderArgs of one ``/filter`` or ``/prioritize`` body (:func:`decode_extender_args`), with the pod
    kept as the JSON bytes it arrived as.

    ``pod_json`` lets :class:`~app.server.extender.ExtenderService` reuse the parse of a byte-equal pod (the
    ``/prioritize`` after a ``/filter``, a retried ``/filter``) without decoding it at all; :attr:`Pod`
    decodes it (orjson) on first use. It reads as :class:`~app.api.extender.ExtenderArgs` does: ``Pod``,
    ``Nodes``, ``NodeNames``; nothing changes them once decoded.

    Args:
        body: the whole request body (kept to word the 400 of a pod that does not decode).
        pod_json: the pod's JSON object, exactly as in ``body``; None when unknown (``pod`` is then given).
        node_names: ``NodeNames`` (nodeCacheCapable), or None.
        nodes: ``Nodes`` (not nodeCacheCapable), or None.
        pod: the decoded pod, when already decoded.
        names_json: ``NodeNames``' JSON exactly as in ``body``, when ``node_names`` was decoded from it.
    """

    __slots__ = ("NodeNames", "Nodes", "_body", "_pod", "names_json", "names_shared", "pod_json")

    def __init__(
        self,
        body: bytes,
        pod_json: bytes | None,
        node_names: list[str] | None,
        nodes: NodeList | None = None,
        pod: dict[str, Any] | None = None,
        names_shared: bool = False,
        names_json: bytes | None = None,
    ) -> None:
        self._body = body
        self.pod_json = pod_json
        self.NodeNames = node_names
        self.Nodes = nodes
        self._pod = pod
        #: whether ``NodeNames`` is a list a :class:`NameLists` holds (shared by the calls that sent the same
        #: bytes; never changed, so a result derived from it may be kept by the list's identity)
        self.names_shared = names_shared
        #: the JSON array ``NodeNames`` was decoded from (valid JSON of exactly these names), or None
        self.names_json = names_json if node_names is not None else None

    @property
    def Pod(self) -> dict[str, Any]:  # the wire's Go field name, as on ExtenderArgs
        """The pod as a JSON-shaped dict, decoded from :attr:`pod_json` on first use.

        Raises:
            BadRequest: the pod's bytes are not JSON orjson decodes (msgspec only skipped over them), with
                the message :func:`decode` gives the whole body.
        """
        pod = self._pod
        if pod is None:
            assert self.pod_json is not None  # one of the two is always set
            try:
                pod = orjson.loads(self.pod_json)
            except orjson.JSONDecodeError:
                pod = decode(self._body, ExtenderArgs).Pod  # raises the message of the whole body
            self._pod = pod
        return pod


_EXTENDER_ARGS = msgspec.json.Decoder(RawExtenderArgs)
_NODE_NAMES = msgspec.json.Decoder(list[str] | None)


class NameLists:
    """The last ``NodeNames`` lists :func:`decode_extender_args` decoded (or a verb kept), by their exact
    JSON bytes, so an equal list is not decoded again: kube-scheduler's ``/prioritize`` sends the names its
    ``/filter`` passed (the ``/filter`` keeps them with their bytes, :meth:`keep`), and its ``/filter``
    windows repeat: kube-scheduler takes ``numFeasibleNodesToFind`` nodes from a start index that moves on
    by the nodes it looked at, so on a cluster whose nodes all pass its own filters the windows come round
    again every ``lcm(window, nodes) / window`` pods (50 at 500 nodes with its adaptive percentage, 10 at
    5,000). Finding a list is one dict look-up by the bytes (hashing 5 KB of JSON costs ~2 us), against
    ~10 us per 230 names to decode them and ~15 us more to hash the fresh strings when their rows are looked
    up (the batch kept for a shared list spares that too).

    Kept least recently used first: :meth:`find` of a kept list makes it the newest. At most ``size`` lists
    and ``budget`` bytes of their JSON are kept (the oldest go first; a list alone larger than the budget is
    still kept, as the newest).

    The lists handed out are shared by every call that sent the same bytes: no one may change them.

    Args:
        size: lists kept.
        budget: bytes of kept JSON (the decoded lists take about three times that in memory).
    """

    def __init__(self, size: int = 16, budget: int = 1 << 20) -> None:
        self._size = size
        self._budget = budget
        self._bytes = 0
        self._lists: dict[bytes, list[str]] = {}

    def find(self, raw: bytes) -> list[str] | None:
        """The kept list whose JSON is ``raw`` byte for byte (now the newest), or None."""
        lists = self._lists
        names = lists.pop(raw, None)
        if names is not None:
            lists[raw] = names
        return names

    def keep(self, raw: bytes, names: list[str]) -> None:
        """Keep ``names`` (which ``raw`` decodes to; the caller no longer changes it) as the newest list."""
        lists = self._lists
        old = lists.pop(raw, None)
        if old is not None:
            self._bytes -= len(raw)
        lists[raw] = names
        self._bytes += len(raw)
        while len(lists) > self._size or (self._bytes > self._budget and len(lists) > 1):
            oldest = next(iter(lists))
            del lists[oldest]
            self._bytes -= len(oldest)

    def __len__(self) -> int:
        """Lists kept now."""
        return len(self._lists)


def decode_extender_args(body: bytes, lists: NameLists | None = None) -> ExtenderCall:
    """``body`` as ExtenderArgs, with the pod left undecoded (:class:`ExtenderCall`).

    The fast path decodes with msgspec (:class:`~app.api.extender.RawExtenderArgs`): a ``NodeNames``
    body (nodeCacheCapable, the shipped configuration) costs a third of :func:`decode`'s orjson and
    pydantic, and its pod is not decoded here. Whatever that path does not take as is goes through
    :func:`decode` with :class:`~app.api.extender.ExtenderArgs`, so every bad body gets exactly the 400
    :func:`decode` gives: a body msgspec rejects, a ``Pod`` that is not a JSON object, and a ``Nodes`` NodeList
    (not nodeCacheCapable; kept to orjson's and pydantic's reading, as its items go back in the answer;
    the pod's bytes are still kept for reuse). Pod bytes msgspec skipped but orjson rejects are answered
    when :attr:`ExtenderCall.Pod` decodes them, with the same message. msgspec's nesting limit (Python's
    recursion limit) is below orjson's (1024), so no pod decodes here that the whole body would not.

    ``NodeNames`` is found in ``lists`` by its JSON bytes when an equal list was decoded (or kept) there
    before, and kept there when decoded; the call then carries the shared list (``names_shared``).

    Raises:
        BadRequest: as :func:`decode` for ``ExtenderArgs``.
    """
    try:
        raw: RawExtenderArgs | None = _EXTENDER_ARGS.decode(body)
    except (msgspec.DecodeError, RecursionError):  # ValidationError included; RecursionError: deep nesting
        raw = None
    pod_json = bytes(raw.Pod) if raw is not None else b""
    if pod_json[:1] != b"{":
        pod_json = b""  # not an object, or msgspec did not take the body
    if raw is not None and pod_json and raw.Nodes == RAW_NULL:
        if raw.NodeNames == RAW_NULL:
            return ExtenderCall(body, pod_json, None)
        names_json = bytes(raw.NodeNames)
        names = lists.find(names_json) if lists is not None else None
        if names is not None:
            return ExtenderCall(body, pod_json, names, names_shared=True, names_json=names_json)
        try:
            names = _NODE_NAMES.decode(names_json)
        except (msgspec.DecodeError, RecursionError):
            names = None  # not a list of strings: decode() below answers its 400
        else:
            if names is None or lists is None:
                return ExtenderCall(body, pod_json, names, names_json=names_json)
            lists.keep(names_json, names)
            return ExtenderCall(body, pod_json, names, names_shared=True, names_json=names_json)
    args = decode(body, ExtenderArgs)  # raises its 400, or takes what msgspec did not (deep nesting, a NodeList)
    return ExtenderCall(body, pod_json or None, args.NodeNames, args.Nodes, args.Pod)


def json_response(content: Any, status_code: int = 200) -> Response:
    """A JSON response encoded with orjson (numpy scalars included)."""
    return Response(
        content=orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY),
        status_code=status_code,
        media_type="application/json",
    )


def error_response(message: str, status_code: int = 400) -> Response:
    """``{"message": ...}`` with ``status_code``, the shape Koordinator's services answer errors with."""
    return json_response({"message": message}, status_code)


class HostPriorityEncoder:
    """Encodes a HostPriorityList (``[{"Host": name, "Score": score}, ...]``, k8s.io/kube-scheduler/extender/v1)
    without building a dict per host: the bytes of each host's entry for every extender score 0..10 are made
    once per node name and joined, which is 2-3x cheaper than 230 dicts through ``orjson.dumps`` (~20 us saved
    per ``/prioritize`` over 230 nodes). The bytes are exactly ``orjson.dumps`` of the list of dicts.

    Args:
        max_names: names kept; past it the table is emptied and refilled as names come (requests may name
            nodes the cache does not know, so the table must not grow without bound).
    """

    #: Scores with pre-encoded entries (kube-scheduler's extender priorities are 0..10); others are encoded
    #: one by one.
    SCORES = range(11)

    def __init__(self, max_names: int = 16384) -> None:
        self._entries: dict[str, tuple[bytes, ...]] = {}
        self._max_names = max_names
        #: the entries by node-table row, valid for the table generation ``_row_generation`` only
        self._by_row: dict[int, tuple[bytes, ...]] = {}
        self._row_generation: int | None = None
        #: :meth:`encode_rows`' table: the entry of row ``r`` and score ``s`` at ``r * 11 + s`` (an object array),
        #: ``_filled[r]`` when row ``r``'s are in; valid for the table generation ``_flat_generation`` only
        self._flat: npt.NDArray[np.object_] = np.empty(0, dtype=object)
        self._filled: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._flat_generation: int | None = None

    def _entry(self, name: str) -> tuple[bytes, ...]:
        entries = self._entries
        if len(entries) >= self._max_names:
            entries.clear()
        # built by concatenation, not one orjson.dumps per score: each bytes object orjson returns keeps the
        # allocation of its output buffer (kilobytes), and 11 per node made 5,000 nodes cost ~180 MB of RSS
        head = b'{"Host":' + orjson.dumps(name) + b',"Score":'
        entry = entries[name] = tuple(head + b"%d}" % s for s in self.SCORES)
        return entry

    def encode(
        self,
        names: Sequence[str],
        scores: Sequence[int],
        rows: Sequence[int] | None = None,
        generation: int | None = None,
    ) -> orjson.Fragment:
        """The HostPriorityList of ``names`` with ``scores`` (parallel, ints), as an :class:`orjson.Fragment`
        that ``orjson.dumps`` writes as is.

        ``rows`` (parallel to ``names``) are the names' rows in a
        :class:`~app.cache.nodetable.NodeTable` whose :attr:`~app.cache.nodetable.NodeTable.generation` is
        ``generation``: the entries are then found by row (an int key, no string hashing; a request's names
        are fresh strings whose hash was never computed), in a table emptied whenever ``generation`` moves,
        so a row freed and given to another name never answers with the old name's bytes. The caller must
        pass rows of exactly these names at that generation.

        Raises:
            ValueError: ``names`` and ``scores`` (or ``rows``) differ in length.
        """
        if len(names) != len(scores):
            raise ValueError(f"{len(names)} names but {len(scores)} scores")
        if not names:
            return orjson.Fragment(b"[]")
        return self._join(names, self.entries(names, rows, generation), scores)

    def encode_rows(
        self, names: Sequence[str], rows: npt.NDArray[np.int64], scores: npt.NDArray[np.int64], generation: int
    ) -> orjson.Fragment:
        """:meth:`encode` of ``names`` at node-table ``rows`` (int64, parallel; of exactly these names at table
        generation ``generation``) with ``scores`` (int64, parallel): the entries are picked by one numpy
        ``take`` from a table by row and score (``row * 11 + score``), no Python work per host, about a third
        of :meth:`encode`'s cost for 1,000 hosts. The table is emptied whenever ``generation`` moves, so a row
        freed and given to another name never answers with the old name's bytes; a row is filled from its
        name on first use. A score outside 0..10 goes through :meth:`encode`.

        Raises:
            ValueError: ``names``, ``rows`` and ``scores`` differ in length.
        """
        n = len(names)
        if not (n == len(rows) == len(scores)):
            raise ValueError(f"{n} names but {len(rows)} rows and {len(scores)} scores")
        if not n:
            return orjson.Fragment(b"[]")
        width = len(self.SCORES)
        if int(scores.min()) < 0 or int(scores.max()) >= width:
            return self.encode(names, scores.tolist(), rows.tolist(), generation)
        if generation != self._flat_generation:
            self._filled[:] = False
            self._flat_generation = generation
        top = int(rows.max()) + 1
        if top > len(self._filled):
            size = max(top, 2 * len(self._filled), 64)
            flat = np.empty(size * width, dtype=object)
            flat[: len(self._flat)] = self._flat
            filled = np.zeros(size, dtype=bool)
            filled[: len(self._filled)] = self._filled
            self._flat, self._filled = flat, filled
        empty = ~self._filled[rows]
        if empty.any():
            flat, entries = self._flat, self._entries
            for pos in np.flatnonzero(empty).tolist():
                name = names[pos]
                row = int(rows[pos])
                flat[row * width : (row + 1) * width] = entries.get(name) or self._entry(name)
            self._filled[rows[empty]] = True
        return orjson.Fragment(b"[" + b",".join(self._flat.take(rows * width + scores).tolist()) + b"]")

    def entries(
        self, names: Sequence[str], rows: Sequence[int] | None = None, generation: int | None = None
    ) -> list[tuple[bytes, ...]]:
        """Each name's pre-encoded entries (index: the score 0..10), parallel to ``names``: what :meth:`encode`
        joins, found by row when ``rows`` and ``generation`` are given (as for :meth:`encode`).

        Raises:
            ValueError: ``names`` and ``rows`` differ in length.
        """
        if rows is not None and generation is not None:
            if len(rows) != len(names):
                raise ValueError(f"{len(names)} names but {len(rows)} rows")
            return self._row_entries(names, rows, generation)
        return self._name_entries(names)

    def _name_entries(self, names: Sequence[str]) -> list[tuple[bytes, ...]]:
        entries = self._entries
        try:
            return list(map(entries.__getitem__, names))
        except KeyError:
            return [entries.get(n) or self._entry(n) for n in names]

    def _row_entries(self, names: Sequence[str], rows: Sequence[int], generation: int) -> list[tuple[bytes, ...]]:
        by_row = self._by_row
        if generation != self._row_generation:
            by_row.clear()
            self._row_generation = generation
        try:
            return list(map(by_row.__getitem__, rows))
        except KeyError:
            found = self._name_entries(names)
            by_row.update(zip(rows, found, strict=True))
            return found

    @staticmethod
    def _join(names: Sequence[str], rows: list[tuple[bytes, ...]], scores: Sequence[int]) -> orjson.Fragment:
        body = None
        if min(scores) >= 0:  # a score over 10 has no pre-encoded entry: IndexError, then one by one
            with contextlib.suppress(IndexError):
                body = b",".join(map(getitem, rows, scores))
        if body is None:
            body = b",".join(
                row[s] if 0 <= s <= 10 else orjson.dumps({"Host": n, "Score": s})
                for n, row, s in zip(names, rows, scores, strict=True)
            )
        return orjson.Fragment(b"[" + body + b"]")
