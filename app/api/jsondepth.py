"""How deeply a decoded JSON body may nest: the limit every request body is held to where it is decoded.

orjson's decoder stops at 1,024 levels, but the code behind it does not go that far: orjson's *encoder*
refuses values nested more than 254 levels (the webhooks re-encode the object they patch and the field
errors they word, :mod:`webhooks.fielderrors`), and Python's own recursion limit is 1,000 frames. An
AdmissionReview whose ``object.metadata.labels`` nested 1,000 levels got through the decoder and failed
there with HTTP 500 (issue 46). No Kubernetes object comes near :data:`MAX_JSON_DEPTH`: a pod in an
AdmissionReview is about a dozen levels deep, a Reservation's pod template about twenty. Go's
``encoding/json``, which kube-apiserver decodes with, stops at 10,000 levels; ours is lower because the
encoder's is.

The check costs nothing for the usual body: a body with fewer ``{`` and ``[`` bytes than the limit cannot
nest deeper, and only a body with more is walked (iteratively, no recursion; it stops at the limit).
"""

from __future__ import annotations

from typing import Any

#: The deepest nesting of objects and lists a request body may have (the body itself is level 1).
MAX_JSON_DEPTH = 100


class TooDeep(ValueError):
    """A decoded value nests deeper than allowed; the message names the limit (answered HTTP 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"JSON nested more than {limit} levels deep")
        self.limit = limit


def may_exceed(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``raw`` could nest deeper than ``limit``: it holds more than ``limit``
    ``{`` and ``[`` bytes together (some may sit inside strings; the count is an upper bound)."""
    return raw.count(b"{") + raw.count(b"[") > limit


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`TooDeep` when ``value`` (decoded JSON: dicts, lists, scalars) nests more than ``limit``
    levels of dicts and lists; a scalar is level 0, ``{}`` level 1.

    Raises:
        TooDeep: the nesting exceeds ``limit``.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            raise TooDeep(limit)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def check_body_depth(raw: bytes, value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """:func:`check_depth` of ``value``, the decoded ``raw``, skipped when ``raw`` cannot nest that deep
    (:func:`may_exceed`).

    Raises:
        TooDeep: the nesting exceeds ``limit``.
    """
    if may_exceed(raw, limit):
        check_depth(value, limit)
