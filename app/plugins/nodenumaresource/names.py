"""Names, policy values and reasons of NodeNUMAResource, spelled as upstream.

Upstream: ``apis/extension/numa_aware.go`` (annotations, labels, policy values) and
``pkg/scheduler/plugins/nodenumaresource/plugin.go`` (the ``Err*`` reasons).
"""

from __future__ import annotations

#: Pod annotation: ``{requiredCPUBindPolicy, preferredCPUBindPolicy, preferredCPUExclusivePolicy}``.
ANNOTATION_RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
#: Pod annotation: ``{"cpuset": "0-3", "numaNodeResources": [{"node": 0, "resources": {...}}]}``.
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
#: Pod annotation: ``{numaTopologyPolicy, singleNUMANodeExclusive}``.
ANNOTATION_NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
#: Node labels.
LABEL_NODE_CPU_BIND_POLICY = "node.koordinator.sh/cpu-bind-policy"
LABEL_NODE_NUMA_ALLOCATE_STRATEGY = "node.koordinator.sh/numa-allocate-strategy"
LABEL_NUMA_TOPOLOGY_POLICY = "node.koordinator.sh/numa-topology-policy"

# CPUBindPolicy (pod side)
CPU_BIND_DEFAULT = "Default"
CPU_BIND_FULL_PCPUS = "FullPCPUs"
CPU_BIND_SPREAD_BY_PCPUS = "SpreadByPCPUs"
CPU_BIND_CONSTRAINED_BURST = "ConstrainedBurst"
CPU_BIND_POLICIES = frozenset(
    {"", CPU_BIND_DEFAULT, CPU_BIND_FULL_PCPUS, CPU_BIND_SPREAD_BY_PCPUS, CPU_BIND_CONSTRAINED_BURST}
)

# CPUExclusivePolicy
CPU_EXCLUSIVE_NONE = "None"
CPU_EXCLUSIVE_PCPU_LEVEL = "PCPULevel"
CPU_EXCLUSIVE_NUMA_NODE_LEVEL = "NUMANodeLevel"
CPU_EXCLUSIVE_POLICIES = frozenset({"", CPU_EXCLUSIVE_NONE, CPU_EXCLUSIVE_PCPU_LEVEL, CPU_EXCLUSIVE_NUMA_NODE_LEVEL})

# NodeCPUBindPolicy (node label)
NODE_CPU_BIND_NONE = "None"
NODE_CPU_BIND_FULL_PCPUS_ONLY = "FullPCPUsOnly"
NODE_CPU_BIND_SPREAD_BY_PCPUS = "SpreadByPCPUs"

# NUMAAllocateStrategy
NUMA_MOST_ALLOCATED = "MostAllocated"
NUMA_LEAST_ALLOCATED = "LeastAllocated"
NUMA_DISTRIBUTE_EVENLY = "DistributeEvenly"

# NUMATopologyPolicy ("" is None)
NUMA_POLICY_NONE = ""
NUMA_POLICY_BEST_EFFORT = "BestEffort"
NUMA_POLICY_RESTRICTED = "Restricted"
NUMA_POLICY_SINGLE_NUMA_NODE = "SingleNUMANode"
NUMA_POLICIES = frozenset(
    {NUMA_POLICY_NONE, "None", NUMA_POLICY_BEST_EFFORT, NUMA_POLICY_RESTRICTED, NUMA_POLICY_SINGLE_NUMA_NODE}
)
#: NodeResourceTopology ``topologyPolicies`` values -> NUMA topology policy (upstream ``convertToNUMATopologyPolicy``).
NRT_POLICIES = {
    "BestEffort": NUMA_POLICY_BEST_EFFORT,
    "Restricted": NUMA_POLICY_RESTRICTED,
    "SingleNUMANodePodLevel": NUMA_POLICY_SINGLE_NUMA_NODE,
}

# NumaTopologyExclusive
NUMA_EXCLUSIVE_PREFERRED = "Preferred"
NUMA_EXCLUSIVE_REQUIRED = "Required"

# Reasons (plugin.go)
ERR_NOT_MATCH_NUMA_TOPOLOGY = "node(s) NUMA Topology policy not match"
ERR_INVALID_REQUESTED_CPUS = "the requested CPUs must be integer"
ERR_INVALID_CPU_TOPOLOGY = "node(s) invalid CPU Topology"
ERR_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"
ERR_CPU_BIND_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
#: topology_hint.go / topologymanager
ERR_MISSING_NUMA_RESOURCES = "node(s) missing NUMA resources"
ERR_INSUFFICIENT_NUMA_RESOURCES = "node(s) Insufficient NUMA Node resources"
ERR_NUMA_HINT_CANNOT_ALIGNED = "Unaligned NUMA Hint cause {}"
