"""Resource allocation scorers (upstream ``scoring.go``, ``least_allocated.go``, ``most_allocated.go``).

``score(requested, allocatable, pod)``: per weighted resource with a nonzero allocatable,
LeastAllocated ``(allocatable - requested - pod) * 100 / allocatable`` (0 when over),
MostAllocated ``(requested + pod) * 100 / allocatable`` (capped at allocatable), then the
weighted mean (integer division, as upstream).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from app.plugins.nodenumaresource.args import MOST_ALLOCATED, ScoringStrategy

MAX_NODE_SCORE = 100


class Scorer:
    """One scoring strategy with its weights (``resourceAllocationScorer``)."""

    def __init__(self, strategy: ScoringStrategy) -> None:
        self.most = strategy.type == MOST_ALLOCATED
        self.weights = dict(strategy.weights)

    def _one(self, requested: int, capacity: int) -> int:
        if capacity == 0:
            return 0
        if self.most:
            requested = min(requested, capacity)
            return requested * MAX_NODE_SCORE // capacity
        if requested > capacity:
            return 0
        return (capacity - requested) * MAX_NODE_SCORE // capacity

    def score(self, requested: Mapping[str, int], allocatable: Mapping[str, int], pod: Mapping[str, int]) -> int:
        """0..100 for one node (or NUMA hint): ``requested`` already taken, ``pod`` the pod's requests."""
        total = weight_sum = 0
        for res, weight in self.weights.items():
            alloc = allocatable.get(res, 0)
            if alloc == 0:
                continue
            total += self._one(requested.get(res, 0) + pod.get(res, 0), alloc) * weight
            weight_sum += weight
        return total // weight_sum if weight_sum else 0

    def score_rows(
        self,
        requested: Mapping[str, npt.NDArray[np.int64]],
        allocatable: Mapping[str, npt.NDArray[np.int64]],
        pod: Mapping[str, int],
        count: int,
    ) -> npt.NDArray[np.int64]:
        """:meth:`score` for ``count`` nodes at once (arrays per resource)."""
        total = np.zeros(count, dtype=np.int64)
        weights = np.zeros(count, dtype=np.int64)
        for res, weight in self.weights.items():
            alloc = allocatable.get(res)
            if alloc is None:
                continue
            req = requested[res] + pod.get(res, 0)
            has = alloc > 0
            safe = np.where(has, alloc, 1)
            if self.most:
                one = np.minimum(req, safe) * MAX_NODE_SCORE // safe
            else:
                one = np.where(req > safe, 0, (safe - req) * MAX_NODE_SCORE // safe)
            total += np.where(has, one * weight, 0)
            weights += np.where(has, weight, 0)
        return np.where(weights > 0, total // np.maximum(weights, 1), 0)
