"""The ``colocation-config`` key of the slo-controller ConfigMap: defaults, parsing, validation, per node.

Follows upstream's ``pkg/util/sloconfig/colocation_config.go`` and
``pkg/slo-controller/config/colocation_cm_event_handler.go``:

- absent or empty key: the defaults (:data:`DEFAULT_COLOCATION_STRATEGY`, colocation disabled);
- the cluster strategy is merged over the defaults and must pass :func:`validate_strategy`,
  otherwise the whole key is rejected (:class:`ColocationConfigError`) and the caller keeps its
  last good configuration;
- each ``nodeConfigs[]`` entry is merged over the cluster strategy; an invalid one falls back to
  the cluster strategy;
- :func:`node_strategy`: the first ``nodeConfigs`` entry whose ``nodeSelector`` matches the node,
  then node annotation ``node.koordinator.sh/colocation-strategy`` (JSON), then node labels
  ``node.koordinator.sh/{cpu,memory}-reclaim-ratio`` and ``mid-static-{cpu,memory}-reserved-ratio``
  (float x 100, truncated).

Strategies are JSON-shaped dicts with upstream's camelCase keys; :class:`ColocationStrategy` is the
typed view the controllers read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.api.labelselector import SelectorError, selector_matches
from app.manager.mergecfg import merge_cfg

log = logging.getLogger(__name__)

COLOCATION_CONFIG_KEY = "colocation-config"
ANNOTATION_NODE_COLOCATION_STRATEGY = "node.koordinator.sh/colocation-strategy"
LABEL_CPU_RECLAIM_RATIO = "node.koordinator.sh/cpu-reclaim-ratio"
LABEL_MEMORY_RECLAIM_RATIO = "node.koordinator.sh/memory-reclaim-ratio"
LABEL_MID_STATIC_CPU_RESERVED_RATIO = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
LABEL_MID_STATIC_MEMORY_RESERVED_RATIO = "node.koordinator.sh/mid-static-memory-reserved-ratio"

#: ``DefaultColocationStrategy()``; batch thresholds are unset (None).
DEFAULT_COLOCATION_STRATEGY: dict[str, Any] = {
    "enable": False,
    "metricAggregateDurationSeconds": 300,
    "metricReportIntervalSeconds": 60,
    "metricAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
    "metricMemoryCollectPolicy": "usageWithoutPageCache",
    "cpuReclaimThresholdPercent": 60,
    "cpuCalculatePolicy": "usage",
    "midStaticCPUReservedPercent": 0,
    "midStaticMemoryReservedPercent": 0,
    "memoryReclaimThresholdPercent": 65,
    "memoryCalculatePolicy": "usage",
    "degradeTimeMinutes": 15,
    "updateTimeThresholdSeconds": 300,
    "resourceDiffThreshold": 0.1,
    "midCPUThresholdPercent": 100,
    "midMemoryThresholdPercent": 100,
    "midUnallocatedPercent": 0,
}

_INT_FIELDS = (
    "metricAggregateDurationSeconds",
    "metricReportIntervalSeconds",
    "cpuReclaimThresholdPercent",
    "memoryReclaimThresholdPercent",
    "degradeTimeMinutes",
    "updateTimeThresholdSeconds",
    "midCPUThresholdPercent",
    "midMemoryThresholdPercent",
    "midUnallocatedPercent",
    "midStaticCPUReservedPercent",
    "midStaticMemoryReservedPercent",
    "batchCPUThresholdPercent",
    "batchMemoryThresholdPercent",
)
_STR_FIELDS = ("metricMemoryCollectPolicy", "cpuCalculatePolicy", "memoryCalculatePolicy", "midReclaimMode")
_OBJECT_FIELDS = ("metricAggregatePolicy", "extensions")


class ColocationConfigError(ValueError):
    """``colocation-config`` cannot be used; the message names the field (the last good config stays)."""


def check_types(raw: Mapping[str, Any], where: str) -> None:
    """Reject values Go's ``json.Unmarshal`` into ``ColocationStrategy`` would reject.

    Raises:
        ColocationConfigError: e.g. ``colocation-config.cpuReclaimThresholdPercent: expected an integer, got "60"``.
    """
    for key, value in raw.items():
        if value is None:
            continue
        bad = (
            (key in _INT_FIELDS and (isinstance(value, bool) or not isinstance(value, int)))
            or (key == "enable" and not isinstance(value, bool))
            or (key == "resourceDiffThreshold" and (isinstance(value, bool) or not isinstance(value, int | float)))
            or (key in _STR_FIELDS and not isinstance(value, str))
            or (key in _OBJECT_FIELDS and not isinstance(value, dict))
        )
        if bad:
            want = (
                "an integer"
                if key in _INT_FIELDS
                else "a boolean"
                if key == "enable"
                else "a number"
                if key == "resourceDiffThreshold"
                else "a string"
                if key in _STR_FIELDS
                else "an object"
            )
            raise ColocationConfigError(f"{where}.{key}: expected {want}, got {orjson.dumps(value).decode()}")


def validate_strategy(s: Mapping[str, Any]) -> str | None:
    """``IsColocationStrategyValid``: None when valid, else the first offending field and rule."""
    rules: list[tuple[str, str, Any]] = [
        ("metricAggregateDurationSeconds", "> 0", lambda v: v > 0),
        ("metricReportIntervalSeconds", "> 0", lambda v: v > 0),
        ("cpuReclaimThresholdPercent", ">= 0", lambda v: v >= 0),
        ("midStaticCPUReservedPercent", ">= 0", lambda v: v >= 0),
        ("memoryReclaimThresholdPercent", ">= 0", lambda v: v >= 0),
        ("midStaticMemoryReservedPercent", ">= 0", lambda v: v >= 0),
        ("degradeTimeMinutes", "> 0", lambda v: v > 0),
        ("updateTimeThresholdSeconds", "> 0", lambda v: v > 0),
        ("resourceDiffThreshold", "> 0", lambda v: v > 0),
        ("metricMemoryCollectPolicy", "not empty", lambda v: len(v) > 0),
        ("midCPUThresholdPercent", "in [0, 100]", lambda v: 0 <= v <= 100),
        ("midMemoryThresholdPercent", "in [0, 100]", lambda v: 0 <= v <= 100),
        ("midUnallocatedPercent", "in [0, 100]", lambda v: 0 <= v <= 100),
        ("batchCPUThresholdPercent", ">= 0", lambda v: v >= 0),
        ("batchMemoryThresholdPercent", ">= 0", lambda v: v >= 0),
    ]
    for key, rule, ok in rules:
        if s.get(key) is not None and not ok(s[key]):
            return f"{key} must be {rule}, got {s[key]}"
    return None


@dataclass(frozen=True, slots=True)
class NodeColocationConfig:
    """One ``nodeConfigs[]`` entry: its name, node selector (None matches no node) and merged strategy."""

    name: str
    node_selector: dict[str, Any] | None
    strategy: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ColocationConfig:
    """``ColocationCfg``: the cluster strategy (merged over defaults) and the node configs."""

    strategy: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_COLOCATION_STRATEGY))
    node_configs: tuple[NodeColocationConfig, ...] = ()


def parse_colocation_config(text: str | None) -> ColocationConfig:
    """Parse the ``colocation-config`` value; ``None``/empty gives the defaults.

    Raises:
        ColocationConfigError: not JSON, wrong types, or an invalid cluster strategy.
    """
    if not text:
        return ColocationConfig()
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ColocationConfigError(f"{COLOCATION_CONFIG_KEY}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ColocationConfigError(f"{COLOCATION_CONFIG_KEY}: expected a JSON object, got {type(raw).__name__}")
    node_raw = raw.pop("nodeConfigs", None) or []
    if not isinstance(node_raw, list):
        raise ColocationConfigError(f"{COLOCATION_CONFIG_KEY}.nodeConfigs: expected a list")
    check_types(raw, COLOCATION_CONFIG_KEY)
    cluster = merge_cfg(DEFAULT_COLOCATION_STRATEGY, raw)
    problem = validate_strategy(cluster)
    if problem:
        raise ColocationConfigError(f"{COLOCATION_CONFIG_KEY}: the cluster config is invalid: {problem}")
    nodes = []
    for i, entry in enumerate(node_raw):
        where = f"{COLOCATION_CONFIG_KEY}.nodeConfigs[{i}]"
        if not isinstance(entry, dict):
            raise ColocationConfigError(f"{where}: expected an object")
        body = {k: v for k, v in entry.items() if k not in ("name", "nodeSelector")}
        check_types(body, where)
        merged = merge_cfg(cluster, body)
        problem = validate_strategy(merged)
        if problem:
            log.error("%s is invalid (%s): using the cluster strategy for its nodes", where, problem)
            merged = dict(cluster)
        selector = entry.get("nodeSelector")
        nodes.append(NodeColocationConfig(str(entry.get("name") or ""), selector, merged))
    return ColocationConfig(cluster, tuple(nodes))


def _ratio_percent(labels: Mapping[str, str], key: str) -> int | None:
    """``getNodeReclaimPercent``: a float label x 100, truncated; None when absent, invalid or negative."""
    if key not in labels:
        return None
    try:
        value = float(labels[key])
    except ValueError:
        return None
    return None if value < 0 else int(value * 100)


def node_strategy(cfg: ColocationConfig, labels: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    """``GetNodeColocationStrategy``: the strategy that applies to a node with these labels/annotations."""
    strategy = dict(cfg.strategy)
    for node_cfg in cfg.node_configs:
        try:
            matched = selector_matches(node_cfg.node_selector, labels)
        except SelectorError:
            continue
        if matched:
            strategy = merge_cfg(strategy, node_cfg.strategy)
            break
    raw = annotations.get(ANNOTATION_NODE_COLOCATION_STRATEGY)
    if raw:
        try:
            parsed = orjson.loads(raw)
            if isinstance(parsed, dict):
                check_types(parsed, ANNOTATION_NODE_COLOCATION_STRATEGY)
                strategy = merge_cfg(strategy, parsed)
        except (orjson.JSONDecodeError, ColocationConfigError) as exc:
            log.debug("ignoring node colocation strategy annotation: %s", exc)
    for label, key in (
        (LABEL_CPU_RECLAIM_RATIO, "cpuReclaimThresholdPercent"),
        (LABEL_MEMORY_RECLAIM_RATIO, "memoryReclaimThresholdPercent"),
        (LABEL_MID_STATIC_CPU_RESERVED_RATIO, "midStaticCPUReservedPercent"),
        (LABEL_MID_STATIC_MEMORY_RESERVED_RATIO, "midStaticMemoryReservedPercent"),
    ):
        percent = _ratio_percent(labels, label)
        if percent is not None:
            strategy[key] = percent
    return strategy


@dataclass(frozen=True, slots=True)
class ColocationStrategy:
    """Typed view of a merged strategy (the fields the batch- and mid-resource controllers read).

    Percents are 0..100 (reclaim percents may exceed 100: the safety margin turns negative, as
    upstream); ``degrade_minutes`` minutes; ``update_seconds`` seconds; ``diff_threshold`` a ratio.
    """

    enable: bool
    cpu_reclaim_percent: int
    memory_reclaim_percent: int
    cpu_policy: str
    memory_policy: str
    degrade_minutes: int
    update_seconds: int
    diff_threshold: float
    batch_cpu_percent: int | None
    batch_memory_percent: int | None
    mid_cpu_percent: int = 100
    mid_memory_percent: int = 100
    mid_unallocated_percent: int = 0
    mid_static_cpu_percent: int = 0
    mid_static_memory_percent: int = 0
    mid_reclaim_mode: str = ""

    @classmethod
    def of(cls, s: Mapping[str, Any]) -> ColocationStrategy:
        """From a merged strategy dict (defaults fill what is missing)."""
        d = {**DEFAULT_COLOCATION_STRATEGY, **{k: v for k, v in s.items() if v is not None}}
        return cls(
            enable=bool(d["enable"]),
            cpu_reclaim_percent=int(d["cpuReclaimThresholdPercent"]),
            memory_reclaim_percent=int(d["memoryReclaimThresholdPercent"]),
            cpu_policy=str(d["cpuCalculatePolicy"]),
            memory_policy=str(d["memoryCalculatePolicy"]),
            degrade_minutes=int(d["degradeTimeMinutes"]),
            update_seconds=int(d["updateTimeThresholdSeconds"]),
            diff_threshold=float(d["resourceDiffThreshold"]),
            batch_cpu_percent=d.get("batchCPUThresholdPercent"),
            batch_memory_percent=d.get("batchMemoryThresholdPercent"),
            mid_cpu_percent=int(d["midCPUThresholdPercent"]),
            mid_memory_percent=int(d["midMemoryThresholdPercent"]),
            mid_unallocated_percent=int(d["midUnallocatedPercent"]),
            mid_static_cpu_percent=int(d["midStaticCPUReservedPercent"]),
            mid_static_memory_percent=int(d["midStaticMemoryReservedPercent"]),
            mid_reclaim_mode=str(d.get("midReclaimMode") or ""),
        )
