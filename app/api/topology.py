"""A node's CPU topology as Koordinator publishes it: the NodeResourceTopology object and its annotations.

The node agent reports the topology (``pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go``)
as a ``NodeResourceTopology`` (``topology.node.k8s.io/v1alpha1``, k8stopologyawareschedwg's
noderesourcetopology-api) named after the node: one zone per NUMA node (``node-<id>``, type ``Node``)
with cpu / memory capacity, allocatable and available, ``topologyPolicies`` (the kubelet topology
manager's policy, ``["None"]`` by default), and Koordinator's annotations on the object
(``apis/extension/numa_aware.go``):

- ``node.koordinator.sh/cpu-topology``: ``{"detail":[{"id":0,"core":0,"socket":0,"node":0},...]}``, one
  entry per online logical cpu sorted by id; ``core`` is a machine-wide core index (as lscpu numbers
  cores), so hyper-thread siblings share it and no two sockets do.
- ``node.koordinator.sh/cpu-shared-pools``: ``[{"socket":0,"node":0,"cpuset":"0-7"},...]``, per NUMA node
  the cpus LS pods share (not held by a pod's ``resource-status`` cpuset nor reserved by the node).
- ``kubelet.koordinator.sh/cpu-manager-policy``: ``{"policy":"static","options":{...},"reservedCPUs":"0-1"}``.
- ``node.koordinator.sh/pod-cpu-allocs``, ``node.koordinator.sh/cpu-basic-info``,
  ``node.koordinator.sh/reservation``: cpus held by kubelet-managed pods (``null`` when none), the basic
  cpu facts (``{"hyperThreadEnabled":true}``) and the node's reservation as the agent resolved it.

cpusets are strings in the kernel's list format (``"0-3,8-11"``), parsed and formatted here.

This module holds the names, the JSON shapes (pydantic models), and :func:`parse_node_resource_topology`,
the one reader of the object used by the scheduler's cache and inspection routes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, ValidationError

from app.api.meta import KubeModel
from app.api.quantity import QuantityError, resource_value

ANNOTATION_NODE_CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"
ANNOTATION_NODE_CPU_SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_NODE_CPU_ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
#: cpus of SYSTEM QoS pods (``{"cpuset":"0-1","cpusetExclusive":true}``), from the Node's annotation of that name.
ANNOTATION_NODE_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
#: A pod's allocation result (``{"cpuset":"0-3",...}``), written by the scheduler at PreBind.
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
#: The label upstream's ``newNodeTopo`` puts on the objects it creates (``extension.LabelManagedBy``).
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "Koordinator"

#: Annotations the agent owns on the object (upstream ``managedNRTAnnotationKeys``, those this agent writes).
MANAGED_ANNOTATIONS: tuple[str, ...] = (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_CPU_ALLOCS,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
)

ZONE_TYPE_NODE = "Node"
#: ``topologyPolicies`` values (noderesourcetopology-api ``TopologyManagerPolicy``).
TOPOLOGY_POLICY_NONE = "None"
KUBELET_CPU_MANAGER_POLICY_STATIC = "static"
KUBELET_CPU_MANAGER_POLICY_NONE = "none"
KUBELET_OPTION_FULL_PCPUS_ONLY = "full-pcpus-only"

#: Largest cpu id accepted in a cpuset (the kernel's NR_CPUS is at most 8192); bounds the work of a
#: hostile ``"0-999999999"``.
MAX_CPU_ID = 65535


class CPUSetError(ValueError):
    """A cpuset string is not in the kernel's list format; the message quotes it."""


class TopologyError(ValueError):
    """A NodeResourceTopology (or one of its annotations) is malformed; the message names the field."""


def zone_name(numa_node: int) -> str:
    """The zone of NUMA node ``numa_node``: ``node-<id>`` (upstream ``util.GenNodeZoneName``)."""
    return f"node-{numa_node}"


def parse_cpuset(text: str) -> frozenset[int]:
    """``"0-3,8"`` -> ``{0, 1, 2, 3, 8}``; ``""`` -> empty (upstream ``cpuset.Parse``).

    Raises:
        CPUSetError: not a cpu list (bad number, reversed range, id above :data:`MAX_CPU_ID`).
    """
    if not isinstance(text, str):
        raise CPUSetError(f"cpuset must be a string, got {type(text).__name__}")
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise CPUSetError(f"invalid cpuset {text!r}: {part!r} is not a cpu or a range") from None
        if a < 0 or b < a or b > MAX_CPU_ID:
            raise CPUSetError(f"invalid cpuset {text!r}: range {part!r} is reversed, negative or above {MAX_CPU_ID}")
        cpus.update(range(a, b + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"`` (the kernel's list format, upstream ``CPUSet.String``)."""
    ordered = sorted(set(cpus))
    out: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def dumps_annotation(value: Any) -> str:
    """JSON as Go's ``json.Marshal`` writes it: compact, keys in the order given (the structs' order)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- JSON shapes (apis/extension/numa_aware.go, noderesourcetopology-api v1alpha1) -----------------


class CPUInfo(KubeModel):
    """One logical cpu: ``id``, machine-wide ``core`` index, ``socket`` and NUMA ``node``."""

    id: int = Field(ge=0, le=MAX_CPU_ID)
    core: int = Field(ge=0)
    socket: int = Field(ge=0)
    node: int = Field(ge=0)


class CPUTopology(KubeModel):
    """``node.koordinator.sh/cpu-topology``: ``{"detail": [CPUInfo, ...]}``."""

    detail: list[CPUInfo] = Field(default_factory=list)


class CPUSharedPool(KubeModel):
    """One entry of ``node.koordinator.sh/cpu-shared-pools``: a NUMA node's shared cpus."""

    socket: int = 0
    node: int = 0
    cpuset: str = ""


class KubeletCPUManagerPolicy(KubeModel):
    """``kubelet.koordinator.sh/cpu-manager-policy``: the kubelet's CPU manager policy (``none`` or
    ``static``), its options (``full-pcpus-only``: ``"true"``) and its reserved cpus (cpuset string)."""

    policy: str = ""
    options: dict[str, str] = Field(default_factory=dict)
    reserved_cpus: str = Field(default="", alias="reservedCPUs")


class PodCPUAlloc(KubeModel):
    """One entry of ``node.koordinator.sh/pod-cpu-allocs``: cpus the kubelet's static CPU manager gave a pod."""

    namespace: str = ""
    name: str = ""
    uid: str = ""
    cpuset: str = ""
    managed_by_kubelet: bool = False


class ResourceInfo(KubeModel):
    """One resource of a zone: quantities as strings."""

    name: str
    capacity: str | int
    allocatable: str | int
    available: str | int


class Zone(KubeModel):
    """A topology zone; the agent writes one per NUMA node (``node-<id>``, type ``Node``)."""

    name: str
    type: str
    parent: str | None = None
    resources: list[ResourceInfo] | None = None


# --- the parsed view the scheduler keeps ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NUMANodeInfo:
    """One NUMA node as the NodeResourceTopology reports it.

    Attributes:
        node: NUMA node id.
        cpus: its logical cpus (from the cpu-topology annotation).
        capacity / allocatable: the zone's resources (cpu in milli-cores, memory in bytes).
    """

    node: int
    cpus: frozenset[int]
    capacity: dict[str, int]
    allocatable: dict[str, int]


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """A parsed NodeResourceTopology (see :func:`parse_node_resource_topology`).

    Attributes:
        name: the node's name (the object's name).
        cpus: cpu id -> :class:`CPUInfo` (empty when the object has no cpu-topology annotation).
        numa_nodes: NUMA node id -> :class:`NUMANodeInfo`, from the zones and the cpus.
        shared_pools: the LS shared pools.
        kubelet_policy: the kubelet's CPU manager policy (all empty when not reported).
        kubelet_reserved: the kubelet's reserved cpus.
        kubelet_allocs: pods' cpus of the kubelet's static CPU manager (``pod-cpu-allocs``).
        kubelet_allocated: all their cpus together.
        topology_policies: ``topologyPolicies`` as written.
    """

    name: str
    cpus: dict[int, CPUInfo] = field(default_factory=dict)
    numa_nodes: dict[int, NUMANodeInfo] = field(default_factory=dict)
    shared_pools: tuple[CPUSharedPool, ...] = ()
    kubelet_policy: KubeletCPUManagerPolicy = field(default_factory=KubeletCPUManagerPolicy)
    kubelet_reserved: frozenset[int] = frozenset()
    kubelet_allocs: tuple[PodCPUAlloc, ...] = ()
    kubelet_allocated: frozenset[int] = frozenset()
    topology_policies: tuple[str, ...] = ()

    @property
    def sockets(self) -> int:
        """Number of sockets."""
        return len({c.socket for c in self.cpus.values()})

    @property
    def cores(self) -> int:
        """Number of physical cores."""
        return len({c.core for c in self.cpus.values()})

    @property
    def threads_per_core(self) -> int:
        """Logical cpus per physical core (1 without hyper-threading; 0 when no cpu is known)."""
        return len(self.cpus) // self.cores if self.cores else 0

    def summary(self) -> dict[str, Any]:
        """What ``/apis/v1/nodes/{name}`` shows: counts, cpus per NUMA node and the kubelet's policy."""
        by_node: dict[int, set[int]] = {}
        for c in self.cpus.values():
            by_node.setdefault(c.node, set()).add(c.id)
        numa = []
        for nid in sorted(set(by_node) | set(self.numa_nodes)):
            info = self.numa_nodes.get(nid)
            cpus = by_node.get(nid, set())
            numa.append(
                {
                    "node": nid,
                    "cpus": format_cpuset(cpus),
                    "cpuCount": len(cpus),
                    "memoryBytes": info.capacity.get("memory") if info else None,
                }
            )
        return {
            "cpus": len(self.cpus),
            "sockets": self.sockets,
            "cores": self.cores,
            "threadsPerCore": self.threads_per_core,
            "numaNodes": numa,
            "sharedPools": [p.model_dump(by_alias=True) for p in self.shared_pools],
            "kubeletCPUManagerPolicy": self.kubelet_policy.model_dump(by_alias=True, exclude_defaults=True),
            "kubeletAllocatedCPUs": format_cpuset(self.kubelet_allocated),
            "topologyPolicies": list(self.topology_policies),
        }


def _annotation(annotations: dict[str, Any], key: str) -> Any:
    raw = annotations.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise TopologyError(f"annotation {key}: expected a JSON string, got {type(raw).__name__}")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise TopologyError(f"annotation {key}: invalid JSON: {exc}") from None


def _where(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}" if loc else str(err["msg"])


def parse_node_resource_topology(obj: Any) -> NodeTopology:
    """Parse a NodeResourceTopology object (a JSON-shaped dict) as the scheduler reads it.

    Checks what a consumer relies on: a name, ``zones`` a list of zones with a name and a type and
    valid quantities, the Koordinator annotations valid JSON of their shapes, cpusets in list format,
    no cpu listed twice in ``cpu-topology``. Zones other than ``node-<id>`` of type ``Node`` (sockets,
    cores from other reporters) are kept out of :attr:`NodeTopology.numa_nodes`.

    Raises:
        TopologyError: the object is malformed; the message names the field.
    """
    if not isinstance(obj, dict):
        raise TopologyError("a NodeResourceTopology must be an object")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise TopologyError("metadata: required")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise TopologyError("metadata.name: required")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise TopologyError("metadata.annotations: expected a map")
    policies = obj.get("topologyPolicies") or []
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        raise TopologyError("topologyPolicies: expected a list of strings")
    zones_raw = obj.get("zones") or []
    if not isinstance(zones_raw, list):
        raise TopologyError("zones: expected a list")

    cpus: dict[int, CPUInfo] = {}
    topo_json = _annotation(annotations, ANNOTATION_NODE_CPU_TOPOLOGY)
    if topo_json is not None:
        try:
            topo = CPUTopology.model_validate(topo_json)
        except ValidationError as exc:
            raise TopologyError(f"annotation {ANNOTATION_NODE_CPU_TOPOLOGY}: {_where(exc)}") from None
        for cpu in topo.detail:
            if cpu.id in cpus:
                raise TopologyError(f"annotation {ANNOTATION_NODE_CPU_TOPOLOGY}: cpu {cpu.id} listed twice")
            cpus[cpu.id] = cpu

    pools: list[CPUSharedPool] = []
    pools_json = _annotation(annotations, ANNOTATION_NODE_CPU_SHARED_POOLS)
    if pools_json is not None:
        if not isinstance(pools_json, list):
            raise TopologyError(f"annotation {ANNOTATION_NODE_CPU_SHARED_POOLS}: expected a list")
        try:
            pools = [CPUSharedPool.model_validate(p) for p in pools_json]
            for p in pools:
                parse_cpuset(p.cpuset)
        except (ValidationError, CPUSetError) as exc:
            msg = _where(exc) if isinstance(exc, ValidationError) else str(exc)
            raise TopologyError(f"annotation {ANNOTATION_NODE_CPU_SHARED_POOLS}: {msg}") from None

    policy = KubeletCPUManagerPolicy()
    reserved: frozenset[int] = frozenset()
    policy_json = _annotation(annotations, ANNOTATION_KUBELET_CPU_MANAGER_POLICY)
    if policy_json is not None:
        try:
            policy = KubeletCPUManagerPolicy.model_validate(policy_json)
            reserved = parse_cpuset(policy.reserved_cpus)
        except (ValidationError, CPUSetError) as exc:
            msg = _where(exc) if isinstance(exc, ValidationError) else str(exc)
            raise TopologyError(f"annotation {ANNOTATION_KUBELET_CPU_MANAGER_POLICY}: {msg}") from None

    allocs: list[PodCPUAlloc] = []
    allocated: set[int] = set()
    allocs_json = _annotation(annotations, ANNOTATION_NODE_CPU_ALLOCS)
    if allocs_json is not None:  # "null" when the kubelet holds none
        if not isinstance(allocs_json, list):
            raise TopologyError(f"annotation {ANNOTATION_NODE_CPU_ALLOCS}: expected a list or null")
        try:
            allocs = [PodCPUAlloc.model_validate(a) for a in allocs_json]
            for a in allocs:
                allocated |= parse_cpuset(a.cpuset)
        except (ValidationError, CPUSetError) as exc:
            msg = _where(exc) if isinstance(exc, ValidationError) else str(exc)
            raise TopologyError(f"annotation {ANNOTATION_NODE_CPU_ALLOCS}: {msg}") from None

    by_node: dict[int, set[int]] = {}
    for c in cpus.values():
        by_node.setdefault(c.node, set()).add(c.id)
    numa: dict[int, NUMANodeInfo] = {}
    for i, raw in enumerate(zones_raw):
        try:
            zone = Zone.model_validate(raw)
        except ValidationError as exc:
            raise TopologyError(f"zones[{i}].{_where(exc)}") from None
        capacity: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        for j, res in enumerate(zone.resources or []):
            try:
                capacity[res.name] = resource_value(res.name, res.capacity)
                allocatable[res.name] = resource_value(res.name, res.allocatable)
                resource_value(res.name, res.available)
            except QuantityError as exc:
                raise TopologyError(f"zones[{i}].resources[{j}] ({res.name}): {exc}") from None
        if zone.type != ZONE_TYPE_NODE or not zone.name.startswith("node-"):
            continue
        try:
            nid = int(zone.name.removeprefix("node-"))
        except ValueError:
            continue
        numa[nid] = NUMANodeInfo(nid, frozenset(by_node.get(nid, ())), capacity, allocatable)
    return NodeTopology(
        name=name,
        cpus=cpus,
        numa_nodes=numa,
        shared_pools=tuple(pools),
        kubelet_policy=policy,
        kubelet_reserved=reserved,
        kubelet_allocs=tuple(allocs),
        kubelet_allocated=frozenset(allocated),
        topology_policies=tuple(policies),
    )
