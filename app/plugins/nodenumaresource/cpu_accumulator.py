"""Choosing the cpus of a cpuset (upstream ``cpu_accumulator.go``: ``takePreferredCPUs``, ``takeCPUs``).

Order, for ``FullPCPUs`` (or a node without hyper-threading):

1. whole free cores inside one NUMA node, the NUMA nodes ordered by the NUMA allocate strategy
   (LeastAllocated: most free cpus first; MostAllocated: fewest first; ties by the socket's free cpus,
   then node id); NUMA nodes holding ``NUMANodeLevel``-exclusive cpus are avoided first;
2. whole free cores inside one socket (same ordering over sockets);
3. whole sockets' free cores, largest first, while a socket fits entirely;
4. the remaining whole cores from the smallest sockets.

For ``SpreadByPCPUs``: free cpus of one NUMA node, then of one socket, spread one thread per core first
(cores avoided by ``PCPULevel``-exclusive pods skipped first). The fallback takes any free cpus, spread,
preferring the socket already used. A cpu is taken at most once; a pod's cpuset is exclusive
(upstream's ``maxRefCount`` 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.cpu_topology import CPUTopology


class NotEnoughCPUs(Exception):
    """The cpus cannot be found; the message is upstream's reason."""


class _Accumulator:
    """``cpuAccumulator``: the free cpus left, what was taken and the exclusive cores / NUMA nodes."""

    def __init__(
        self,
        topo: CPUTopology,
        available: Iterable[int],
        allocated_exclusive: Mapping[int, str],
        needed: int,
        exclusive_policy: str,
        numa_strategy: str,
    ) -> None:
        self.topo = topo
        self.free: set[int] = {c for c in available if c in topo.core}
        self.needed = needed
        self.exclusive_policy = exclusive_policy
        self.exclusive = exclusive_policy in (n.CPU_EXCLUSIVE_PCPU_LEVEL, n.CPU_EXCLUSIVE_NUMA_NODE_LEVEL)
        self.excl_cores: set[int] = set()
        self.excl_nodes: set[int] = set()
        for cpu, policy in allocated_exclusive.items():
            if cpu not in topo.core:
                continue
            if policy == n.CPU_EXCLUSIVE_PCPU_LEVEL:
                self.excl_cores.add(topo.core[cpu])
            elif policy == n.CPU_EXCLUSIVE_NUMA_NODE_LEVEL:
                self.excl_nodes.add(topo.node[cpu])
        self.most = numa_strategy == n.NUMA_MOST_ALLOCATED
        self.result: set[int] = set()

    def take(self, cpus: Iterable[int]) -> None:
        for cpu in cpus:
            self.result.add(cpu)
            self.free.discard(cpu)
            self.needed -= 1
            if self.exclusive:
                if self.exclusive_policy == n.CPU_EXCLUSIVE_PCPU_LEVEL:
                    self.excl_cores.add(self.topo.core[cpu])
                else:
                    self.excl_nodes.add(self.topo.node[cpu])

    def _score(self, free: int) -> int:
        # LeastAllocated prefers more free cpus, MostAllocated fewer: sort ascending by this
        return free if self.most else -free

    def _excl_core(self, cpu: int) -> bool:
        return self.exclusive_policy == n.CPU_EXCLUSIVE_PCPU_LEVEL and self.topo.core[cpu] in self.excl_cores

    def _excl_node(self, cpu: int) -> bool:
        return self.exclusive_policy == n.CPU_EXCLUSIVE_NUMA_NODE_LEVEL and self.topo.node[cpu] in self.excl_nodes

    def _cores(self, skip_excl_node: bool) -> dict[int, list[int]]:
        cores: dict[int, list[int]] = {}
        for cpu in self.free:
            if skip_excl_node and self._excl_node(cpu):
                continue
            cores.setdefault(self.topo.core[cpu], []).append(cpu)
        return cores

    def _full(self, cores: dict[int, list[int]]) -> dict[int, list[int]]:
        per = self.topo.cpus_per_core()
        return {c: cpus for c, cpus in cores.items() if len(cpus) == per}

    def _flatten(self, cores: list[int], by_core: dict[int, list[int]]) -> list[int]:
        # sortCores: more free cpus in the core first, then core id
        cores.sort(key=lambda c: (-len(by_core[c]), c))
        out: list[int] = []
        for c in cores:
            out.extend(sorted(by_core[c]))
        return out

    def free_cores_in_node(self, skip_excl: bool) -> list[list[int]]:
        """``freeCoresInNode(true, filterExclusive)``: per NUMA node its whole free cores' cpus, ordered."""
        by_core = self._cores(skip_excl)
        socket_free: dict[int, int] = {}
        for cpus in by_core.values():
            s = self.topo.socket[cpus[0]]
            socket_free[s] = socket_free.get(s, 0) + len(cpus)
        groups: dict[int, list[int]] = {}
        for core, _cpus in self._full(by_core).items():
            groups.setdefault(self.topo.node[by_core[core][0]], []).append(core)
        flat = {nid: self._flatten(cores, by_core) for nid, cores in groups.items()}
        order = sorted(
            flat,
            key=lambda nid: (
                self._score(len(flat[nid])),
                self._score(socket_free[self.topo.socket[flat[nid][0]]]),
                nid,
            ),
        )
        return [flat[nid] for nid in order]

    def free_cores_in_socket(self) -> list[list[int]]:
        """``freeCoresInSocket(true)``: per socket its whole free cores' cpus, ordered."""
        by_core = self._cores(False)
        groups: dict[int, list[int]] = {}
        for core in self._full(by_core):
            groups.setdefault(self.topo.socket[by_core[core][0]], []).append(core)
        flat = {s: self._flatten(cores, by_core) for s, cores in groups.items()}
        order = sorted(flat, key=lambda s: (self._score(len(flat[s])), s))
        return [flat[s] for s in order]

    def _extract_one_per_core(self, cpus: list[int]) -> list[int]:
        seen: set[int] = set()
        out: list[int] = []
        for c in cpus:
            core = self.topo.core[c]
            if core not in seen:
                seen.add(core)
                out.append(c)
        return out

    def free_cpus_in_node(self, skip_excl: bool) -> list[list[int]]:
        """``freeCPUsInNode``: per NUMA node its free cpus (one per core when skipping exclusive ones)."""
        groups: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for cpu in self.free:
            if skip_excl and (self._excl_core(cpu) or self._excl_node(cpu)):
                continue
            groups.setdefault(self.topo.node[cpu], []).append(cpu)
            s = self.topo.socket[cpu]
            socket_free[s] = socket_free.get(s, 0) + 1
        node_free = {nid: len(cpus) for nid, cpus in groups.items()}
        out = {}
        for nid, cpus in groups.items():
            cpus.sort()
            out[nid] = self._extract_one_per_core(cpus) if skip_excl else cpus
        order = sorted(
            out,
            key=lambda nid: (
                self._score(node_free[nid]),
                self._score(socket_free[self.topo.socket[out[nid][0]]]),
                nid,
            ),
        )
        return [out[nid] for nid in order]

    def free_cpus_in_socket(self, skip_excl: bool) -> list[list[int]]:
        """``freeCPUsInSocket``: per socket its free cpus."""
        groups: dict[int, list[int]] = {}
        for cpu in self.free:
            if skip_excl and self._excl_core(cpu):
                continue
            groups.setdefault(self.topo.socket[cpu], []).append(cpu)
        out = {}
        for s, cpus in groups.items():
            cpus.sort()
            out[s] = self._extract_one_per_core(cpus) if skip_excl else cpus
        order = sorted(out, key=lambda s: (self._score(len(out[s])), s))
        return [out[s] for s in order]

    def free_cpus(self, skip_excl: bool) -> list[int]:
        """``freeCPUs``: every free cpu, cores ordered by the socket already used, socket and node free
        cpus, then fewer free threads in the core first, socket, core id."""
        by_core: dict[int, list[int]] = {}
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        for cpu in self.free:
            if skip_excl and (self._excl_core(cpu) or self._excl_node(cpu)):
                continue
            by_core.setdefault(self.topo.core[cpu], []).append(cpu)
            nid, s = self.topo.node[cpu], self.topo.socket[cpu]
            node_free[nid] = node_free.get(nid, 0) + 1
            socket_free[s] = socket_free.get(s, 0) + 1
        colo = {s: sum(1 for c in self.result if self.topo.socket[c] == s) for s in socket_free}

        def key(core: int) -> tuple[int, ...]:
            cpu = by_core[core][0]
            s, nid = self.topo.socket[cpu], self.topo.node[cpu]
            return (-colo[s], self._score(socket_free[s]), self._score(node_free[nid]), len(by_core[core]), s, core)

        out: list[int] = []
        for core in sorted(by_core, key=key):
            out.extend(sorted(by_core[core]))
        return out

    def spread(self, cpus: list[int]) -> list[int]:
        """``spreadCPUs``: one cpu per core first, then the second threads, and so on."""
        if len(cpus) <= self.topo.cpus_per_core():
            return cpus
        out: list[int] = []
        rest = list(cpus)
        while rest:
            seen: set[int] = set()
            later: list[int] = []
            for cpu in rest:
                core = self.topo.core[cpu]
                if core in seen:
                    later.append(cpu)
                    continue
                seen.add(core)
                out.append(cpu)
            rest = later
        return out


def take_cpus(
    topo: CPUTopology,
    available: Iterable[int],
    allocated_exclusive: Mapping[int, str],
    needed: int,
    bind_policy: str,
    exclusive_policy: str = "",
    numa_strategy: str = n.NUMA_LEAST_ALLOCATED,
) -> frozenset[int]:
    """``takeCPUs``: ``needed`` cpus out of ``available`` (see the module docstring).

    Args:
        allocated_exclusive: cpus held by other pods -> their exclusive policy (only PCPULevel /
            NUMANodeLevel entries matter).

    Raises:
        NotEnoughCPUs: fewer free cpus than needed (``not enough cpus available to satisfy request``),
            or none of the orders found them (``failed to allocate cpus``).
    """
    acc = _Accumulator(topo, available, allocated_exclusive, needed, exclusive_policy, numa_strategy)
    if acc.needed < 1:
        return frozenset()
    if acc.needed > len(acc.free):
        raise NotEnoughCPUs(n.ERR_NOT_ENOUGH_CPUS)
    per_core = topo.cpus_per_core()
    full = bind_policy == n.CPU_BIND_FULL_PCPUS
    if full or per_core == 1:
        if acc.needed <= topo.cpus_per_node():
            for skip in (True, False):
                for cpus in acc.free_cores_in_node(skip):
                    if len(cpus) >= acc.needed:
                        acc.take(cpus[: acc.needed])
                        return frozenset(acc.result)
        if acc.needed <= topo.cpus_per_socket():
            for cpus in acc.free_cores_in_socket():
                if len(cpus) >= acc.needed:
                    acc.take(cpus[: acc.needed])
                    return frozenset(acc.result)
        sockets = sorted(acc.free_cores_in_socket(), key=len, reverse=True)
        unsatisfied: list[list[int]] = []
        for cpus in sockets:
            if acc.needed < len(cpus):
                unsatisfied.append(cpus)
                continue
            acc.take(cpus)
            if acc.needed < 1:
                return frozenset(acc.result)
        if acc.needed >= per_core:
            for cpus in sorted(unsatisfied, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i : i + per_core])
                    if acc.needed < 1:
                        return frozenset(acc.result)
                    if acc.needed < per_core:
                        break
    if not full:
        if acc.needed <= topo.cpus_per_node():
            for skip in (True, False):
                for cpus in acc.free_cpus_in_node(skip):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return frozenset(acc.result)
        if acc.needed <= topo.cpus_per_socket():
            for skip in (True, False):
                for cpus in acc.free_cpus_in_socket(skip):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return frozenset(acc.result)
    for skip in (True, False):
        for cpu in acc.spread(acc.free_cpus(skip)):
            if acc.needed >= 1:
                acc.take((cpu,))
            if acc.needed < 1:
                return frozenset(acc.result)
    raise NotEnoughCPUs("failed to allocate cpus")


def take_preferred_cpus(
    topo: CPUTopology,
    available: frozenset[int],
    preferred: frozenset[int],
    allocated_exclusive: Mapping[int, str],
    needed: int,
    bind_policy: str,
    exclusive_policy: str = "",
    numa_strategy: str = n.NUMA_LEAST_ALLOCATED,
) -> frozenset[int]:
    """``takePreferredCPUs``: first from ``preferred & available`` (e.g. a reservation's cpus for its
    owner), the rest from the other available cpus.

    Raises:
        NotEnoughCPUs: as :func:`take_cpus`.
    """
    result: frozenset[int] = frozenset()
    usable = available & preferred
    if usable:
        result = take_cpus(
            topo, usable, allocated_exclusive, min(needed, len(usable)), bind_policy, exclusive_policy, numa_strategy
        )
        needed -= len(result)
        available = available - usable
    if needed > 0:
        result |= take_cpus(topo, available, allocated_exclusive, needed, bind_policy, exclusive_policy, numa_strategy)
    return result


def filter_by_required_policy(topo: CPUTopology, available: frozenset[int], policy: str) -> frozenset[int]:
    """``filterCPUsByRequiredCPUBindPolicy``: FullPCPUs keeps only cores whose every thread is free;
    SpreadByPCPUs keeps the lowest free cpu of each core; other policies keep all."""
    if policy not in (n.CPU_BIND_FULL_PCPUS, n.CPU_BIND_SPREAD_BY_PCPUS):
        return available
    by_core: dict[int, list[int]] = {}
    for cpu in available:
        core = topo.core.get(cpu)
        if core is not None:
            by_core.setdefault(core, []).append(cpu)
    per = topo.cpus_per_core()
    out: set[int] = set()
    for cpus in by_core.values():
        if policy == n.CPU_BIND_FULL_PCPUS:
            if len(cpus) == per:
                out.update(cpus)
        else:
            out.add(min(cpus))
    return frozenset(out)


def satisfies_required_policy(topo: CPUTopology, cpus: frozenset[int], policy: str) -> bool:
    """``satisfiedRequiredCPUBindPolicy``: FullPCPUs: whole cores only; SpreadByPCPUs: one cpu per core."""
    cores = {topo.core[c] for c in cpus}
    if policy == n.CPU_BIND_FULL_PCPUS:
        return len(cores) * topo.cpus_per_core() == len(cpus)
    if policy == n.CPU_BIND_SPREAD_BY_PCPUS:
        return len(cores) == len(cpus)
    return True
