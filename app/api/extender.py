"""The kube-scheduler extender v1 wire protocol (k8s.io/kube-scheduler/extender/v1).

The Go types carry no JSON tags, so keys are the capitalised Go field names; nil fields arrive as
``null``. Only the request bodies are modelled (validated at the edge); the answers
(ExtenderFilterResult, HostPriorityList, ExtenderPreemptionResult, ExtenderBindingResult) are built
as plain dicts by :mod:`app.server.extender`. Pods and Nodes stay JSON-shaped dicts here: the
scheduler parses only what it needs (:func:`app.cache.podinfo.parse_pod`), which keeps the hot
path cheap.
"""

from __future__ import annotations

from typing import Any

import msgspec
from pydantic import BaseModel, ConfigDict, Field


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class NodeList(_Wire):
    """A v1.NodeList: ``items`` are Node objects."""

    items: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None


class ExtenderArgs(_Wire):
    """Body of filter and prioritize: the pod and the candidate nodes.

    ``NodeNames`` is set when the extender is ``nodeCacheCapable``; ``Nodes`` otherwise.
    """

    Pod: dict[str, Any]
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None


#: JSON ``null`` as :class:`msgspec.Raw` holds it: the default of the undecoded fields below and of every
#: msgspec struct that reads a pod's head, so "absent or null" is one comparison.
RAW_NULL = msgspec.Raw(b"null")


class RawExtenderArgs(msgspec.Struct):
    """ExtenderArgs as the verbs' fast decode reads it (``msgspec.json.Decoder(RawExtenderArgs)``): the pod and
    ``Nodes`` stay undecoded JSON (:class:`msgspec.Raw`, the exact bytes of the value, surrounding whitespace
    excluded), and so does ``NodeNames`` (decoded by the caller, which may find an equal list it decoded
    before by these bytes). Unknown keys are ignored, as :class:`ExtenderArgs` ignores them. ``Nodes`` or
    ``NodeNames`` absent reads as :data:`RAW_NULL`.

    It validates less than :class:`ExtenderArgs` (``Pod`` may be any JSON value here) and says nothing about
    bad input: :func:`app.server.wire.decode_extender_args` checks the rest and answers bad input with
    :class:`ExtenderArgs`'s own messages.
    """

    Pod: msgspec.Raw
    Nodes: msgspec.Raw = RAW_NULL
    NodeNames: msgspec.Raw = RAW_NULL


class MetaPod(_Wire):
    """A pod named by uid only (nodeCacheCapable preemption)."""

    UID: str


class MetaVictims(_Wire):
    """Victims on one node by uid, with the count of PodDisruptionBudget violations."""

    Pods: list[MetaPod] = Field(default_factory=list)
    NumPDBViolations: int = 0


class Victims(_Wire):
    """Victims on one node as full Pod objects (not nodeCacheCapable)."""

    Pods: list[dict[str, Any]] = Field(default_factory=list)
    NumPDBViolations: int = 0


class ExtenderPreemptionArgs(_Wire):
    """Body of preempt: the preemptor and kube-scheduler's candidate victims per node."""

    Pod: dict[str, Any]
    NodeNameToVictims: dict[str, Victims] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class ExtenderBindingArgs(_Wire):
    """Body of bind."""

    PodName: str
    PodNamespace: str
    PodUID: str
    Node: str
