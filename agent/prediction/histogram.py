"""Decaying histograms of usage: exponential buckets, half-life weights, percentiles, checkpoints.

Follows upstream ``pkg/util/histogram`` (``histogram_options.go``, ``histogram.go``,
``decaying_histogram.go``, ``histogram_checkpoint.go``), itself the Vertical Pod Autoscaler's:

- :class:`ExponentialBuckets`: bucket 0 is ``[0, first)``; bucket ``n >= 1`` starts at
  ``first * (ratio**n - 1) / (ratio - 1)``; ``num = ceil(log_ratio(max * (ratio - 1) / first + 1)) + 1``.
  A value past the last start falls into the last bucket.
- :class:`DecayingHistogram`: a sample added at time ``t`` weighs ``weight * 2 ** ((t - ref) / halfLife)``,
  so it loses half its importance every half-life. ``ref`` is an integer multiple of the half-life and is
  moved forward (every weight scaled by ``2 ** -k``) once ``t`` is more than 100 half-lives past it.
- :meth:`DecayingHistogram.percentile`: walking the buckets from the first non-empty one, the first whose
  cumulative weight reaches ``p * total``; the answer is that bucket's **end** (the start of the next one), or
  the start of the last bucket. A bucket counts as empty below ``epsilon``; an empty histogram answers 0.
- Checkpoints (:meth:`DecayingHistogram.save`):
  ``{"totalWeight", "bucketWeights": {index: weight}, "referenceTimestamp"}`` with the weights scaled so
  the heaviest bucket is 10000 (``MaxCheckpointWeight``) and rounded; zeros dropped.
  :meth:`DecayingHistogram.load` adds them back scaled to ``totalWeight``.

Upstream's predictor histograms (``predict_server.go``): cpu in cores from 0.025 to 1024 with 5 % growth
(:func:`cpu_histogram`), memory in bytes from 5 MiB to 2 TiB with 5 % growth (:func:`memory_histogram`), epsilon
``0.001 * 0.1``.

Raises:
    HistogramError: invalid options, a negative weight, or a malformed checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: ``MaxCheckpointWeight``: the heaviest bucket of a checkpoint.
MAX_CHECKPOINT_WEIGHT = 10000
#: ``maxDecayExponent``: half-lives past the reference time before it is moved.
MAX_DECAY_EXPONENT = 100
#: ``MinSampleWeight`` and ``epsilon = 0.001 * MinSampleWeight`` (``predict_server.go``).
MIN_SAMPLE_WEIGHT = 0.1
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
#: ``DefaultHistogramBucketSizeGrowth``.
BUCKET_GROWTH = 0.05


class HistogramError(ValueError):
    """Invalid histogram options, sample or checkpoint; the message names the field."""


@dataclass(frozen=True, slots=True)
class ExponentialBuckets:
    """``NewExponentialHistogramOptions(maxValue, firstBucketSize, ratio, epsilon)``.

    Raises:
        HistogramError: ``max_value``, ``first`` or ``epsilon`` not > 0, or ``ratio`` not > 1.
    """

    max_value: float
    first: float
    ratio: float
    epsilon: float

    def __post_init__(self) -> None:
        if not (self.max_value > 0 and self.first > 0 and self.epsilon > 0 and self.ratio > 1):
            raise HistogramError("maxValue, firstBucketSize and epsilon must be > 0.0, ratio must be > 1.0")

    @property
    def num_buckets(self) -> int:
        """Number of buckets; the last start is >= ``max_value``."""
        return math.ceil(math.log(self.max_value * (self.ratio - 1) / self.first + 1) / math.log(self.ratio)) + 1

    def find_bucket(self, value: float) -> int:
        """Index of the bucket holding ``value`` (below ``first``: 0; beyond the range: the last)."""
        if value < self.first:
            return 0
        bucket = int(math.log(value * (self.ratio - 1) / self.first + 1) / math.log(self.ratio))
        return min(bucket, self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        """Start of ``bucket`` (``first * (ratio**bucket - 1) / (ratio - 1)``; 0 for bucket 0).

        Raises:
            HistogramError: index out of ``[0, num_buckets)``.
        """
        if bucket < 0 or bucket >= self.num_buckets:
            raise HistogramError(f"bucket index {bucket} out of range [0..{self.num_buckets - 1}]")
        if bucket == 0:
            return 0.0
        return self.first * (self.ratio**bucket - 1) / (self.ratio - 1)


#: cpu buckets in cores: 0.025 .. 1024, 5 % growth (``defaultCPUHistogram``).
CPU_BUCKETS = ExponentialBuckets(1024.0, 0.025, 1.0 + BUCKET_GROWTH, EPSILON)
#: memory buckets in bytes: 5 MiB .. 2 TiB, 5 % growth (``defaultMemoryHistogram``).
MEMORY_BUCKETS = ExponentialBuckets(float(1 << 41), float(5 << 20), 1.0 + BUCKET_GROWTH, EPSILON)


def _round_half_up(x: float) -> int:
    """Go's ``round`` of the histogram package: ``floor(x + 0.5)``."""
    return math.floor(x + 0.5)


def parse_timestamp(text: Any) -> float:
    """RFC 3339 (``metav1.Time`` / Go ``time.Time`` JSON) to epoch seconds; Go's zero time to 0.0."""
    if not isinstance(text, str):
        raise HistogramError(f"referenceTimestamp: expected an RFC 3339 string, got {text!r}")
    if text.startswith("0001-01-01"):
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise HistogramError(f"referenceTimestamp: not an RFC 3339 time: {text!r}") from None


def format_timestamp(ts: float) -> str:
    """Epoch seconds to RFC 3339 UTC with seconds (``2026-12-06T12:00:00Z``); 0.0 as Go's zero time."""
    if ts == 0.0:
        return "0001-01-01T00:00:00Z"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class DecayingHistogram:
    """A histogram whose samples lose half their weight every ``half_life`` seconds (see the module docstring).

    Args:
        buckets: the bucket layout (:data:`CPU_BUCKETS`, :data:`MEMORY_BUCKETS`).
        half_life: seconds, > 0.

    Raises:
        HistogramError: ``half_life`` not > 0.
    """

    __slots__ = ("buckets", "half_life", "max_bucket", "min_bucket", "reference", "total", "weights")

    def __init__(self, buckets: ExponentialBuckets, half_life: float) -> None:
        if not half_life > 0:
            raise HistogramError(f"half-life must be > 0 seconds, got {half_life}")
        self.buckets = buckets
        self.half_life = float(half_life)
        n = buckets.num_buckets
        self.weights = [0.0] * n  # a list, not numpy: the agent does not import numpy
        self.total = 0.0
        self.min_bucket = n - 1
        self.max_bucket = 0
        #: Reference time (epoch seconds), a multiple of the half-life; 0.0 stands for Go's zero time.
        self.reference = 0.0

    # ------------------------------------------------------------------ plain histogram
    def _add(self, value: float, weight: float) -> None:
        bucket = self.buckets.find_bucket(value)
        self.weights[bucket] += weight
        self.total += weight
        if bucket < self.min_bucket and self.weights[bucket] >= self.buckets.epsilon:
            self.min_bucket = bucket
        if bucket > self.max_bucket and self.weights[bucket] >= self.buckets.epsilon:
            self.max_bucket = bucket

    def _update_min_max(self) -> None:
        eps = self.buckets.epsilon
        last = self.buckets.num_buckets - 1
        while self.weights[self.min_bucket] < eps and self.min_bucket < last:
            self.min_bucket += 1
        while self.weights[self.max_bucket] < eps and self.max_bucket > 0:
            self.max_bucket -= 1

    def _scale(self, factor: float) -> None:
        lo, hi = self.min_bucket, self.max_bucket
        for bucket in range(lo, hi + 1):
            self.weights[bucket] *= factor
        self.total *= factor
        self._update_min_max()

    def is_empty(self) -> bool:
        """True when the first non-empty bucket weighs less than epsilon (nothing of weight left)."""
        return self.weights[self.min_bucket] < self.buckets.epsilon

    def percentile(self, p: float) -> float:
        """The ``p`` (0..1) percentile: the end of the bucket where the cumulative weight reaches ``p * total``
        (the start of the last bucket if it is that one); 0.0 when empty. Units are the samples' (cores, bytes)."""
        if self.is_empty():
            return 0.0
        threshold = p * self.total
        partial = 0.0
        bucket = self.min_bucket
        while bucket < self.max_bucket:
            partial += self.weights[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.buckets.num_buckets - 1:
            return self.buckets.bucket_start(bucket + 1)
        return self.buckets.bucket_start(bucket)

    # ------------------------------------------------------------------ decay
    def _shift_reference(self, new_reference: float) -> None:
        new_reference = math.floor(new_reference / self.half_life + 0.5) * self.half_life  # Go's Time.Round(halfLife)
        exponent = _round_half_up((self.reference - new_reference) / self.half_life)
        self._scale(math.ldexp(1.0, exponent))
        self.reference = new_reference

    def _decay_factor(self, ts: float) -> float:
        if ts > self.reference + self.half_life * MAX_DECAY_EXPONENT:
            self._shift_reference(ts)
        return float(2.0 ** ((ts - self.reference) / self.half_life))

    def add_sample(self, value: float, weight: float, ts: float) -> None:
        """Add ``value`` with ``weight`` at ``ts`` (epoch seconds), decayed against the reference time.

        Raises:
            HistogramError: negative weight, or a value that is not a finite number.
        """
        if weight < 0:
            raise HistogramError(f"sample weight must be non-negative, got {weight}")
        if not math.isfinite(value):
            raise HistogramError(f"sample value must be finite, got {value}")
        self._add(value, weight * self._decay_factor(ts))

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> dict[str, Any]:
        """``SaveToCheckpoint``: ``{"totalWeight", "bucketWeights", "referenceTimestamp"}`` (JSON-ready)."""
        out: dict[str, Any] = {"totalWeight": self.total, "bucketWeights": {}}
        lo, hi = self.min_bucket, self.max_bucket
        peak = max(self.weights[lo : hi + 1], default=0.0)
        if peak > 0:
            ratio = MAX_CHECKPOINT_WEIGHT / peak
            for bucket in range(lo, hi + 1):
                weight = _round_half_up(self.weights[bucket] * ratio)
                if weight > 0:
                    out["bucketWeights"][str(bucket)] = weight
        out["referenceTimestamp"] = format_timestamp(self.reference)
        return out

    def load(self, checkpoint: Any) -> None:
        """``LoadFromCheckpoint``: add a checkpoint's weights (scaled to its total) and take its reference time.

        Nothing changes when the checkpoint is refused.

        Raises:
            HistogramError: not an object, negative total, a bucket index out of range or not an integer, a
                negative or non-integer weight, or a bad ``referenceTimestamp``.
        """
        if not isinstance(checkpoint, dict):
            raise HistogramError("histogram checkpoint: expected an object")
        total = checkpoint.get("totalWeight", 0.0)
        if isinstance(total, bool) or not isinstance(total, int | float) or total < 0 or not math.isfinite(total):
            raise HistogramError(f"totalWeight: expected a non-negative number, got {total!r}")
        raw = checkpoint.get("bucketWeights") or {}
        if not isinstance(raw, dict):
            raise HistogramError("bucketWeights: expected an object of bucket index -> weight")
        parsed: dict[int, int] = {}
        n = self.buckets.num_buckets
        for key, weight in raw.items():
            try:
                bucket = int(key)
            except (TypeError, ValueError):
                raise HistogramError(f"bucketWeights: bucket {key!r} is not an integer") from None
            if bucket < 0 or bucket >= n:
                raise HistogramError(f"bucketWeights: bucket {bucket} is outside [0, {n})")
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
                raise HistogramError(f"bucketWeights[{bucket}]: expected a non-negative integer, got {weight!r}")
            parsed[bucket] = weight
        reference = parse_timestamp(checkpoint.get("referenceTimestamp", "0001-01-01T00:00:00Z"))
        total_units = sum(parsed.values())
        if total_units > 0:
            ratio = float(total) / total_units
            for bucket, weight in parsed.items():
                self.min_bucket = min(self.min_bucket, bucket)
                self.max_bucket = max(self.max_bucket, bucket)
                self.weights[bucket] += weight * ratio
            self.total += float(total)
        self.reference = reference


def cpu_histogram(half_life: float) -> DecayingHistogram:
    """A cpu histogram (cores) with upstream's buckets and the given half-life in seconds."""
    return DecayingHistogram(CPU_BUCKETS, half_life)


def memory_histogram(half_life: float) -> DecayingHistogram:
    """A memory histogram (bytes) with upstream's buckets and the given half-life in seconds."""
    return DecayingHistogram(MEMORY_BUCKETS, half_life)
