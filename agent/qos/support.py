"""Which differentiated-SLO dimensions this node can enforce, and why not the others: the agent's start-up line.

Each probe reads only (files and netlink); nothing is created. The dimensions, with the feature gate each
needs (upstream's names and defaults, ``pkg/features/koordlet_features.go``): cpu (suppress, burst, group
identity), memory min/low/high, memory watermarks / priority / OOM group (Anolis files), LLC and memory
bandwidth (resctrl, gate ``RdtResctrl``), disk IO (gate ``BlkIOReconcile``), system memory settings (gate
``SystemConfig``), network bandwidth (gate ``NetQOSByTC``, ``netQOSPolicy: tc`` and an interface).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.cgroups import CgroupLayout, CgroupVersion


@dataclass(frozen=True, slots=True)
class Dimension:
    """One dimension: its name, whether it is enforced here, and what (or why not) in words."""

    name: str
    supported: bool
    detail: str


def blkio_support(layout: CgroupLayout) -> Dimension:
    """Disk IO: the kubepods dir offers the throttle files (v1 ``blkio.throttle.*``, v2 ``io.max``); the weight
    file (``blkio.cost.weight`` Anolis / ``io.weight``) is reported separately."""
    v2 = layout.version == CgroupVersion.V2
    throttle, weight = ("io.max", "io.weight") if v2 else ("blkio.throttle.read_bps_device", "blkio.cost.weight")
    base = layout.dir_path("blkio", layout.kubepods)
    if not (base / throttle).exists():
        return Dimension("disk IO", False, f"no {throttle} in {base} (blkio / io controller not enabled there)")
    extra = "with" if (base / weight).exists() else f"without {weight} (weights skipped)"
    return Dimension("disk IO", True, f"{'io.max' if v2 else 'blkio.throttle.*'} {extra}")


def anolis_support(found: frozenset[str]) -> Dimension:
    """Memory watermark / priority / OOM group: the Anolis files the kubepods dir has."""
    if not found:
        return Dimension("memory wmark/priority/oom", False, "no memory.wmark_ratio etc. (not an Anolis kernel)")
    return Dimension("memory wmark/priority/oom", True, ", ".join(sorted(found)))


def gated(dim: Dimension, gate: str, features: set[str]) -> Dimension:
    """``dim``, or not supported because ``gate`` is off."""
    if dim.supported and gate not in features:
        return Dimension(dim.name, False, f"feature gate {gate} is off (available: {dim.detail})")
    return dim


def support_line(dims: list[Dimension]) -> str:
    """One line: ``QoS dimensions: cpu yes; disk IO no (why); ...``."""
    parts = [f"{d.name} {'yes' if d.supported else 'no'} ({d.detail})" for d in dims]
    return "QoS dimensions on this node: " + "; ".join(parts)
