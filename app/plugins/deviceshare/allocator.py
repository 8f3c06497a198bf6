"""Per-node allocation of RDMA/FPGA devices, joint GPU+RDMA allocation and GPU topology scopes
(upstream ``deviceshare/device_allocator.go``, ``devicehandler_default.go``, ``device_resources.go``,
``device_cache.go`` ``filter``, ``allocator_gpu.go`` ``allocateByDeviceTopology``).

Only pods that ask for RDMA or FPGA, or carry a GPU hint (selector, ``requiredTopologyScope``,
``exclusivePolicy``), come here; a plain GPU pod keeps the vectorised path of the plugin. GPUs are
chosen by a callable the plugin passes in (the same choice as the plain path), so adding an RDMA
request never moves a pod's GPUs.

Steps for one node (``AutopilotAllocator.Allocate``):

1. per requested type, the per-device request and the number of devices (:func:`instance_request`):
   ``v > 100`` (whole devices) gives ``v/100`` devices of 100; ``ApplyForAll`` every device (matching the
   selector); ``RequestsAsCount`` ``v`` devices of 1 (100 with ``exclusivePolicy: DeviceLevel``);
   otherwise one device of ``v``;
2. a ``vfSelector`` on a node without VFs of that type fails ``Insufficient <type> VirtualFunctions``;
3. candidates: devices matching the hint's ``selector``; with ``exclusivePolicy: PCIeLevel`` only
   devices on PCIe roots whose devices of that type are all wholly free;
4. joint allocation (more than one type requested and a ``device-joint-allocate``): the primary type
   first, then each secondary type preferring the primary's PCIe roots (round-robin over them), and
   with ``requiredScope: SamePCIe`` at least one device per such root and the same set of roots, else
   ``node(s) Device Joint-Allocate rules violation``;
5. the other types on their own: devices sorted by score (the plugin's scoring strategy per device),
   then minor; take those whose free covers the request (and that still have a free VF matching the
   ``vfSelector``, lowest bus id first) until the count is met, else ``Insufficient <type> devices``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from app.framework.status import Status
from app.plugins.deviceshare import names as n
from app.plugins.deviceshare.allocation import GPUAllocation
from app.plugins.deviceshare.devices import DeviceInfo, VirtualFunction
from app.plugins.deviceshare.hints import (
    APPLY_FOR_ALL,
    EXCLUSIVE_DEVICE_LEVEL,
    EXCLUSIVE_PCIE_LEVEL,
    REQUESTS_AS_COUNT,
    SCOPE_SAME_PCIE,
    TOPOLOGY_SCOPE_LEVEL,
    DeviceHint,
    JointAllocate,
)

#: ``(request, total, free) -> score`` of one device (``scoreDevice``).
Scorer = Callable[[dict[str, int], dict[str, int], dict[str, int]], int]
#: The plugin's GPU choice for the node: GPU allocations, or raises :class:`Refused`.
GPUChooser = Callable[[], list[GPUAllocation]]

ERR_JOINT_VIOLATION = "node(s) Device Joint-Allocate rules violation"
ERR_INSUFFICIENT_PRIMARY = "node(s) Insufficient primary device"
ERR_MISSING_TOPOLOGY = "node(s) missing GPU Device Topology Tree"
ERR_MULTI_SHARED = "node(s) Unsupported Multi-Shared GPU"
ERR_INSUFFICIENT_TOPOLOGY_SCOPED = "Insufficient Topology Scoped GPU Devices"


class Refused(Exception):
    """The node cannot take the pod; ``status`` is the Filter answer (Unschedulable or Unresolvable)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


def insufficient(kind: str) -> str:
    """Upstream's reason when too few devices of ``kind`` fit: ``Insufficient rdma devices``."""
    return f"Insufficient {kind} devices"


@dataclass(slots=True)
class TypeState:
    """One device type on one node as the allocator sees it.

    Attributes:
        infos: minor -> device (every device of the type, healthy or not).
        free: minor -> free resources (total minus used, never negative; ``{}`` when unhealthy).
        vf_used: minor -> bus ids of VFs already given to pods.
    """

    infos: dict[int, DeviceInfo]
    free: dict[int, dict[str, int]]
    vf_used: dict[int, set[str]] = field(default_factory=dict)

    def total(self, minor: int) -> dict[str, int]:
        """Total of ``minor`` (``{}`` when unhealthy or unknown)."""
        info = self.infos.get(minor)
        return info.total() if info is not None else {}

    def pcie(self, minor: int) -> str | None:
        """PCIe root of ``minor`` (None without topology)."""
        info = self.infos.get(minor)
        return info.topology.pcie_id if info is not None and info.topology is not None else None


def _covers(request: dict[str, int], free: dict[str, int]) -> bool:
    """``quotav1.LessThanOrEqual(request, free)``."""
    return all(v <= free.get(k, 0) for k, v in request.items())


def instance_request(
    kind: str, value: int, hint: DeviceHint | None, state: TypeState | None
) -> tuple[dict[str, int], int]:
    """``DefaultDeviceHandler.CalcDesiredRequestsAndCount``: (per-device request, number of devices).

    Raises:
        Refused: UnschedulableAndUnresolvable ``Insufficient <kind> devices`` when the node has no device
            of the type, or ``ApplyForAll`` matches none.
    """
    resource = n.SECONDARY_RESOURCES[kind]
    if state is None or not state.infos:
        raise Refused(Status.unresolvable(insufficient(kind)))
    if value > 100 and value % 100 == 0:
        count = value // 100
        return {resource: value // count}, count
    if hint is not None and hint.allocate_strategy == APPLY_FOR_ALL:
        count = sum(1 for info in state.infos.values() if hint.selects(info.labels))
        if count == 0:
            raise Refused(Status.unresolvable(insufficient(kind)))
        return {resource: value}, count
    if hint is not None and hint.allocate_strategy == REQUESTS_AS_COUNT:
        return {resource: 100 if hint.exclusive_policy == EXCLUSIVE_DEVICE_LEVEL else 1}, value
    return {resource: value}, 1


def candidate_minors(state: TypeState, hint: DeviceHint | None) -> set[int]:
    """Minors the hint allows (``filterNodeDevice`` + ``nodeDevice.filter``): matching the ``selector``; with
    ``exclusivePolicy: PCIeLevel`` also on a PCIe root whose devices of the type are all wholly free (a
    device without topology is on no root and is excluded)."""
    minors = {m for m, info in state.infos.items() if hint is None or hint.selects(info.labels)}
    if hint is not None and hint.exclusive_policy == EXCLUSIVE_PCIE_LEVEL:
        by_root: dict[str, list[int]] = {}
        for m in state.infos:
            root = state.pcie(m)
            if root is not None:
                by_root.setdefault(root, []).append(m)
        whole = set()
        for members in by_root.values():
            if all(state.free.get(m, {}) == state.total(m) for m in members):
                whole.update(members)
        minors &= whole
    return minors


def _free_vf(state: TypeState, minor: int, hint: DeviceHint) -> VirtualFunction | None:
    """``allocateVF``: the unused VF with the lowest bus id among groups matching the ``vfSelector``."""
    info = state.infos.get(minor)
    if info is None:
        return None
    used = state.vf_used.get(minor, set())
    left = [vf for g in info.vf_groups if hint.selects_vfs(g.labels) for vf in g.vfs if vf.bus_id not in used]
    return min(left, key=lambda vf: vf.bus_id) if left else None


def _order(
    state: TypeState, request: dict[str, int], minors: Iterable[int], scorer: Scorer | None, preferred: set[str]
) -> list[int]:
    """``scoreDevices`` then ``sortDeviceResourcesByPreferredPCIe``: by score desc, minor asc; devices on a
    preferred PCIe root first, one per root per round."""
    scored = sorted(
        ((scorer(request, state.total(m), state.free[m]) if scorer else 0, m) for m in minors if m in state.free),
        key=lambda sm: (-sm[0], sm[1]),
    )
    if not preferred:
        return [m for _, m in scored]
    groups: dict[str, list[tuple[int, int]]] = {}
    rest: list[int] = []
    for sm in scored:
        root = state.pcie(sm[1])
        if root is not None and root in preferred:
            groups.setdefault(root, []).append(sm)
        else:
            rest.append(sm[1])
    out: list[int] = []
    depth = max((len(g) for g in groups.values()), default=0)
    for i in range(depth):
        layer = sorted((g[i] for g in groups.values() if i < len(g)), key=lambda sm: (-sm[0], sm[1]))
        out.extend(m for _, m in layer)
    return out + rest


def allocate_type(
    kind: str,
    request: dict[str, int],
    desired: int,
    state: TypeState,
    hint: DeviceHint | None,
    scorer: Scorer | None,
    preferred_pcies: set[str] | None = None,
) -> list[GPUAllocation]:
    """``allocateDevices`` + ``defaultAllocateDevices`` for one non-GPU type (ids filled from the devices).

    Raises:
        Refused: Unschedulable ``Insufficient <kind> devices`` when fewer than ``desired`` devices fit.
    """
    preferred = preferred_pcies or set()
    most = max(desired, len(preferred), 1)
    desired = max(desired, 1)
    out: list[GPUAllocation] = []
    for minor in _order(state, request, candidate_minors(state, hint), scorer, preferred):
        free = state.free.get(minor, {})
        if not any(free.values()) or not _covers(request, free):
            continue
        vfs: tuple[VirtualFunction, ...] = ()
        if hint is not None and hint.must_allocate_vf:
            vf = _free_vf(state, minor, hint)
            if vf is None:
                continue
            vfs = (vf,)
        out.append(GPUAllocation(minor, dict(request), state.infos[minor].id, vfs))
        if len(out) == most:
            break
    if len(out) < desired:
        raise Refused(Status.unschedulable(insufficient(kind)))
    return out


def pcies_of(state: TypeState | None, allocs: list[GPUAllocation]) -> set[str]:
    """``newPreferredPCIes``: PCIe roots of the allocated devices that report topology."""
    if state is None:
        return set()
    roots = (state.pcie(a.minor) for a in allocs)
    return {r for r in roots if r is not None}


def check_vfs(requested: Iterable[str], hints: dict[str, DeviceHint], states: dict[str, TypeState]) -> None:
    """``Prepare``: a type asked with a ``vfSelector`` needs a device of that type with VF groups.

    Raises:
        Refused: UnschedulableAndUnresolvable ``Insufficient <type> VirtualFunctions``.
    """
    for kind in requested:
        hint = hints.get(kind)
        if hint is None or not hint.must_allocate_vf:
            continue
        state = states.get(kind)
        if state is None or not any(info.vf_groups for info in state.infos.values()):
            raise Refused(Status.unresolvable(f"Insufficient {kind} VirtualFunctions"))


def allocate_node(
    secondary: dict[str, tuple[dict[str, int], int]],
    gpu: GPUChooser | None,
    states: dict[str, TypeState],
    hints: dict[str, DeviceHint],
    joint: JointAllocate | None,
    scorer: Scorer | None,
) -> dict[str, list[GPUAllocation]]:
    """Allocate every requested type on one node (steps 4-5 of the module docstring).

    Args:
        secondary: type -> (per-device request, count) for rdma/fpga, from :func:`instance_request`.
        gpu: the GPU choice when the pod asks for GPUs (None otherwise).
        states: the node's devices by type.
        hints: the pod's hints by type; joint: its joint-allocate request (None when absent).
        scorer: per-device score for ordering (None: minor order).

    Returns:
        type -> allocations (types with none left out).

    Raises:
        Refused: the node cannot take the pod (reason as upstream's).
    """
    requested = ([n.GPU] if gpu is not None else []) + sorted(secondary)
    result: dict[str, list[GPUAllocation]] = {}

    def one(kind: str, desired: int | None = None, preferred: set[str] | None = None) -> list[GPUAllocation]:
        if kind == n.GPU:
            assert gpu is not None
            return gpu()  # the GPU allocator ignores preferred roots, as upstream's
        request, count = secondary[kind]
        return allocate_type(
            kind, request, count if desired is None else desired, states[kind], hints.get(kind), scorer, preferred
        )

    if len(requested) > 1 and joint is not None:
        types = [
            t
            for t in joint.device_types
            if t in requested and (hints.get(t) is None or hints[t].allocate_strategy != APPLY_FOR_ALL)
        ]
        if types:
            primary = one(types[0])
            if not primary:
                raise Refused(Status.unschedulable(ERR_INSUFFICIENT_PRIMARY))
            result[types[0]] = primary
            roots = pcies_of(states.get(types[0]), primary)
            for kind in types[1:]:
                desired = secondary[kind][1] if kind != n.GPU else None
                if desired is not None and joint.required_scope == SCOPE_SAME_PCIE and desired < len(roots):
                    desired = len(roots)
                result[kind] = one(kind, desired, roots)
            if joint.required_scope == SCOPE_SAME_PCIE and len(types) > 1:
                for kind in types[1:]:
                    if pcies_of(states.get(kind), result[kind]) != roots:
                        raise Refused(Status.unschedulable(ERR_JOINT_VIOLATION))
    for kind in requested:
        if kind not in result:
            result[kind] = one(kind)
    return {k: v for k, v in result.items() if v}


# ---------------------------------------------------------------------- GPU topology scopes
@dataclass(slots=True)
class _Scope:
    level: int
    minors: list[int]
    children: list[_Scope]


def _scope_tree(state: TypeState) -> _Scope | None:
    """``GetGPUTopologyScope``: Node -> NUMA nodes (by id) -> PCIe roots (by id); None when a GPU has no
    topology."""
    numa: dict[int, dict[str, list[int]]] = {}
    for minor in sorted(state.infos):
        topo = state.infos[minor].topology
        if topo is None:
            return None
        numa.setdefault(topo.node_id, {}).setdefault(topo.pcie_id, []).append(minor)
    children = []
    for node_id in sorted(numa):
        roots = numa[node_id]
        pcie = [_Scope(TOPOLOGY_SCOPE_LEVEL["PCIe"], roots[r], []) for r in sorted(roots)]
        children.append(_Scope(TOPOLOGY_SCOPE_LEVEL["NUMANode"], sorted(m for r in roots.values() for m in r), pcie))
    return _Scope(TOPOLOGY_SCOPE_LEVEL["Node"], sorted(state.infos), children)


@dataclass(slots=True)
class _Found:
    minors: list[int]
    not_empties: int
    depth: int
    score: int


def _from_scope(
    scope: _Scope,
    count: int,
    shared: bool,
    level: int,
    fits: dict[int, tuple[bool, int]],
    used: set[int],
    not_empties: int,
    depth: int,
) -> _Found | None:
    """``allocateFromScope``: the deepest child scope that fits, the most used one among equals (bin
    packing; for a share also the best device score), else this scope if the required level allows."""
    if len(scope.minors) < count:
        return None
    depth += 1
    if used.intersection(scope.minors):
        not_empties += 1
    best: _Found | None = None
    for child in scope.children:
        if len(child.minors) < count:
            continue
        found = _from_scope(child, count, shared, level, fits, used, not_empties, depth)
        if found is None or not found.minors:
            continue
        if best is None:
            best = found
            continue
        if best.depth < found.depth or (best.depth == found.depth and best.not_empties < found.not_empties):
            best = found
        if shared and best.depth == found.depth and best.not_empties == found.not_empties and best.score < found.score:
            best = found
    if best is not None:
        return best
    if level > scope.level:
        return None
    chosen: list[int] = []
    best_minor, best_score = -1, -1
    for minor in scope.minors:
        ok, score = fits[minor]
        if not ok:
            continue
        if not shared:
            chosen.append(minor)
            if len(chosen) == count:
                break
            continue
        if score > best_score:
            best_minor, best_score = minor, score
    if shared:
        return _Found([best_minor], not_empties, depth, best_score) if best_minor >= 0 else None
    return _Found(chosen, not_empties, depth, best_score) if len(chosen) == count else None


def gpu_by_topology(
    state: TypeState,
    per_gpu: dict[str, int],
    count: int,
    shared: bool,
    scope: str,
    allowed: set[int],
    scorer: Scorer | None,
) -> list[int]:
    """``allocateByDeviceTopology`` with a required ``requiredTopologyScope`` (``PCIe``, ``NUMANode``, ``Node``):
    the GPUs (minors) to give, all under one scope of that level or finer.

    ``allowed``: the minors the hint's selector and exclusive policy leave. A share's device score is
    upstream's ``scoreDevice(request, free, total)`` (its argument order kept).

    Raises:
        Refused: UnschedulableAndUnresolvable ``node(s) missing GPU Device Topology Tree`` (a GPU without
            topology) or ``node(s) Unsupported Multi-Shared GPU``; Unschedulable
            ``Insufficient Topology Scoped GPU Devices``.
    """
    tree = _scope_tree(state)
    if tree is None:
        raise Refused(Status.unresolvable(ERR_MISSING_TOPOLOGY))
    if shared and count > 1:
        raise Refused(Status.unresolvable(ERR_MULTI_SHARED))
    fits: dict[int, tuple[bool, int]] = {}
    for minor in tree.minors:
        free, total = state.free.get(minor, {}), state.total(minor)
        ok = minor in allowed and bool(total) and _covers(per_gpu, free)
        score = scorer(per_gpu, free, total) if ok and shared and scorer is not None else 0
        fits[minor] = (ok, score)
    used = {m for m in tree.minors if state.free.get(m, {}) != state.total(m)}
    found = _from_scope(tree, count, shared, TOPOLOGY_SCOPE_LEVEL.get(scope, 0), fits, used, 0, 0)
    if found is None:
        raise Refused(Status.unschedulable(ERR_INSUFFICIENT_TOPOLOGY_SCOPED))
    return found.minors
