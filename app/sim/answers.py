"""The extender answers as the simulator reads them: typed msgspec decodes of exactly the fields it uses.

The sim sends ~1,000 node names per ``/filter`` and ``/prioritize``; a plain ``orjson.loads`` of the
``/prioritize`` answer builds ~1,000 dicts (each tracked by the garbage collector, which the process's
large heap makes costly to scan) only for the sim to read their ``Score`` and a few ``Host`` names.
Here each answer decodes into ``gc=False`` structs of the fields read, unknown keys ignored:

- ``ExtenderFilterResult``: ``NodeNames`` and ``Error`` decoded; ``FailedNodes`` and
  ``FailedAndUnresolvableNodes`` kept undecoded (:class:`msgspec.Raw`) and decoded only when no node
  passed, the one case the sim reads them (:meth:`FilterAnswer.failed`).
- ``HostPriorityList``: a list of :class:`HostScore` (``Host``, ``Score``).
- ``ExtenderBindingResult``: ``Error``.

The keys are the Go field names of k8s.io/kube-scheduler/extender/v1 (the types carry no JSON tags).
A body that is not such an answer raises :class:`AnswerError` (a :class:`VerbError`, as an HTTP error
answer is) naming the verb and msgspec's reason
(the JSON path of the bad value), never a crash further on.
"""

from __future__ import annotations

from typing import Any

import msgspec

from app.api.extender import RAW_NULL


class VerbError(RuntimeError):
    """The service answered a verb with an HTTP error (a bug: the simulator's bodies are valid)."""


class AnswerError(VerbError):
    """The service's answer to a verb is not the extender wire's answer (a bug in the service)."""


class HostScore(msgspec.Struct, gc=False):
    """One ``HostPriority`` of a ``/prioritize`` answer: the node's name and its score (0..100)."""

    Host: str
    Score: int


class FilterAnswer(msgspec.Struct, gc=False):
    """An ``ExtenderFilterResult`` (``nodeCacheCapable``: the survivors as ``NodeNames``).

    ``NodeNames`` None (absent or ``null``) means no node passed; ``Error`` None or "" means no error.
    """

    NodeNames: list[str] | None = None
    FailedNodes: msgspec.Raw = RAW_NULL
    FailedAndUnresolvableNodes: msgspec.Raw = RAW_NULL
    Error: str | None = None

    def failed(self) -> dict[str, str]:
        """``FailedNodes`` updated by ``FailedAndUnresolvableNodes`` (node name -> reason), decoded now.

        Raises:
            AnswerError: either map is not a JSON object of strings (or null).
        """
        out: dict[str, str] = {}
        for raw in (self.FailedNodes, self.FailedAndUnresolvableNodes):
            try:
                out.update(_FAILED.decode(raw) or {})
            except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
                raise AnswerError(f"/filter answered a bad failed-nodes map: {exc}") from exc
        return out


class BindAnswer(msgspec.Struct, gc=False):
    """An ``ExtenderBindingResult``: ``Error`` None or "" when the pod was bound."""

    Error: str | None = None


_FAILED = msgspec.json.Decoder(dict[str, str] | None)
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "filter": msgspec.json.Decoder(FilterAnswer),
    "prioritize": msgspec.json.Decoder(list[HostScore]),
    "bind": msgspec.json.Decoder(BindAnswer),
}


def decode_filter(content: bytes) -> FilterAnswer:
    """The ``/filter`` answer ``content``. Raises :class:`AnswerError` when it is not one."""
    answer: FilterAnswer = _decode("filter", content)
    return answer


def decode_prioritize(content: bytes) -> list[HostScore]:
    """The ``/prioritize`` answer ``content``, in the answer's order.

    Raises:
        AnswerError: not a JSON list of ``{"Host": str, "Score": int}`` objects.
    """
    scores: list[HostScore] = _decode("prioritize", content)
    return scores


def decode_bind(content: bytes) -> BindAnswer:
    """The ``/bind`` answer ``content``. Raises :class:`AnswerError` when it is not one."""
    answer: BindAnswer = _decode("bind", content)
    return answer


def _decode(verb: str, content: bytes) -> Any:
    try:
        return _DECODERS[verb].decode(content)
    except msgspec.DecodeError as exc:
        raise AnswerError(f"/{verb} answered a body that is not its extender answer: {exc}") from exc
