"""The allocation-ratio curve as the ATC'23 authors compute it from their per-pod log.

After every arriving pod the authors' simulator logs the arrived and the allocated GPU milli; their
``experiments/analysis/merge_alloc_discrete.py`` then gives, for each whole percent X of arrived
workload, the mean allocation ratio over the pods whose arrived ratio rounds to X (Python's
``round``: half to even), or over those within X-1..X+1 when none does. The published figures are
these means, so the simulator reports the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def allocation_curve(arrived_milli: Sequence[int], allocated_milli: Sequence[int], capacity_milli: int) -> list[float]:
    """Allocation ratio (percent of capacity) at each whole arrived percent 0, 1, ... up to the last reached.

    Args:
        arrived_milli: GPU milli requested by the pods arrived so far, after each arrival (non-decreasing).
        allocated_milli: GPU milli allocated after the same arrival.
        capacity_milli: the cluster's GPU milli (> 0).

    Returns:
        ``curve[X]`` is the mean of ``allocated / capacity * 100`` over the arrivals whose
        ``round(arrived / capacity * 100)`` is X (X-1..X+1 when there is none; the previous value
        when there is none either, 0.0 before any arrival). Empty when nothing arrived.

    Raises:
        ValueError: the two sequences differ in length, or ``capacity_milli`` is not positive.
    """
    if len(arrived_milli) != len(allocated_milli):
        raise ValueError(f"{len(arrived_milli)} arrived samples but {len(allocated_milli)} allocated samples")
    if capacity_milli <= 0:
        raise ValueError(f"capacity must be positive, got {capacity_milli}")
    if len(arrived_milli) == 0:
        return []
    scale = 100.0 / capacity_milli
    arrive = np.round(np.asarray(arrived_milli, dtype=np.float64) * scale)  # numpy rounds half to even, as round()
    alloc = np.asarray(allocated_milli, dtype=np.float64) * scale
    curve: list[float] = []
    for x in range(int(arrive.max()) + 1):
        hit = arrive == x
        if not hit.any():
            hit = (arrive >= x - 1) & (arrive <= x + 1)
        curve.append(float(alloc[hit].mean()) if hit.any() else (curve[-1] if curve else 0.0))
    return curve
