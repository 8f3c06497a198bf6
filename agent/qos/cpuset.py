"""cpuset enforcement: LSE/LSR pods on the cpus the scheduler gave them, LS pods on the node's shared pool.

Follows upstream ``runtimehooks/hooks/cpuset`` (``cpuset.go`` ``SetContainerCPUSet`` / ``UnsetContainerCPUQuota``,
``rule.go`` ``getContainerCPUSet``), run as a reconciler each round:

1. a pod whose ``scheduling.koordinator.sh/resource-status`` has a ``cpuset`` (LSE / LSR pods bound by
   NodeNUMAResource) gets exactly those cpus, and its cfs quota is unset (-1 on the pod and its containers,
   upstream issue 489: a cpuset pod must not be throttled below its own cpus);
2. a non-BE pod whose resource-status holds cpu on NUMA nodes (``numaNodeResources``) gets the shared pools of
   those NUMA nodes;
3. a SYSTEM pod gets ``node.koordinator.sh/system-qos-resource`` ``cpuset`` when the node publishes one;
4. an LS pod (``koordinator.sh/qosClass: LS``) gets all shared pools;
5. any other pod: under the kubelet's ``static`` CPU manager policy nothing (the kubelet owns its cpusets),
   else all shared pools.

The shared pools are ``node.koordinator.sh/cpu-shared-pools`` as this agent publishes them
(:mod:`agent.topologyreport`): per NUMA node all cpus minus every pod's resource-status cpuset (LSE and LSR)
minus the node's reserved cpus (``node.koordinator.sh/reservation``) minus the kubelet static policy's
allocations.

Pods in the Kubernetes BestEffort tree (koord BE pods) are left to :mod:`agent.qos.cpusuppress`, which owns
the besteffort dir and every dir below it (upstream hands BE containers an empty cpuset for the same reason).

Where: the pod dir and every dir below it in the cpuset hierarchy (its containers and the sandbox, whose ids the
agent does not know), returned as two levels for :meth:`agent.executor.CgroupExecutor.update_leveled`, which
writes parents first and widens before it narrows. (Upstream writes the containers and the sandbox; writing
the pod dir too keeps a container the runtime creates later inside the pod's cpus from its first instant.)

A malformed resource-status (not JSON, a cpuset that does not parse, a NUMA entry without a node) is logged
once per pod and value, and that pod is skipped; every other pod is still enforced.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from agent.executor import CgroupWrite
from agent.qos.context import QoSContext
from agent.states.pods import PodMeta
from app.api.koordext import QoSClass
from app.api.quantity import QuantityError, milli_value
from app.api.topology import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    ANNOTATION_RESOURCE_STATUS,
    KUBELET_CPU_MANAGER_POLICY_STATIC,
    CPUSetError,
    format_cpuset,
    parse_cpuset,
)

log = logging.getLogger("agent.qos.cpuset")

REASON = "CPUSetAllocator"
REASON_UNSET_QUOTA = "CPUSetAllocator: unset cfs quota of a cpuset pod"


class ResourceStatusError(ValueError):
    """A pod's ``scheduling.koordinator.sh/resource-status`` is malformed; the message says where."""


class RuleError(ValueError):
    """The node's shared pools, kubelet policy or system QoS annotation is malformed; the message names it."""


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """The parts of a pod's resource-status the agent uses.

    Attributes:
        cpuset: the pod's exclusive cpus (empty: none).
        cpu_numa_nodes: NUMA nodes on which the pod was given cpu (``numaNodeResources`` with non-zero
            ``cpu`` or ``kubernetes.io/batch-cpu``), in the annotation's order.
    """

    cpuset: frozenset[int] = frozenset()
    cpu_numa_nodes: tuple[int, ...] = ()


def parse_resource_status(raw: str | None) -> ResourceStatus:
    """Parse ``scheduling.koordinator.sh/resource-status`` (``{"cpuset":"0-3","numaNodeResources":[...]}``);
    absent or empty -> no cpuset (upstream ``GetResourceStatus``).

    Raises:
        ResourceStatusError: not a JSON object, ``cpuset`` not a cpu list string, ``numaNodeResources`` not a
            list of ``{"node": int >= 0, "resources": {name: quantity}}``.
    """
    if raw is None or raw == "":
        return ResourceStatus()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ResourceStatusError(f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ResourceStatusError(f"expected a JSON object, got {type(data).__name__}")
    cpuset_raw = data.get("cpuset")
    if cpuset_raw is None:
        cpuset_raw = ""
    try:
        cpuset = parse_cpuset(cpuset_raw)
    except CPUSetError as exc:
        raise ResourceStatusError(f"cpuset: {exc}") from None
    nodes: list[int] = []
    numa = data.get("numaNodeResources")
    if numa is None:
        numa = []
    if not isinstance(numa, list):
        raise ResourceStatusError("numaNodeResources: expected a list")
    for i, entry in enumerate(numa):
        if not isinstance(entry, dict):
            raise ResourceStatusError(f"numaNodeResources[{i}]: expected an object")
        node = entry.get("node", 0)
        if not isinstance(node, int) or isinstance(node, bool) or node < 0:
            raise ResourceStatusError(f"numaNodeResources[{i}].node: expected an integer >= 0, got {node!r}")
        resources = entry.get("resources")
        if resources is None:
            continue
        if not isinstance(resources, dict):
            raise ResourceStatusError(f"numaNodeResources[{i}].resources: expected an object")
        try:
            cpu = milli_value(resources.get("cpu", 0))
            batch = milli_value(resources.get("kubernetes.io/batch-cpu", 0))
        except QuantityError as exc:
            raise ResourceStatusError(f"numaNodeResources[{i}].resources: {exc}") from None
        if cpu != 0 or batch > 0:
            nodes.append(node)
    return ResourceStatus(cpuset, tuple(nodes))


@dataclass(frozen=True, slots=True)
class CPUSetRule:
    """What the node publishes on its NodeResourceTopology that decides non-exclusive cpusets (upstream ``cpusetRule``).

    Attributes:
        kubelet_policy: the kubelet's CPU manager policy (``none``, ``static`` or empty when unknown).
        share_pools: ``(NUMA node, cpus)`` of ``node.koordinator.sh/cpu-shared-pools``, in its order.
        system_qos_cpuset: cpus of SYSTEM pods (empty: none published).
    """

    kubelet_policy: str = ""
    share_pools: tuple[tuple[int, frozenset[int]], ...] = ()
    system_qos_cpuset: frozenset[int] = field(default_factory=frozenset)

    @property
    def all_shared(self) -> frozenset[int]:
        """Every shared pool together."""
        out: set[int] = set()
        for _node, cpus in self.share_pools:
            out |= cpus
        return frozenset(out)

    def without(self, cpus: frozenset[int]) -> CPUSetRule:
        """This rule with ``cpus`` taken out of its shared pools (the exclusive cpusets of pods newer than the
        published pools; a pool may end empty); ``self`` when none of them is shared."""
        if not cpus & self.all_shared:
            return self
        return replace(self, share_pools=tuple((node, shared - cpus) for node, shared in self.share_pools))

    def shared_of(self, numa_nodes: tuple[int, ...]) -> frozenset[int]:
        """The shared pools of ``numa_nodes`` together (``getCPUFromSharePoolByAllocFn``)."""
        out: set[int] = set()
        for nid in numa_nodes:
            for node, cpus in self.share_pools:
                if node == nid:
                    out |= cpus
        return frozenset(out)


def _json_annotation(annotations: dict[str, str], key: str) -> Any:
    raw = annotations.get(key)
    if raw is None or raw == "":
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise RuleError(f"annotation {key}: invalid JSON: {exc}") from None


def rule_from_annotations(annotations: dict[str, str]) -> CPUSetRule:
    """The rule from the NodeResourceTopology's annotations (upstream ``parseRule``).

    Raises:
        RuleError: an annotation is not JSON of the expected shape, or a cpuset in it does not parse.
    """
    pools_raw = _json_annotation(annotations, ANNOTATION_NODE_CPU_SHARED_POOLS) or []
    policy_raw = _json_annotation(annotations, ANNOTATION_KUBELET_CPU_MANAGER_POLICY) or {}
    system_raw = _json_annotation(annotations, ANNOTATION_NODE_SYSTEM_QOS_RESOURCE) or {}
    if not isinstance(pools_raw, list) or not isinstance(policy_raw, dict) or not isinstance(system_raw, dict):
        raise RuleError("cpu-shared-pools must be a list, cpu-manager-policy and system-qos-resource objects")
    pools: list[tuple[int, frozenset[int]]] = []
    try:
        for i, pool in enumerate(pools_raw):
            if not isinstance(pool, dict) or not isinstance(pool.get("node", 0), int):
                raise RuleError(f"annotation {ANNOTATION_NODE_CPU_SHARED_POOLS}[{i}]: expected {{node, cpuset}}")
            pools.append((int(pool.get("node", 0)), parse_cpuset(pool.get("cpuset") or "")))
        system = parse_cpuset(system_raw.get("cpuset") or "")
    except CPUSetError as exc:
        raise RuleError(str(exc)) from None
    return CPUSetRule(str(policy_raw.get("policy") or ""), tuple(pools), system)


def pod_cpuset(pod: PodMeta, rule: CPUSetRule | None) -> tuple[frozenset[int] | None, bool]:
    """``(cpus for the pod's containers, unset its cfs quota)``; cpus None = leave the pod's cpusets alone
    (see the module docstring for the order of the rules).

    Raises:
        ResourceStatusError: the pod's resource-status is malformed.
    """
    status = parse_resource_status(pod.annotations.get(ANNOTATION_RESOURCE_STATUS))
    if status.cpuset:
        return status.cpuset, True
    if rule is None:
        return None, False
    qos = pod.qos_raw
    if status.cpu_numa_nodes and qos != QoSClass.BE:
        return rule.shared_of(status.cpu_numa_nodes) or None, False
    if qos == QoSClass.SYSTEM and rule.system_qos_cpuset:
        return rule.system_qos_cpuset, False
    if qos == QoSClass.LS:
        return rule.all_shared or None, False
    if pod.kube_qos == "BestEffort":
        return None, False
    if rule.kubelet_policy == KUBELET_CPU_MANAGER_POLICY_STATIC:
        return None, False
    return rule.all_shared or None, False


@dataclass(slots=True)
class CPUSetPlan:
    """One round's cpuset decisions.

    Attributes:
        levels: ``cpuset.cpus`` writes, ``[pod dirs, dirs below them]`` for ``update_leveled``.
        quota_writes: ``cpu.cfs_quota_us = -1`` of cpuset pods, pod dir before its containers.
        cpus: pod uid -> the cpus decided for it (what was planned, for inspection and tests).
        skipped: pod key -> why it was not enforced (a malformed resource-status).
    """

    levels: list[list[CgroupWrite]] = field(default_factory=lambda: [[], []])
    quota_writes: list[CgroupWrite] = field(default_factory=list)
    cpus: dict[str, frozenset[int]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


class CPUSetAllocator:
    """The strategy; remembers which malformed annotations it already logged (one warning per pod and value)."""

    def __init__(self) -> None:
        self._logged: set[tuple[str, str]] = set()

    def plan(self, ctx: QoSContext, rule: CPUSetRule | None) -> CPUSetPlan:
        """The writes of this round for the active pods (the executor drops unchanged ones).

        ``rule``: the node's shared pools and kubelet policy (None when the topology is not known yet: only
        the exclusive cpusets of resource-status are enforced).
        """
        out = CPUSetPlan()
        be_top = ctx.layout.qos_dir("BestEffort")
        for pod in ctx.pods:
            if not pod.active or pod.cgroup_dir is None:
                continue
            if pod.cgroup_dir == be_top or pod.cgroup_dir.startswith(be_top + "/"):
                continue  # cpusuppress owns the besteffort tree
            try:
                cpus, unset_quota = pod_cpuset(pod, rule)
            except ResourceStatusError as exc:
                raw = pod.annotations.get(ANNOTATION_RESOURCE_STATUS, "")
                if (pod.uid, raw) not in self._logged:
                    if len(self._logged) >= 4096:
                        self._logged.clear()
                    self._logged.add((pod.uid, raw))
                    log.warning(
                        "pod %s: malformed %s, its cpuset is not enforced: %s", pod.key, ANNOTATION_RESOURCE_STATUS, exc
                    )
                out.skipped[pod.key] = str(exc)
                continue
            if cpus is None:
                continue
            out.cpus[pod.uid] = cpus
            value = format_cpuset(cpus)
            out.levels[0].append(CgroupWrite("cpuset.cpus", pod.cgroup_dir, value, REASON))
            children = ctx.layout.subdirs(pod.cgroup_dir, "cpuset")
            out.levels[1] += [CgroupWrite("cpuset.cpus", d, value, REASON) for d in children]
            if unset_quota:
                out.quota_writes.append(CgroupWrite("cpu.cfs_quota_us", pod.cgroup_dir, "-1", REASON_UNSET_QUOTA))
                out.quota_writes += [
                    CgroupWrite("cpu.cfs_quota_us", d, "-1", REASON_UNSET_QUOTA)
                    for d in ctx.layout.subdirs(pod.cgroup_dir, "cpu")
                ]
        return out
