"""The agent's in-memory metric cache: one bounded ring buffer per series.

Upstream keeps samples in a TSDB (``pkg/koordlet/metriccache``); here every series is a fixed
capacity ring of ``(timestamp, value)`` (two ``array('d')``, 16 bytes a sample) so memory stays
bounded whatever the uptime. Aggregations follow ``metriccache/util.go``: ``avg`` is the mean; ``pNN``
is the sorted value at index ``int(float32(n) * p) - 1`` (floored at 0), as upstream's
``fieldPercentileOfMetricList``. No numpy: it would double the agent's resident memory for sums and
sorts over at most a few thousand samples.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

#: Aggregation types as NodeMetric spells them (``apis/extension`` AggregationType).
AGGREGATIONS: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}

_F32 = struct.Struct("f")


def _float32(x: float) -> float:
    """``x`` rounded to the nearest float32 (as Go's ``float32(x)``)."""
    return float(_F32.unpack(_F32.pack(x))[0])


@dataclass(slots=True)
class Aggregate:
    """A value over a window, the number of samples and their time span (last - first, seconds)."""

    value: float
    count: int
    span: float


class Series:
    """A ring buffer of at most ``capacity`` samples (timestamps in epoch seconds)."""

    __slots__ = ("_head", "_n", "_ts", "_unordered", "_val")

    def __init__(self, capacity: int) -> None:
        cap = max(capacity, 2)
        self._ts = array("d", bytes(8 * cap))
        self._val = array("d", bytes(8 * cap))
        self._head = 0
        self._n = 0
        self._unordered = 0  # appends left until no out-of-order timestamp remains in the ring

    def append(self, ts: float, value: float) -> None:
        """Add one sample, overwriting the oldest when full."""
        cap = len(self._ts)
        if self._n and ts < self._ts[(self._head - 1) % cap]:
            self._unordered = cap
        elif self._unordered:
            self._unordered -= 1
        self._ts[self._head] = ts
        self._val[self._head] = value
        self._head = (self._head + 1) % cap
        if self._n < cap:
            self._n += 1

    def last(self) -> tuple[float, float] | None:
        """``(ts, value)`` of the newest sample, None when empty."""
        if self._n == 0:
            return None
        i = (self._head - 1) % len(self._ts)
        return self._ts[i], self._val[i]

    def window(self, start: float, end: float) -> tuple[Sequence[float], Sequence[float]]:
        """Timestamps and values of samples with ``start <= ts <= end``, oldest first."""
        if self._n == 0:
            return (), ()
        if self._n < len(self._ts):
            ts, val = self._ts[: self._n], self._val[: self._n]
        else:
            h = self._head
            ts, val = self._ts[h:] + self._ts[:h], self._val[h:] + self._val[:h]
        if self._unordered:
            keep = [i for i, t in enumerate(ts) if start <= t <= end]
            return [ts[i] for i in keep], [val[i] for i in keep]
        lo, hi = bisect_left(ts, start), bisect_right(ts, end)
        return ts[lo:hi], val[lo:hi]


def percentile(values: Sequence[float], p: float) -> float:
    """Upstream's percentile: ``sorted[int(float32(n) * float32(p)) - 1]`` with the index floored at 0."""
    n = len(values)
    idx = max(int(_float32(_float32(float(n)) * _float32(p))) - 1, 0)
    return float(sorted(values)[idx])


class MetricCache:
    """Series by key with bounded retention.

    Args:
        interval: collection interval, seconds (sizes the rings).
        retention: seconds of history kept per series (the longest aggregation window plus slack).
    """

    def __init__(self, interval: float, retention: float) -> None:
        self.interval = interval
        self.retention = retention
        self._series: dict[str, Series] = {}
        self._capacity = int(retention / max(interval, 0.01)) + 4

    def append(self, key: str, ts: float, value: float, *, retention: float | None = None) -> None:
        """Add a sample to ``key``; a new series gets ``retention`` seconds of room (default: the cache's)."""
        series = self._series.get(key)
        if series is None:
            cap = self._capacity if retention is None else int(retention / max(self.interval, 0.01)) + 4
            series = self._series[key] = Series(cap)
        series.append(ts, value)

    def last(self, key: str, now: float, max_age: float) -> float | None:
        """The newest value of ``key`` if it is at most ``max_age`` seconds old, else None."""
        series = self._series.get(key)
        found = series.last() if series is not None else None
        if found is None or now - found[0] > max_age:
            return None
        return found[1]

    def aggregate(self, key: str, start: float, end: float, how: str = "avg") -> Aggregate | None:
        """``avg``, ``p50``/``p90``/``p95``/``p99`` or ``last`` of ``key`` over ``[start, end]``; None without samples.

        Raises:
            ValueError: unknown aggregation.
        """
        series = self._series.get(key)
        if series is None:
            return None
        if how != "avg" and how != "last" and how not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {how!r}")
        ts, val = series.window(start, end)
        if len(val) == 0:
            return None
        span = float(max(ts) - min(ts))
        if how == "avg":
            value = sum(val) / len(val)
        elif how == "last":
            value = float(val[max(range(len(ts)), key=ts.__getitem__)])
        else:
            value = percentile(val, AGGREGATIONS[how])
        return Aggregate(value=value, count=len(val), span=span)

    def aggregates(self, key: str, start: float, end: float, hows: Sequence[str]) -> dict[str, Aggregate]:
        """Several aggregations of ``key`` over ``[start, end]`` from one pass over the window (a sort at most);
        empty without samples.

        Raises:
            ValueError: unknown aggregation.
        """
        for how in hows:
            if how != "avg" and how != "last" and how not in AGGREGATIONS:
                raise ValueError(f"unknown aggregation {how!r}")
        series = self._series.get(key)
        if series is None:
            return {}
        ts, val = series.window(start, end)
        n = len(val)
        if n == 0:
            return {}
        span = float(max(ts) - min(ts))
        ordered: list[float] | None = None
        out: dict[str, Aggregate] = {}
        for how in hows:
            if how == "avg":
                value = sum(val) / n
            elif how == "last":
                value = float(val[max(range(n), key=ts.__getitem__)])
            else:
                if ordered is None:
                    ordered = sorted(val)
                idx = max(int(_float32(_float32(float(n)) * _float32(AGGREGATIONS[how]))) - 1, 0)
                value = float(ordered[idx])
            out[how] = Aggregate(value=value, count=n, span=span)
        return out

    def keys(self, prefix: str = "") -> list[str]:
        """Series keys starting with ``prefix``."""
        return [k for k in self._series if k.startswith(prefix)]

    def drop(self, key: str) -> None:
        """Forget a series (a pod went away)."""
        self._series.pop(key, None)

    def __len__(self) -> int:
        return len(self._series)
