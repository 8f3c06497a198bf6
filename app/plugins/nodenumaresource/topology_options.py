"""A node's NodeNUMAResource options (upstream ``topology_options.go`` ``TopologyOptions`` and ``util.go``):
its cpu layout, the cpus no cpuset may take, its node-side cpu bind policy, NUMA topology policy and
NUMA allocate strategy, resolved from the Node's labels and its NodeResourceTopology.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.api.topology import (
    ANNOTATION_NODE_RESERVATION,
    KUBELET_CPU_MANAGER_POLICY_STATIC,
    KUBELET_OPTION_FULL_PCPUS_ONLY,
    CPUSetError,
    NodeTopology,
    parse_cpuset,
)
from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.cpu_topology import CPUTopology

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    """What the plugin needs to know about one node.

    Attributes:
        topo: the parsed NodeResourceTopology (None: the node reports none).
        cpu: its cpu layout (None without a NodeResourceTopology).
        reserved: cpus never given to a cpuset: the kubelet's reserved cpus, those its static CPU
            manager gave to pods (``pod-cpu-allocs``) and the node reservation's ``reservedCPUs``
            (``node.koordinator.sh/reservation`` on the NodeResourceTopology), as upstream's
            ``ReservedCPUs``.
        bind_policy: ``GetNodeCPUBindPolicy``: FullPCPUsOnly (label, or kubelet static with
            ``full-pcpus-only``), SpreadByPCPUs (label) or None.
        numa_policy: ``getNUMATopologyPolicy``: the node label, else the NRT's ``topologyPolicies``.
        numa_strategy: the ``numa-allocate-strategy`` label, else the args' default.
    """

    topo: NodeTopology | None
    cpu: CPUTopology | None
    reserved: frozenset[int]
    bind_policy: str
    numa_policy: str
    numa_strategy: str

    def cpu_valid(self) -> bool:
        """The node has a usable cpu topology (``CPUTopology.IsValid``)."""
        return self.cpu is not None and self.cpu.is_valid()

    def numa_nodes(self) -> list[int]:
        """NUMA node ids with a zone (``getNUMANodes``), sorted."""
        return sorted(self.topo.numa_nodes) if self.topo is not None else []


def node_cpu_bind_policy(labels: Mapping[str, str], topo: NodeTopology | None) -> str:
    """``GetNodeCPUBindPolicy``."""
    label = labels.get(n.LABEL_NODE_CPU_BIND_POLICY, "")
    kubelet = topo.kubelet_policy if topo is not None else None
    if label == n.NODE_CPU_BIND_FULL_PCPUS_ONLY or (
        kubelet is not None
        and kubelet.policy == KUBELET_CPU_MANAGER_POLICY_STATIC
        and kubelet.options.get(KUBELET_OPTION_FULL_PCPUS_ONLY) == "true"
    ):
        return n.NODE_CPU_BIND_FULL_PCPUS_ONLY
    if label == n.NODE_CPU_BIND_SPREAD_BY_PCPUS:
        return label
    return n.NODE_CPU_BIND_NONE


def node_numa_policy(labels: Mapping[str, str], topo: NodeTopology | None) -> str:
    """``getNUMATopologyPolicy``: the label (an unknown value reads as given, and then matches nothing
    but itself), else the first of the NRT's ``topologyPolicies`` upstream maps (``convertToNUMATopologyPolicy``)."""
    label = labels.get(n.LABEL_NUMA_TOPOLOGY_POLICY, "")
    if label and label != "None":
        return label
    if topo is not None:
        for policy in topo.topology_policies:
            mapped = n.NRT_POLICIES.get(policy)
            if mapped:
                return mapped
    return n.NUMA_POLICY_NONE


def merge_numa_policy(node_policy: str, pod_policy: str) -> str | None:
    """``mergeTopologyPolicy``: both set and different -> None (``NUMA Topology policy not match``);
    else the pod's when set, otherwise the node's."""
    if node_policy and pod_policy and node_policy != pod_policy:
        return None
    return pod_policy or node_policy


def node_reserved_cpus(nrt: Mapping[str, Any] | None) -> frozenset[int]:
    """``GetReservedCPUs``: the ``reservedCPUs`` of the NodeResourceTopology's ``node.koordinator.sh/reservation``
    annotation (empty when absent or malformed; upstream logs and goes on)."""
    meta = (nrt or {}).get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(ANNOTATION_NODE_RESERVATION) if isinstance(meta, dict) else None
    if not raw:
        return frozenset()
    try:
        value = json.loads(raw)
        return parse_cpuset(value.get("reservedCPUs") or "") if isinstance(value, dict) else frozenset()
    except (ValueError, CPUSetError) as exc:
        log.warning("NodeResourceTopology %s: %s: %s", meta.get("name"), ANNOTATION_NODE_RESERVATION, exc)
        return frozenset()


def topology_options(
    labels: Mapping[str, str],
    topo: NodeTopology | None,
    cpu: CPUTopology | None,
    default_strategy: str,
    node_reserved: frozenset[int] = frozenset(),
) -> TopologyOptions:
    """Resolve the options of a node from its labels and topology (``node_reserved``: :func:`node_reserved_cpus`)."""
    reserved = topo.kubelet_reserved | topo.kubelet_allocated | node_reserved if topo is not None else frozenset()
    return TopologyOptions(
        topo=topo,
        cpu=cpu,
        reserved=reserved,
        bind_policy=node_cpu_bind_policy(labels, topo),
        numa_policy=node_numa_policy(labels, topo),
        numa_strategy=labels.get(n.LABEL_NODE_NUMA_ALLOCATE_STRATEGY) or default_strategy,
    )
