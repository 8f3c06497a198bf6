"""The scheduler's view of a node's CPU layout (upstream ``cpu_topology.go``: ``CPUTopology``, ``CPUDetails``).

Built once per parsed :class:`~app.api.topology.NodeTopology` (:class:`TopologyMemo`) from its
``cpu-topology`` annotation: per logical cpu its core, socket and NUMA node, and the counts the
accumulator divides by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.api.topology import NodeTopology


@dataclass(frozen=True, slots=True)
class CPUTopology:
    """A node's cpus.

    Attributes:
        core, socket, node: cpu id -> its machine-wide core id, socket id, NUMA node id.
        cpus_in_core / cpus_in_node / cpus_in_socket: id -> sorted cpu ids.
        num_cpus, num_cores, num_sockets, num_nodes: counts.
    """

    core: dict[int, int]
    socket: dict[int, int]
    node: dict[int, int]
    cpus_in_core: dict[int, tuple[int, ...]] = field(default_factory=dict)
    cpus_in_node: dict[int, tuple[int, ...]] = field(default_factory=dict)
    cpus_in_socket: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def num_cpus(self) -> int:
        """Logical cpus."""
        return len(self.core)

    @property
    def num_cores(self) -> int:
        """Physical cores."""
        return len(self.cpus_in_core)

    def is_valid(self) -> bool:
        """Upstream ``IsValid``: cpus, cores, sockets and NUMA nodes all known."""
        return bool(self.core and self.cpus_in_core and self.cpus_in_socket and self.cpus_in_node)

    def cpus_per_core(self) -> int:
        """Logical cpus per core (``NumCPUs / NumCores``); 0 when empty."""
        return self.num_cpus // self.num_cores if self.num_cores else 0

    def cpus_per_node(self) -> int:
        """Logical cpus per NUMA node; 0 when empty."""
        return self.num_cpus // len(self.cpus_in_node) if self.cpus_in_node else 0

    def cpus_per_socket(self) -> int:
        """Logical cpus per socket; 0 when empty."""
        return self.num_cpus // len(self.cpus_in_socket) if self.cpus_in_socket else 0


def build_cpu_topology(topo: NodeTopology) -> CPUTopology:
    """The :class:`CPUTopology` of ``topo``'s ``cpu-topology`` annotation (empty when it has none)."""
    core: dict[int, int] = {}
    socket: dict[int, int] = {}
    node: dict[int, int] = {}
    in_core: dict[int, list[int]] = {}
    in_node: dict[int, list[int]] = {}
    in_socket: dict[int, list[int]] = {}
    for cid in sorted(topo.cpus):
        info = topo.cpus[cid]
        core[cid], socket[cid], node[cid] = info.core, info.socket, info.node
        in_core.setdefault(info.core, []).append(cid)
        in_node.setdefault(info.node, []).append(cid)
        in_socket.setdefault(info.socket, []).append(cid)
    return CPUTopology(
        core,
        socket,
        node,
        {k: tuple(v) for k, v in in_core.items()},
        {k: tuple(v) for k, v in in_node.items()},
        {k: tuple(v) for k, v in in_socket.items()},
    )


class TopologyMemo:
    """Node name -> its :class:`CPUTopology`, rebuilt only when the cache holds a new NodeTopology object."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[NodeTopology, CPUTopology]] = {}

    def get(self, name: str, topo: NodeTopology | None) -> CPUTopology | None:
        """The cpu topology of ``topo`` (None when the node has no NodeResourceTopology)."""
        if topo is None:
            self._memo.pop(name, None)
            return None
        found = self._memo.get(name)
        if found is not None and found[0] is topo:
            return found[1]
        built = build_cpu_topology(topo)
        self._memo[name] = (topo, built)
        return built
