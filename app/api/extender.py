"""The kube-scheduler extender v1 wire protocol (k8s.io/kube-scheduler/extender/v1).

The Go types carry no JSON tags, so keys are the capitalised Go field names; nil fields arrive as
``null``. Pods and Nodes stay JSON-shaped dicts here: the scheduler parses only what it needs
(:func:`app.cache.podinfo.parse_pod`), which keeps the hot path cheap.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: Highest score an extender may return (``MaxExtenderPriority``).
MAX_EXTENDER_PRIORITY = 10


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


class ExtenderFilterResult(_Wire):
    """Answer of filter. ``FailedNodes``: unschedulable here, preemption may help;
    ``FailedAndUnresolvableNodes``: preemption cannot help; ``Error``: the call failed."""

    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = Field(default_factory=dict)
    FailedAndUnresolvableNodes: dict[str, str] = Field(default_factory=dict)
    Error: str = ""


class HostPriority(_Wire):
    """One node's score, 0..MAX_EXTENDER_PRIORITY."""

    Host: str
    Score: int


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


class ExtenderPreemptionResult(_Wire):
    """Answer of preempt: the nodes (and victims) the extender allows."""

    NodeNameToMetaVictims: dict[str, MetaVictims] = Field(default_factory=dict)


class ExtenderBindingArgs(_Wire):
    """Body of bind."""

    PodName: str
    PodNamespace: str
    PodUID: str
    Node: str


class ExtenderBindingResult(_Wire):
    """Answer of bind: empty ``Error`` on success."""

    Error: str = ""
