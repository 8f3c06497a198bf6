"""LoadAwareSchedulingArgs: decoding, upstream defaults and validation.

Defaults follow ``pkg/scheduler/apis/config/v1/defaults.go`` (``SetDefaults_LoadAwareSchedulingArgs``)
and validation ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``. Field names are
upstream's JSON names. Percentages are integers 0..100.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.framework.config import ArgsError
from app.framework.duration import parse_duration

AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")
DEFAULT_RESOURCE_WEIGHTS = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS = {"cpu": 65, "memory": 95}
DEFAULT_ESTIMATED_SCALING_FACTORS = {"cpu": 85, "memory": 70}
DEFAULT_NODE_METRIC_EXPIRATION_SECONDS = 180


@dataclass(slots=True)
class AggregatedArgs:
    """``aggregated``: percentile-based filtering and scoring. Durations in seconds (0 = longest reported)."""

    usage_thresholds: dict[str, int] = field(default_factory=dict)
    usage_aggregation_type: str = ""
    usage_aggregated_duration: float = 0.0
    score_aggregation_type: str = ""
    score_aggregated_duration: float = 0.0


@dataclass(slots=True)
class LoadAwareSchedulingArgs:
    """Plugin args after defaulting (see module docstring for sources)."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
    enable_schedule_when_node_metrics_expired: bool = False
    resource_weights: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))
    dominant_resource_weight: int = 0
    usage_thresholds: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_USAGE_THRESHOLDS))
    prod_usage_thresholds: dict[str, int] = field(default_factory=dict)
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool = False
    estimator: str = ""
    estimated_scaling_factors: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_ESTIMATED_SCALING_FACTORS))
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = False
    aggregated: AggregatedArgs | None = None
    supported_resources: list[str] = field(default_factory=list)

    def resource_names(self) -> list[str]:
        """The resource vector: cpu, memory and every resource named in the args, sorted.

        Mirrors ``NewResourceVectorizerFromArgs`` (``helper.go``).
        """
        names = {"cpu", "memory"}
        names |= set(self.usage_thresholds) | set(self.prod_usage_thresholds)
        if self.aggregated is not None:
            names |= set(self.aggregated.usage_thresholds)
        names |= set(self.resource_weights) | set(self.estimated_scaling_factors)
        names |= set(self.supported_resources)
        return sorted(names)


_FIELDS = {
    "filterExpiredNodeMetrics",
    "nodeMetricExpirationSeconds",
    "enableScheduleWhenNodeMetricsExpired",
    "resourceWeights",
    "dominantResourceWeight",
    "usageThresholds",
    "prodUsageThresholds",
    "prodUsageIncludeSys",
    "scoreAccordingProdUsage",
    "estimator",
    "estimatedScalingFactors",
    "estimatedSecondsAfterPodScheduled",
    "estimatedSecondsAfterInitialized",
    "allowCustomizeEstimation",
    "aggregated",
    "supportedResources",
    "apiVersion",
    "kind",
}
_AGG_FIELDS = {
    "usageThresholds",
    "usageAggregationType",
    "usageAggregatedDuration",
    "scoreAggregationType",
    "scoreAggregatedDuration",
}


def _bool(raw: dict[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ArgsError(key, f"expected true or false, got {value!r}")
    return value


def _int(raw: dict[str, Any], key: str, path: str | None = None) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgsError(path or key, f"expected an integer, got {value!r}")
    return value


def _int_map(raw: dict[str, Any], key: str, path: str | None = None) -> dict[str, int] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ArgsError(path or key, "expected a map of resource name to integer")
    out: dict[str, int] = {}
    for name, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ArgsError(f"{path or key}.{name}", f"expected an integer, got {v!r}")
        out[str(name)] = v
    return out


def _duration(raw: dict[str, Any], key: str, path: str) -> float:
    value = raw.get(key)
    if value is None:
        return 0.0
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ArgsError(path, str(exc)) from None


def _check_thresholds(path: str, values: dict[str, int]) -> None:
    for name in sorted(values):
        v = values[name]
        if v < 0:
            raise ArgsError(f"{path}.{name}", f"resource Threshold of {name} should be a positive value, got {v}")
        if v > 100:
            raise ArgsError(f"{path}.{name}", f"resource Threshold of {name} should be less than 100, got {v}")


def _decode_aggregated(raw: Any) -> AggregatedArgs:
    if not isinstance(raw, dict):
        raise ArgsError("aggregated", "expected a mapping")
    extra = set(raw) - _AGG_FIELDS
    if extra:
        raise ArgsError(f"aggregated.{sorted(extra)[0]}", "unknown field")
    agg = AggregatedArgs(
        usage_thresholds=_int_map(raw, "usageThresholds", "aggregated.usageThresholds") or {},
        usage_aggregation_type=str(raw.get("usageAggregationType") or ""),
        usage_aggregated_duration=_duration(raw, "usageAggregatedDuration", "aggregated.usageAggregatedDuration"),
        score_aggregation_type=str(raw.get("scoreAggregationType") or ""),
        score_aggregated_duration=_duration(raw, "scoreAggregatedDuration", "aggregated.scoreAggregatedDuration"),
    )
    _check_thresholds("aggregated.usageThresholds", agg.usage_thresholds)
    for key, value in (
        ("usageAggregationType", agg.usage_aggregation_type),
        ("scoreAggregationType", agg.score_aggregation_type),
    ):
        if value and value not in AGGREGATION_TYPES:
            raise ArgsError(
                f"aggregated.{key}",
                f'Unsupported value: "{value}": supported values: ' + ", ".join(f'"{t}"' for t in AGGREGATION_TYPES),
            )
    for key, seconds in (
        ("usageAggregatedDuration", agg.usage_aggregated_duration),
        ("scoreAggregatedDuration", agg.score_aggregated_duration),
    ):
        if seconds < 0:
            raise ArgsError(f"aggregated.{key}", "duration must be >= 0")
    return agg


def decode_args(raw: dict[str, Any]) -> LoadAwareSchedulingArgs:
    """Decode ``pluginConfig[].args`` of LoadAwareScheduling, apply upstream defaults, validate.

    Defaults: usageThresholds {cpu: 65, memory: 95} only when the map is empty (no per-key
    merge); resourceWeights {cpu: 1, memory: 1} only when empty and dominantResourceWeight is 0;
    estimatedScalingFactors {cpu: 85, memory: 70} with missing keys merged in.

    Raises:
        ArgsError: unknown field, wrong type, or a value upstream's validation rejects; ``field``
            names the offending path and the message is upstream's where it has one.
    """
    extra = set(raw) - _FIELDS
    if extra:
        raise ArgsError(sorted(extra)[0], "unknown field")
    args = LoadAwareSchedulingArgs()
    args.filter_expired_node_metrics = _bool(raw, "filterExpiredNodeMetrics", True)
    args.enable_schedule_when_node_metrics_expired = _bool(raw, "enableScheduleWhenNodeMetricsExpired", False)
    expiration = _int(raw, "nodeMetricExpirationSeconds")
    if expiration is not None:
        if expiration <= 0:
            raise ArgsError("nodeMetricExpirationSeconds", "nodeMetricExpiredSeconds should be a positive value")
        args.node_metric_expiration_seconds = expiration
    args.dominant_resource_weight = _int(raw, "dominantResourceWeight") or 0
    weights = _int_map(raw, "resourceWeights") or {}
    if not weights and args.dominant_resource_weight == 0:
        weights = dict(DEFAULT_RESOURCE_WEIGHTS)
    args.resource_weights = weights
    args.usage_thresholds = _int_map(raw, "usageThresholds") or dict(DEFAULT_USAGE_THRESHOLDS)
    args.prod_usage_thresholds = _int_map(raw, "prodUsageThresholds") or {}
    args.prod_usage_include_sys = _bool(raw, "prodUsageIncludeSys", False)
    args.score_according_prod_usage = _bool(raw, "scoreAccordingProdUsage", False)
    estimator = raw.get("estimator") or ""
    if not isinstance(estimator, str):
        raise ArgsError("estimator", f"expected a string, got {estimator!r}")
    # Any name is accepted: an unknown one falls back to the default estimator (estimator/types.go NewEstimator).
    args.estimator = estimator
    factors = _int_map(raw, "estimatedScalingFactors")
    if factors is None:
        factors = dict(DEFAULT_ESTIMATED_SCALING_FACTORS)
    else:
        for k, v in DEFAULT_ESTIMATED_SCALING_FACTORS.items():
            factors.setdefault(k, v)
    args.estimated_scaling_factors = factors
    args.estimated_seconds_after_pod_scheduled = _int(raw, "estimatedSecondsAfterPodScheduled")
    args.estimated_seconds_after_initialized = _int(raw, "estimatedSecondsAfterInitialized")
    args.allow_customize_estimation = _bool(raw, "allowCustomizeEstimation", False)
    if raw.get("aggregated") is not None:
        args.aggregated = _decode_aggregated(raw["aggregated"])
    supported = raw.get("supportedResources") or []
    if not isinstance(supported, list) or not all(isinstance(s, str) for s in supported):
        raise ArgsError("supportedResources", "expected a list of resource names")
    args.supported_resources = list(supported)

    for name in sorted(args.resource_weights):
        w = args.resource_weights[name]
        if w <= 0:
            raise ArgsError(f"resourceWeights.{name}", f"resource Weight of {name} should be a positive value, got {w}")
        if w > 100:
            raise ArgsError(f"resourceWeights.{name}", f"resource Weight of {name} should be less than 100, got {w}")
    if args.dominant_resource_weight < 0:
        raise ArgsError("dominantResourceWeight", "dominantResourceWeight should not be a negative value")
    if args.dominant_resource_weight > 100:
        raise ArgsError("dominantResourceWeight", "dominantResourceWeight should be less than 100")
    _check_thresholds("usageThresholds", args.usage_thresholds)
    for name in sorted(args.estimated_scaling_factors):
        f = args.estimated_scaling_factors[name]
        if f <= 0:
            raise ArgsError(
                f"estimatedScalingFactors.{name}",
                f"estimated resource ScalingFactor of {name} should be a positive value, got {f}",
            )
        if f > 100:
            raise ArgsError(
                f"estimatedScalingFactors.{name}",
                f"estimated resource ScalingFactor of {name} should be less than 100, got {f}",
            )
    for name in sorted(args.resource_weights):
        if name not in args.estimated_scaling_factors:
            raise ArgsError(f"estimatedScalingFactors.{name}", "Not found")
    return args
