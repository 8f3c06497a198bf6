"""Node classification for LowNodeLoad (``classifyNodes`` in ``utilization_util.go``).

- under(node) = schedulable and every resource at or below its low threshold:
  prod above prodHigh ⇒ ``prodHigh``; else prod at or below prodLow ⇒ ``bothLow``; else ``low``.
- else any resource above its high threshold ⇒ ``high``.
- else prod above prodHigh ⇒ ``prodHigh``; prod at or below prodLow (schedulable) ⇒ ``prodLow``;
  else ``normal`` (appropriately utilised).
"""

from __future__ import annotations

from enum import StrEnum

from app.descheduler.thresholds import NodeThresholds, overutilized, underutilized
from app.descheduler.usage import NodeUsage


class NodeClass(StrEnum):
    """The classes a node falls into; the explanation strings are upstream's log words."""

    LOW = "low"
    HIGH = "high"
    PROD_LOW = "prodLow"
    PROD_HIGH = "prodHigh"
    BOTH_LOW = "bothLow"
    NORMAL = "normal"


EXPLAIN = {
    NodeClass.PROD_HIGH: "high than prod usage",
    NodeClass.BOTH_LOW: "both lower than node && prod usage",
    NodeClass.LOW: "lower than node usage and it's appropriately for prod usage",
    NodeClass.HIGH: "higher than node usage",
    NodeClass.PROD_LOW: "appropriately for node usage but lower than prod usage",
    NodeClass.NORMAL: "both appropriately for node && prod usage",
}


def classify(usage: NodeUsage, t: NodeThresholds) -> NodeClass:
    """The class of one node (see the module docstring)."""
    schedulable = not usage.node.unschedulable
    prod_high = bool(overutilized(usage.prod_usage, t.prod_high))
    prod_low = schedulable and underutilized(usage.prod_usage, t.prod_low)
    if schedulable and underutilized(usage.usage, t.low):
        if prod_high:
            return NodeClass.PROD_HIGH
        return NodeClass.BOTH_LOW if prod_low else NodeClass.LOW
    if overutilized(usage.usage, t.high):
        return NodeClass.HIGH
    if prod_high:
        return NodeClass.PROD_HIGH
    return NodeClass.PROD_LOW if prod_low else NodeClass.NORMAL
