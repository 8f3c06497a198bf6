"""Usage-threshold filter profiles: plugin args, overridden per node by annotation.

Mirrors ``usageThresholdsFilterProfile`` and ``generateUsageThresholdsFilterProfile``
(``helper.go``) and the annotation ``scheduling.koordinator.sh/usage-thresholds``
(``apis/extension/load_aware.go``). Thresholds are percent (0..100) vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from app.api.koordext import ANNOTATION_CUSTOM_USAGE_THRESHOLDS
from app.framework.duration import parse_duration
from app.plugins.loadaware.args import LoadAwareSchedulingArgs
from app.plugins.loadaware.vector import Vec, Vectorizer


@dataclass(frozen=True, slots=True)
class AggregatedProfile:
    """Aggregated filter: thresholds, aggregation type (p50...avg) and duration in seconds (0 = longest)."""

    thresholds: Vec
    aggregation_type: str
    duration: float


@dataclass(frozen=True, slots=True)
class FilterProfile:
    """Thresholds a node is filtered with."""

    usage: Vec
    prod: Vec
    aggregated: AggregatedProfile | None


def profile_from_args(args: LoadAwareSchedulingArgs, vec: Vectorizer) -> FilterProfile:
    """The cluster-wide profile from plugin args (``NewUsageThresholdsFilterProfile``)."""
    agg = None
    a = args.aggregated
    if a is not None and a.usage_thresholds and a.usage_aggregation_type:
        agg = AggregatedProfile(
            vec.from_values(a.usage_thresholds), a.usage_aggregation_type, a.usage_aggregated_duration
        )
    return FilterProfile(vec.from_values(args.usage_thresholds), vec.from_values(args.prod_usage_thresholds), agg)


def _int_map(value: Any) -> dict[str, int] | None:
    """A ``map[ResourceName]int64``: None when null or empty.

    Raises:
        ValueError: not a map of integers (Go's ``json.Unmarshal`` fails on it).
    """
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise ValueError("thresholds must be a map of integers")
    return {str(k): int(v) for k, v in value.items()} or None


def profile_for_node(annotations: dict[str, str], default: FilterProfile, vec: Vectorizer) -> FilterProfile:
    """The node's profile: each part present in the annotation replaces the default part entirely.

    An annotation Go's ``json.Unmarshal`` would reject (bad JSON, or any part of the wrong type,
    including an invalid duration), or one with no usable part, leaves the default profile
    (``GetCustomUsageThresholds`` error => ``tfp``).
    """
    raw = annotations.get(ANNOTATION_CUSTOM_USAGE_THRESHOLDS)
    if raw is None:
        return default
    try:
        data = orjson.loads(raw)
        if not isinstance(data, dict):
            return default
        usage = _int_map(data.get("usageThresholds"))
        prod = _int_map(data.get("prodUsageThresholds"))
        agg_raw = data.get("aggregatedUsage")
        agg: AggregatedProfile | None = None
        if agg_raw is not None:
            if not isinstance(agg_raw, dict):
                raise ValueError("aggregatedUsage must be an object")
            agg_thr = _int_map(agg_raw.get("usageThresholds"))
            agg_type = agg_raw.get("usageAggregationType")
            if agg_type is not None and not isinstance(agg_type, str):
                raise ValueError("usageAggregationType must be a string")
            duration = agg_raw.get("usageAggregatedDuration")
            seconds = parse_duration(duration) if duration is not None else 0.0
            if agg_thr and agg_type:
                agg = AggregatedProfile(vec.from_values(agg_thr), agg_type, seconds)
    except (orjson.JSONDecodeError, ValueError):
        return default
    if usage is None and prod is None and agg is None:
        return default
    return FilterProfile(
        vec.from_values(usage) if usage is not None else default.usage,
        vec.from_values(prod) if prod is not None else default.prod,
        agg if agg is not None else default.aggregated,
    )
