"""The agent's in-memory metric cache: one bounded numpy ring buffer per series.

Upstream keeps samples in a TSDB (``pkg/koordlet/metriccache``); here every series is a fixed
capacity ring of ``(timestamp, value)`` so memory stays bounded whatever the uptime.
Aggregations follow ``metriccache/util.go``: ``avg`` is the mean; ``pNN`` is the sorted value
at index ``int(float32(n) * p) - 1`` (floored at 0), as upstream's ``fieldPercentileOfMetricList``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Aggregation types as NodeMetric spells them (``apis/extension`` AggregationType).
AGGREGATIONS: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}


@dataclass(slots=True)
class Aggregate:
    """A value over a window, the number of samples and their time span (last - first, seconds)."""

    value: float
    count: int
    span: float


class Series:
    """A ring buffer of at most ``capacity`` samples (timestamps in epoch seconds)."""

    __slots__ = ("_head", "_n", "_ts", "_val")

    def __init__(self, capacity: int) -> None:
        self._ts = np.zeros(max(capacity, 2), dtype=np.float64)
        self._val = np.zeros(max(capacity, 2), dtype=np.float64)
        self._head = 0
        self._n = 0

    def append(self, ts: float, value: float) -> None:
        """Add one sample, overwriting the oldest when full."""
        self._ts[self._head] = ts
        self._val[self._head] = value
        self._head = (self._head + 1) % len(self._ts)
        self._n = min(self._n + 1, len(self._ts))

    def last(self) -> tuple[float, float] | None:
        """``(ts, value)`` of the newest sample, None when empty."""
        if self._n == 0:
            return None
        i = (self._head - 1) % len(self._ts)
        return float(self._ts[i]), float(self._val[i])

    def window(self, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
        """Timestamps and values of samples with ``start <= ts <= end``."""
        if self._n == 0:
            empty = np.empty(0)
            return empty, empty
        ts, val = self._ts[: self._n], self._val[: self._n]
        mask = (ts >= start) & (ts <= end)
        return ts[mask], val[mask]


def percentile(values: np.ndarray, p: float) -> float:
    """Upstream's percentile: ``sorted[int(float32(n) * float32(p)) - 1]`` with the index floored at 0."""
    n = len(values)
    idx = max(int(np.float32(n) * np.float32(p)) - 1, 0)
    return float(np.partition(values, idx)[idx])


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
        ts, val = series.window(start, end)
        if len(val) == 0:
            return None
        span = float(ts.max() - ts.min())
        if how == "avg":
            value = float(val.mean())
        elif how == "last":
            value = float(val[int(np.argmax(ts))])
        elif how in AGGREGATIONS:
            value = percentile(val, AGGREGATIONS[how])
        else:
            raise ValueError(f"unknown aggregation {how!r}")
        return Aggregate(value=value, count=len(val), span=span)

    def keys(self, prefix: str = "") -> list[str]:
        """Series keys starting with ``prefix``."""
        return [k for k in self._series if k.startswith(prefix)]

    def drop(self, key: str) -> None:
        """Forget a series (a pod went away)."""
        self._series.pop(key, None)

    def __len__(self) -> int:
        return len(self._series)
