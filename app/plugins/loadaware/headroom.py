"""How much estimated usage a node still takes under a usage threshold (LoadAware Filter's test, inverted).

Upstream's Filter (``pkg/scheduler/plugins/loadaware/load_aware.go``, ``filterNodeUsage``) computes, per
resource, ``usage := int64(math.Round(float64(estimated) / float64(total) * 100))`` with ``estimated`` the
node's base usage plus the pod's estimate, and refuses the node when ``usage > threshold``. That test is
monotone in the pod's estimate, so for a node whose base usage, allocatable and threshold are known it has
one cut-off: :func:`largest_fitting_estimate`, the largest estimate that still passes. The plugin works it
out when a node's row is written, and Filter is then one comparison per resource: the pod fails where its
estimate is above the cut-off, exactly where upstream's float test fails.
"""

from __future__ import annotations

import functools
import math

#: The cut-off of a resource that is not checked (threshold 0, or no allocatable): no estimate exceeds it.
UNLIMITED = 2**63 - 1
_LOWEST = -(2**63)


def usage_percent(used: int, allocatable: int) -> int:
    """Upstream's ``int64(math.Round(float64(used) / float64(allocatable) * 100))`` for ``allocatable != 0``.

    The division and product are IEEE float64 in the same order as Go's, and the rounding is Go's
    ``math.Round`` (half away from zero), so the result is the integer percent upstream compares.
    """
    p = float(used) / float(allocatable) * 100.0
    whole = math.trunc(p)
    frac = p - whole
    if frac >= 0.5:
        return whole + 1
    if frac <= -0.5:
        return whole - 1
    return whole


def largest_fitting_estimate(base: int, allocatable: int, threshold: int) -> int:
    """The largest pod estimate ``e`` (same unit as ``base``: milli-cores, bytes, ...) for which
    ``usage_percent(base + e, allocatable) <= threshold``, i.e. upstream's Filter passes the resource.

    The test is on the total ``base + e`` only, so the answer is :func:`last_fitting_total` (worked out once
    per allocatable and threshold, the same for every node of a kind) less ``base``.

    Args:
        base: the node's usage the pod's estimate is added to (NodeMetric usage plus assigned pods'
            estimates), in the resource's unit.
        allocatable: the node's allocatable of the resource, same unit.
        threshold: the usage threshold in percent; 0 means the resource is not checked.

    Returns:
        The cut-off, clamped to int64; :data:`UNLIMITED` when the resource is not checked (threshold
        0 or allocatable <= 0, which upstream never refuses for a non-negative estimate). A negative
        cut-off means even a zero estimate fails.
    """
    if threshold == 0 or allocatable <= 0:
        return UNLIMITED
    return max(_LOWEST, min(UNLIMITED, last_fitting_total(allocatable, threshold) - base))


@functools.lru_cache(maxsize=4096)
def last_fitting_total(allocatable: int, threshold: int) -> int:
    """The largest total usage ``u`` (the resource's unit) with ``usage_percent(u, allocatable) <= threshold``,
    for ``allocatable > 0`` (kept for the last 4,096 pairs: nodes of one kind share them).

    Raises:
        ZeroDivisionError: ``allocatable`` is 0 (callers check it first).
    """
    # The real-number boundary is used * 100 / allocatable < threshold + 0.5; float rounding moves it by
    # a unit or two at most, so the guess is nearly always the last fitting total (two evaluations).
    guess = (2 * threshold + 1) * allocatable // 200
    if usage_percent(guess, allocatable) <= threshold < usage_percent(guess + 1, allocatable):
        return guess

    def fits(used: int) -> bool:
        return usage_percent(used, allocatable) <= threshold

    # Otherwise bracket the last fitting total around the guess, then bisect (the test is monotone, and
    # bounded both ways: usage_percent grows with the total without limit).
    step = 1
    if fits(guess):
        low = guess
        while fits(low + step):
            low += step
            step *= 2
        high = low + step
    else:
        high = guess
        while not fits(high - step):
            high -= step
            step *= 2
        low = high - step
    while high - low > 1:  # low fits, high does not
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low
