"""NUMA topology hints and the topology manager's admission (upstream ``topology_hint.go``,
``resource_manager.go`` ``GetTopologyHints`` / ``generateResourceHints`` and
``frameworkext/topologymanager`` ``policy_*.go``), for this plugin as the only hint provider.

A hint is a set of NUMA nodes that together can hold the pod's cpu and memory (and, for a cpuset,
enough cpus its bind policy can use). Hints of the fewest NUMA nodes are *preferred*; the best hint is
the preferred one with the highest NUMA score (``numaScoringStrategy`` over the nodes' allocatable and
what is already taken, the pod included), ties to the lowest NUMA ids. Admission:

- ``BestEffort``: always admitted; the best hint (if any) places the pod.
- ``Restricted``: admitted when any hint exists (every hint is preferred under Restricted).
- ``SingleNUMANode``: admitted only with a one-NUMA-node hint.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.cpu_accumulator import filter_by_required_policy
from app.plugins.nodenumaresource.cpu_manager import CPU, NUMA_RESOURCES, ResourceOptions, trim_cpu
from app.plugins.nodenumaresource.scoring import Scorer
from app.plugins.nodenumaresource.topology_options import TopologyOptions


@dataclass(frozen=True, slots=True)
class Admission:
    """The topology manager's verdict on one node.

    Attributes:
        admit: the pod may go there.
        hint: the NUMA nodes to place it on (None: any, e.g. BestEffort without a hint).
        score: the hint's NUMA score.
        reason: why not admitted (upstream's message).
        unresolvable: the reason cannot change by waiting (no NUMA zones).
    """

    admit: bool
    hint: tuple[int, ...] | None = None
    score: int = 0
    reason: str = ""
    unresolvable: bool = False


def admit(
    opts: TopologyOptions,
    policy: str,
    ro: ResourceOptions,
    available: dict[int, dict[str, int]],
    total: dict[int, dict[str, int]],
    free: frozenset[int],
    scorer: Scorer,
    choose: bool = True,
) -> Admission:
    """Generate hints for the pod on the node and apply ``policy`` (see the module docstring).

    With ``choose`` False (Filter) the first fitting hint of the narrowest size admits the pod, unscored.
    """
    numa_ids = opts.numa_nodes()
    if not numa_ids:
        return Admission(False, reason=n.ERR_MISSING_NUMA_RESOURCES, unresolvable=True)
    trim_cpu(opts, ro, available, free)
    usable_by_node: dict[int, int] = {}
    if ro.bind and opts.cpu is not None:
        usable = filter_by_required_policy(opts.cpu, free, ro.policy) if ro.required else free
        for c in usable:
            nid = opts.cpu.node[c]
            usable_by_node[nid] = usable_by_node.get(nid, 0) + 1
    requested = [r for r in NUMA_RESOURCES if ro.requests.get(r) and any(r in total[i] for i in numa_ids)]
    lacking = {r: {i for i in numa_ids if not available.get(i, {}).get(r)} for r in requested}
    max_size = 1 if policy == n.NUMA_POLICY_SINGLE_NUMA_NODE else len(numa_ids)
    # A mask holding a NUMA node that lacks a requested resource never fits: leave those nodes out (the
    # masks that remain come in the same order). A size whose largest amounts cannot reach a request has
    # no fitting mask either: skip it whole. Both cut only masks that would fail, so the answer is the one
    # of trying every mask, without 2^n tries on a machine of many NUMA nodes.
    candidates = [i for i in numa_ids if not any(i in lacking[r] for r in requested)]
    largest = {r: sorted((available.get(i, {}).get(r, 0) for i in candidates), reverse=True) for r in requested}
    usable_largest = sorted((usable_by_node.get(i, 0) for i in candidates), reverse=True)
    best: tuple[int, ...] | None = None
    best_score = -1
    for size in range(1, min(max_size, len(candidates)) + 1):
        if any(sum(largest[r][:size]) < ro.requests[r] for r in requested):
            continue
        if ro.bind and sum(usable_largest[:size]) < ro.num_cpus:
            continue
        for mask in combinations(candidates, size):
            if any(sum(available[i].get(r, 0) for i in mask) < ro.requests[r] for r in requested):
                continue
            if ro.bind and sum(usable_by_node.get(i, 0) for i in mask) < ro.num_cpus:
                continue
            if not choose:
                return Admission(True, mask)
            alloc = {r: sum(total[i].get(r, 0) for i in mask) for r in NUMA_RESOURCES}
            taken = {r: alloc[r] - sum(available[i].get(r, 0) for i in mask) for r in NUMA_RESOURCES}
            score = scorer.score(taken, alloc, ro.requests)
            if score > best_score:
                best, best_score = mask, score
        if best is not None:
            break
    if best is not None:
        return Admission(True, best, best_score)
    if policy == n.NUMA_POLICY_BEST_EFFORT:
        return Admission(True)
    # upstream's summary lists the preferred / possible hints per resource; none exist here
    sep = "," if policy == n.NUMA_POLICY_SINGLE_NUMA_NODE else " & "
    summary = sep.join(f"{r} prefer [] among []" for r in (requested or [CPU]))
    return Admission(False, reason=n.ERR_NUMA_HINT_CANNOT_ALIGNED.format(summary))
