"""Runtime quota of the children of one parent: upstream's fair-share water-filling.

Follows ``pkg/scheduler/plugins/elasticquota/core/runtime_quota_calculator.go`` (``redistribution``,
``iterationForRedistribution``, ``computeHamiltonDeltas``) and
``core/scale_minquota_when_over_root_res.go`` (min auto-scaling), per resource dimension:

1. a child whose (max-capped) request exceeds its min gets runtime = min and is "hungry"; any
   other child gets its request if it lends, else its min; ``remaining = total - sum(runtime)``;
2. while ``remaining > 0`` and hungry children have weight: split ``remaining`` by shared weight
   with the largest-remainder method (``floor(w*R/W)`` each, the leftover units one by one to the
   largest ``(w*R) mod W``, ties by quota name), clip each child at its request, pool the excess
   and repeat over the children still below their request.

Values are Python ints (exact: upstream uses 128-bit products for ``w*R``). When the sum of the
children's original min exceeds the total in a dimension (and scaling is enabled), every child's
min there becomes ``int(float(total) * float(min) / float(sum_min))`` (0 when total <= 0).
Unlike upstream, which rescales lazily only the quota being refreshed, all children of the parent
are rescaled together, so the result does not depend on refresh order.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.plugins.elasticquota.resourcelist import ResourceList


@dataclass(slots=True)
class ChildQuota:
    """One child as its parent's calculator sees it.

    Attributes:
        request: the child's request capped at its max (internal units per resource).
        min: the child's original ``spec.min``.
        weight: shared weight (``shared-weight`` annotation, defaulting to max).
        lend: ``allow-lent-resource`` (a non-lending child keeps its min even when idle).
    """

    request: ResourceList
    min: ResourceList
    weight: ResourceList
    lend: bool


def hamilton_deltas(total: int, weight_sum: int, items: list[tuple[int, str]]) -> list[int]:
    """Split ``total`` among ``items`` ((weight, name) pairs) proportionally to weight, exactly.

    Each gets ``floor(w*total/weight_sum)``; the leftover units go one each to the items with the
    largest ``(w*total) mod weight_sum``, ties broken by name ascending. Zero weights get 0.
    """
    deltas = [0] * len(items)
    if weight_sum <= 0 or total <= 0 or not items:
        return deltas
    remainders: list[tuple[int, str, int]] = []
    distributed = 0
    for j, (w, name) in enumerate(items):
        if w <= 0:
            continue
        q, r = divmod(w * total, weight_sum)
        deltas[j] = q
        distributed += q
        remainders.append((-r, name, j))
    residual = total - distributed
    if residual > 0 and remainders:
        remainders.sort()
        for _, _, j in remainders[:residual]:
            deltas[j] += 1
    return deltas


def water_fill(
    total: int, names: list[str], requests: list[int], floors: list[int], weights: list[int], lends: list[bool]
) -> list[int]:
    """Runtime of each child in one dimension (upstream ``quotaTree.redistribution``).

    All lists are parallel; ``floors`` are the (possibly auto-scaled) mins.
    """
    n = len(names)
    runtime = [0] * n
    hungry: list[int] = []
    weight_sum = 0
    remaining = total
    for i in range(n):
        floor = floors[i]
        if requests[i] > floor:
            runtime[i] = floor
            hungry.append(i)
            weight_sum += weights[i]
        else:
            runtime[i] = requests[i] if lends[i] else floor
        remaining -= runtime[i]
    while remaining > 0 and weight_sum > 0 and hungry:
        deltas = hamilton_deltas(remaining, weight_sum, [(weights[i], names[i]) for i in hungry])
        still: list[int] = []
        pooled = 0
        still_weight = 0
        for i, delta in zip(hungry, deltas, strict=True):
            runtime[i] += delta
            if runtime[i] < requests[i]:
                still.append(i)
                still_weight += weights[i]
            else:
                pooled += runtime[i] - requests[i]
                runtime[i] = requests[i]
        remaining, weight_sum, hungry = pooled, still_weight, still
    return runtime


def scaled_mins(total: ResourceList, children: dict[str, ChildQuota]) -> dict[str, ResourceList]:
    """Each child's effective min under ``total`` (upstream ``getScaledMinQuota``, every child scalable).

    Dimensions of ``total`` where the children's min sum exceeds it are scaled; others keep the
    original min.
    """
    sums: ResourceList = {}
    for child in children.values():
        for k, v in child.min.items():
            sums[k] = sums.get(k, 0) + v
    over = [k for k, t in total.items() if t < sums.get(k, 0)]
    if not over:
        return {name: child.min for name, child in children.items()}
    out: dict[str, ResourceList] = {}
    for name, child in children.items():
        scaled = dict(child.min)
        for k in over:
            t, s = total[k], sums[k]
            scaled[k] = 0 if t <= 0 or s <= 0 else int(float(t) * float(child.min.get(k, 0)) / float(s))
        out[name] = scaled
    return out


class RuntimeCalculator:
    """The runtime of every child of one parent, recomputed only when an input changed.

    Args:
        name: the parent quota's name (upstream's ``treeName``).
    """

    __slots__ = ("_dirty", "_total", "auto_min", "children", "keys", "name", "runtime", "version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.children: dict[str, ChildQuota] = {}
        self.keys: tuple[str, ...] = ()
        self._dirty = True
        self._total: ResourceList | None = None
        self.runtime: dict[str, ResourceList] = {}
        self.auto_min: dict[str, ResourceList] = {}
        self.version = 0

    def set_keys(self, keys: set[str]) -> None:
        """Resource dimensions this parent distributes (root: every quota's max keys; else its own max keys)."""
        ordered = tuple(sorted(keys))
        if ordered != self.keys:
            self.keys = ordered
            self._dirty = True

    def set_child(self, name: str, child: ChildQuota) -> None:
        """Insert or replace child ``name``."""
        self.children[name] = child
        self._dirty = True

    def set_request(self, name: str, request: ResourceList) -> None:
        """Update the capped request of child ``name`` (no-op for unknown children or equal values)."""
        child = self.children.get(name)
        if child is not None and child.request != request:
            child.request = request
            self._dirty = True

    def compute(self, total: ResourceList, scale_min: bool) -> dict[str, ResourceList]:
        """Runtime of every child under ``total`` (cached until an input or ``total`` changes).

        Returns child name -> {resource: runtime} over :attr:`keys`.
        """
        if not self._dirty and self._total == total:
            return self.runtime
        names = sorted(self.children)
        kids = [self.children[n] for n in names]
        mins = scaled_mins(total, self.children) if scale_min else {n: c.min for n, c in self.children.items()}
        runtime: dict[str, ResourceList] = {n: {} for n in names}
        lends = [c.lend for c in kids]
        for key in self.keys:
            values = water_fill(
                total.get(key, 0),
                names,
                [c.request.get(key, 0) for c in kids],
                [mins[n].get(key, 0) for n in names],
                [c.weight.get(key, 0) for c in kids],
                lends,
            )
            for n, v in zip(names, values, strict=True):
                runtime[n][key] = v
        self.runtime = runtime
        self.auto_min = mins
        self._total = dict(total)
        self._dirty = False
        self.version += 1
        return runtime
