"""Who holds which cpus and NUMA resources on each node, and allocating a pod's share (upstream
``resource_manager.go`` ``resourceManager`` and ``node_allocation.go`` ``NodeAllocation``).

Holders, per node: pods with a ``resource-status`` (bound pods, from the cache), pods this service
reserved (from Reserve until the pod's own annotation shows up, or Unreserve), and Reservations
(their reserve pods' cpusets, written on the Reservation at placement). The kubelet's reserved cpus
and its static-policy pods' cpus are never free (:class:`~.topology_options.TopologyOptions.reserved`).
A reservation's cpus not yet used by its owners are free to those owners only (``preferred``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.cpu_accumulator import (
    NotEnoughCPUs,
    filter_by_required_policy,
    satisfies_required_policy,
    take_preferred_cpus,
)
from app.plugins.nodenumaresource.topology_options import TopologyOptions

CPU = "cpu"
MEMORY = "memory"
NUMA_RESOURCES = (CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class PodAllocation:
    """What one holder has on a node.

    Attributes:
        uid: the pod's uid (a Reservation's reserve pod uid for a reservation).
        key: ``namespace/name`` (or ``reservation/<name>``), for display.
        cpus: its cpuset (may be empty for a NUMA-only allocation).
        exclusive: its ``preferredCPUExclusivePolicy`` ("" / None / PCPULevel / NUMANodeLevel).
        numa: NUMA node -> {cpu: milli, memory: bytes} it holds there, in node order.
    """

    uid: str
    key: str
    cpus: frozenset[int] = frozenset()
    exclusive: str = ""
    numa: tuple[tuple[int, dict[str, int]], ...] = ()


@dataclass(slots=True)
class NodeAllocation:
    """The holders of one node, with derived views recomputed only after a change (``version``)."""

    pods: dict[str, PodAllocation] = field(default_factory=dict)
    version: int = 0
    _held_version: int = -1
    _held: dict[int, str] = field(default_factory=dict)

    def held(self) -> dict[int, str]:
        """cpu -> exclusive policy of its holder, for every held cpu."""
        if self._held_version != self.version:
            held: dict[int, str] = {}
            for alloc in self.pods.values():
                for cpu in alloc.cpus:
                    held[cpu] = alloc.exclusive
            self._held, self._held_version = held, self.version
        return self._held

    def numa_used(self, cpu_node: dict[int, int]) -> dict[int, dict[str, int]]:
        """NUMA node -> {cpu milli, memory bytes} held there: a holder's ``numaNodeResources``, or for a
        cpuset without them, 1000 milli-cores per cpu on that cpu's NUMA node."""
        used: dict[int, dict[str, int]] = {}
        for alloc in self.pods.values():
            if alloc.numa:
                for nid, res in alloc.numa:
                    slot = used.setdefault(nid, {})
                    for k, v in res.items():
                        slot[k] = slot.get(k, 0) + v
            else:
                for cpu in alloc.cpus:
                    on = cpu_node.get(cpu)
                    if on is not None:
                        slot = used.setdefault(on, {})
                        slot[CPU] = slot.get(CPU, 0) + 1000
        return used


class Refused(Exception):
    """An allocation cannot be made; ``reason`` is upstream's message, ``unresolvable`` its code."""

    def __init__(self, reason: str, unresolvable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unresolvable = unresolvable


@dataclass(frozen=True, slots=True)
class ResourceOptions:
    """One pod's request on one node (upstream ``ResourceOptions``).

    Attributes:
        num_cpus: cpus needed (``requests.cpu / 1000``).
        requests: {cpu: milli, memory: bytes}.
        bind: the pod gets a cpuset here (``requestCPUBind``).
        policy: the effective bind policy; required: whether it must hold.
        exclusive: the pod's preferred exclusive policy.
    """

    num_cpus: int
    requests: dict[str, int]
    bind: bool
    policy: str
    required: bool
    exclusive: str = ""


def free_cpus(opts: TopologyOptions, node: NodeAllocation, extra: frozenset[int] = frozenset()) -> frozenset[int]:
    """``GetAvailableCPUs``: the node's cpus minus held and reserved ones, plus ``extra`` (a reservation's
    remaining cpus, for its owner)."""
    if opts.cpu is None:
        return frozenset()
    held = node.held()
    return frozenset(c for c in opts.cpu.core if (c not in held or c in extra) and c not in opts.reserved)


def numa_available(
    opts: TopologyOptions, node: NodeAllocation
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """(available, total) per NUMA node of cpu (milli) and memory (bytes): the zones' allocatable minus
    what holders take there (``getAvailableNUMANodeResources``)."""
    if opts.topo is None:
        return {}, {}
    cpu_node = opts.cpu.node if opts.cpu is not None else {}
    used = node.numa_used(cpu_node)
    total: dict[int, dict[str, int]] = {}
    available: dict[int, dict[str, int]] = {}
    for nid, info in opts.topo.numa_nodes.items():
        tot = {r: info.allocatable[r] for r in NUMA_RESOURCES if r in info.allocatable}
        total[nid] = tot
        u = used.get(nid, {})
        available[nid] = {r: max(0, v - u.get(r, 0)) for r, v in tot.items()}
    return available, total


def trim_cpu(
    opts: TopologyOptions, ro: ResourceOptions, available: dict[int, dict[str, int]], free: frozenset[int]
) -> None:
    """``trimNUMANodeResources``: under a required bind policy a NUMA node offers at most the cpus the
    policy can use there (in place)."""
    if not ro.required or opts.cpu is None:
        return
    usable = filter_by_required_policy(opts.cpu, free, ro.policy)
    per_node: dict[int, int] = {}
    for c in usable:
        nid = opts.cpu.node[c]
        per_node[nid] = per_node.get(nid, 0) + 1
    for nid, res in available.items():
        if res.get(CPU):
            res[CPU] = min(res[CPU], per_node.get(nid, 0) * 1000)


def distribute(
    opts: TopologyOptions, ro: ResourceOptions, available: dict[int, dict[str, int]], hint: tuple[int, ...]
) -> tuple[tuple[int, dict[str, int]], ...]:
    """``tryBestToDistributeEvenly``: split each requested resource over the hint's NUMA nodes, the
    emptiest last, each taking an even share of what is left (whole cpus for a cpuset, whole cores
    under required FullPCPUs).

    Raises:
        Refused: ``Insufficient NUMA <resource>``.
    """
    names = {r for res in available.values() for r in res}
    result: dict[int, dict[str, int]] = {}
    per_core = opts.cpu.cpus_per_core() if opts.cpu is not None else 1
    for res in NUMA_RESOURCES:
        want = ro.requests.get(res, 0)
        if not want or res not in names:
            continue
        order = sorted(hint, key=lambda nid: (available.get(nid, {}).get(res, 0), nid))
        for i, nid in enumerate(order):
            left = len(order) - i
            if res != CPU or not ro.bind:
                share = want // left if i < len(order) - 1 else want
            elif ro.required and ro.policy == n.CPU_BIND_FULL_PCPUS:
                share = ((want // 1000 // per_core) // left) * per_core * 1000 if i < len(order) - 1 else want
            else:
                share = (want // 1000 // left) * 1000 if i < len(order) - 1 else want
            got = min(available.get(nid, {}).get(res, 0), share)
            if got > 0:
                result.setdefault(nid, {})[res] = got
                want -= got
        if want > 0:
            raise Refused(f"Insufficient NUMA {res}")
    return tuple(sorted(result.items()))


def allocate(
    opts: TopologyOptions,
    node: NodeAllocation,
    ro: ResourceOptions,
    hint: tuple[int, ...] | None,
    preferred: frozenset[int] = frozenset(),
) -> tuple[frozenset[int], tuple[tuple[int, dict[str, int]], ...]]:
    """``resourceManager.Allocate``: the pod's NUMA resources on ``hint`` (when given) and its cpuset
    (when ``ro.bind``), from the node's free cpus plus ``preferred`` (taken first).

    Returns:
        (cpus, numaNodeResources).

    Raises:
        Refused: upstream's reason (``not enough cpus available to satisfy request``,
            ``Insufficient NUMA cpu``, ``insufficient CPUs to satisfy required cpu bind policy X``).
    """
    free = free_cpus(opts, node, preferred)
    numa: tuple[tuple[int, dict[str, int]], ...] = ()
    if hint:
        available, _ = numa_available(opts, node)
        trim_cpu(opts, ro, available, free)
        numa = distribute(opts, ro, available, hint)
    if not ro.bind:
        return frozenset(), numa
    assert opts.cpu is not None
    topo = opts.cpu
    usable = filter_by_required_policy(topo, free, ro.policy) if ro.required else free
    if len(usable) < ro.num_cpus:
        raise Refused(n.ERR_NOT_ENOUGH_CPUS)
    held = node.held()
    excl = {c: p for c, p in held.items() if p in (n.CPU_EXCLUSIVE_PCPU_LEVEL, n.CPU_EXCLUSIVE_NUMA_NODE_LEVEL)}
    result: frozenset[int] = frozenset()
    needed = ro.num_cpus
    try:
        if numa:
            for nid, res in numa:
                in_node = usable & frozenset(topo.cpus_in_node.get(nid, ()))
                count = min(len(in_node), res.get(CPU, 0) // 1000)
                result |= take_preferred_cpus(
                    topo, in_node, preferred, excl, count, ro.policy, ro.exclusive, opts.numa_strategy
                )
            needed -= len(result)
            if needed != 0:
                raise Refused(n.ERR_NOT_ENOUGH_CPUS)
        if needed > 0:
            result |= take_preferred_cpus(
                topo, usable - result, preferred, excl, needed, ro.policy, ro.exclusive, opts.numa_strategy
            )
    except NotEnoughCPUs as exc:
        raise Refused(str(exc)) from None
    if ro.required and not satisfies_required_policy(topo, result, ro.policy):
        raise Refused(f"insufficient CPUs to satisfy required cpu bind policy {ro.policy}")
    return result, numa


class CPUManager:
    """Node name -> :class:`NodeAllocation`; every holder is keyed by uid and lives on one node."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeAllocation] = {}
        self._where: dict[str, str] = {}
        #: nodes whose holders changed since the plugin last refreshed its per-node columns
        self.dirty: set[str] = set()

    def node(self, name: str) -> NodeAllocation:
        """The allocation of node ``name`` (an empty one is created)."""
        found = self.nodes.get(name)
        if found is None:
            found = self.nodes[name] = NodeAllocation()
        return found

    def get(self, uid: str) -> tuple[str, PodAllocation] | None:
        """(node, allocation) of holder ``uid``, or None."""
        where = self._where.get(uid)
        if where is None:
            return None
        alloc = self.nodes[where].pods.get(uid)
        return (where, alloc) if alloc is not None else None

    def add(self, node: str, alloc: PodAllocation) -> None:
        """Record (or replace) what ``alloc.uid`` holds, on ``node``."""
        self.release(alloc.uid)
        na = self.node(node)
        na.pods[alloc.uid] = alloc
        na.version += 1
        self._where[alloc.uid] = node
        self.dirty.add(node)

    def release(self, uid: str) -> bool:
        """Forget what ``uid`` holds; True when it held something."""
        where = self._where.pop(uid, None)
        if where is None:
            return False
        na = self.nodes[where]
        if na.pods.pop(uid, None) is None:
            return False
        na.version += 1
        self.dirty.add(where)
        return True
