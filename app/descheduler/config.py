"""``DeschedulerConfiguration`` (``descheduler/v1alpha2``) parsing, defaulting and validation.

Mirrors ``pkg/descheduler/apis/config/v1alpha2/types.go``, ``types_loadaware.go``,
``types_pluginargs.go`` (MigrationControllerArgs), ``defaults.go`` and
``validation/validation_loadaware.go``. Only the plugins this rebuild runs are understood:
``LowNodeLoad`` (balance), ``MigrationController`` (evict), ``DefaultEvictor`` (filter) and the
``DrainNodeController`` (enabled at any point; it needs MigrationController, which runs its jobs); any
other enabled plugin is refused, naming the field. Percentages are floats in [0, 100]; durations are
seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.api.labelselector import SelectorError, selector_matches
from app.framework.duration import parse_duration

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerConfiguration"
DEFAULT_NODE_POOL = "__default_node_pool__"
MAX_PERCENT, MIN_PERCENT = 100.0, 0.0
KNOWN_PLUGINS = ("LowNodeLoad", "MigrationController", "DefaultEvictor", "DrainNodeController")


class ConfigError(ValueError):
    """The configuration is invalid; ``field`` is the path of the offending field (``profiles[0]...``)."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field = field_path


@dataclass
class AnomalyCondition:
    """``LoadAnomalyCondition``: timeout in seconds, consecutive counts (defaults 60 s, 5, 3)."""

    timeout: float = 60.0
    consecutive_abnormalities: int = 5
    consecutive_normalities: int = 3


@dataclass
class NodePool:
    """``LowNodeLoadNodePool`` after defaulting (unset thresholds/weights/anomaly inherited from the args).

    Thresholds map resource name -> percent; ``resource_weights`` resource name -> weight.
    """

    name: str
    node_selector: dict[str, Any] | None = None
    use_deviation_thresholds: bool = False
    high_thresholds: dict[str, float] = field(default_factory=dict)
    low_thresholds: dict[str, float] = field(default_factory=dict)
    prod_high_thresholds: dict[str, float] = field(default_factory=dict)
    prod_low_thresholds: dict[str, float] = field(default_factory=dict)
    resource_weights: dict[str, int] = field(default_factory=dict)
    anomaly_condition: AnomalyCondition | None = None


@dataclass
class LowNodeLoadArgs:
    """``LowNodeLoadArgs`` after ``SetDefaults_LowNodeLoadArgs``; top-level thresholds become the first
    pool :data:`DEFAULT_NODE_POOL` (``conversion_plugins.go``)."""

    paused: bool = False
    dry_run: bool = False
    number_of_nodes: int = 0
    node_metric_expiration_seconds: int = 180
    evictable_namespaces: dict[str, list[str]] | None = None
    node_selector: dict[str, Any] | None = None
    pod_selectors: list[dict[str, Any]] = field(default_factory=list)
    node_fit: bool = True
    detector_cache_timeout: float = 300.0
    node_pools: list[NodePool] = field(default_factory=list)


@dataclass
class DefaultEvictorArgs:
    """The sigs descheduler's ``DefaultEvictorArgs`` (what the default evictor filter honours)."""

    evict_system_critical_pods: bool = False
    evict_failed_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: int | None = None
    label_selector: dict[str, Any] | None = None


@dataclass
class MigrationControllerArgs:
    """``MigrationControllerArgs`` (subset): arbitration limits, job defaults, eviction rate."""

    dry_run: bool = False
    max_migrating_per_node: int = 2
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: int | None = None
    max_unavailable_per_workload: int | None = None
    default_job_mode: str = "ReservationFirst"
    default_job_ttl: float = 300.0
    evict_qps: float = 10.0
    evict_burst: int = 1
    namespaces: dict[str, list[str]] | None = None


@dataclass
class DeschedulerConfig:
    """The whole configuration; limits are None when unset (no limit)."""

    descheduling_interval: float = 0.0
    dry_run: bool = False
    node_selector: dict[str, Any] | None = None
    max_pods_per_node: int | None = None
    max_pods_per_namespace: int | None = None
    max_pods_total: int | None = None
    profile_name: str = "koord-descheduler"
    low_node_load: LowNodeLoadArgs | None = None
    evictor: DefaultEvictorArgs = field(default_factory=DefaultEvictorArgs)
    migration: MigrationControllerArgs = field(default_factory=MigrationControllerArgs)
    #: DrainNodeController runs (enabled in any ``plugins`` section): DrainNode objects are carried out.
    drain_enabled: bool = False
    #: MigrationController is the evictor (enabled in ``plugins.evict`` or configured): evictions become
    #: PodMigrationJobs instead of direct Eviction API calls.
    migration_enabled: bool = False


# ---------------------------------------------------------------------------------------- helpers


def _map(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"expected an object, got {type(value).__name__}")
    return dict(value)


def _bool(value: Any, path: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(path, f"expected true or false, got {value!r}")
    return value


def _int(value: Any, path: str, *, minimum: int = 0) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, f"expected an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(path, f"must be greater than or equal to {minimum}")
    return value


def _duration(value: Any, path: str, default: float) -> float:
    if value is None:
        return default
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ConfigError(path, str(exc)) from None
    if seconds < 0:
        raise ConfigError(path, "must not be negative")
    return seconds


def _selector(value: Any, path: str) -> dict[str, Any] | None:
    if value is None:
        return None
    sel = _map(value, path)
    try:
        selector_matches(sel, {})
    except SelectorError as exc:
        raise ConfigError(path, str(exc)) from None
    return sel


def _thresholds(value: Any, path: str) -> dict[str, float] | None:
    if value is None:
        return None
    out: dict[str, float] = {}
    for name, pct in _map(value, path).items():
        if isinstance(pct, bool) or not isinstance(pct, int | float):
            raise ConfigError(f"{path}[{name}]", f"expected a percentage, got {pct!r}")
        if pct < 0:
            raise ConfigError(f"{path}[{name}]", "percentage must be greater than or equal to 0")
        out[str(name)] = float(pct)
    return out


def _weights(value: Any, path: str) -> dict[str, int] | None:
    if value is None:
        return None
    out: dict[str, int] = {}
    for name, w in _map(value, path).items():
        out[str(name)] = _int(w, f"{path}[{name}]", minimum=-(2**63)) or 0
    return out


def _namespaces(value: Any, path: str) -> dict[str, list[str]] | None:
    if value is None:
        return None
    raw = _map(value, path)
    out: dict[str, list[str]] = {}
    for key in ("include", "exclude"):
        items = raw.get(key) or []
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{path}.{key}", "expected a list of namespace names")
        out[key] = list(items)
    if out["include"] and out["exclude"]:
        raise ConfigError(path, "only one of Include/Exclude namespaces can be set")
    return out


def _anomaly(value: Any, path: str, inherit: AnomalyCondition | None) -> AnomalyCondition | None:
    if value is None:
        return inherit
    raw = _map(value, path)
    base = inherit or AnomalyCondition()
    timeout = _duration(raw.get("timeout"), f"{path}.timeout", base.timeout)
    abn = _int(raw.get("consecutiveAbnormalities"), f"{path}.consecutiveAbnormalities")
    nor = _int(raw.get("consecutiveNormalities"), f"{path}.consecutiveNormalities")
    return AnomalyCondition(
        timeout=timeout,
        consecutive_abnormalities=abn or base.consecutive_abnormalities,
        consecutive_normalities=nor or base.consecutive_normalities,
    )


def _check_pool(pool: NodePool, path: str) -> None:
    """``ValidateLowLoadUtilizationArgs`` per pool: low <= high, prodHigh <= high, prodLow <= prodHigh."""
    for name, pct in pool.low_thresholds.items():
        high = pool.high_thresholds.get(name)
        if high is not None and pct > high:
            raise ConfigError(
                f"{path}.lowThresholds[{name}]", "low percentage must be less than or equal to highThresholds"
            )
    for name, pct in pool.prod_high_thresholds.items():
        high = pool.high_thresholds.get(name)
        if high is not None and pct > high:
            raise ConfigError(
                f"{path}.prodHighThresholds[{name}]",
                "node percentage must be greater than or equal to prodHighThresholds",
            )
    for name, pct in pool.prod_low_thresholds.items():
        high = pool.prod_high_thresholds.get(name)
        if high is not None and pct > high:
            raise ConfigError(
                f"{path}.prodLowThresholds[{name}]", "low percentage must be less than or equal to prodHighThresholds"
            )


def _pool(raw: dict[str, Any], path: str, parent: NodePool | None) -> NodePool:
    def inherited(key: str, attr: str) -> dict[str, float]:
        own = _thresholds(raw.get(key), f"{path}.{key}")
        if own is not None:
            return own
        return dict(getattr(parent, attr)) if parent is not None else {}

    weights = _weights(raw.get("resourceWeights"), f"{path}.resourceWeights")
    pool = NodePool(
        name=str(raw.get("name") or ""),
        node_selector=_selector(raw.get("nodeSelector"), f"{path}.nodeSelector"),
        use_deviation_thresholds=_bool(raw.get("useDeviationThresholds"), f"{path}.useDeviationThresholds", False),
        high_thresholds=inherited("highThresholds", "high_thresholds"),
        low_thresholds=inherited("lowThresholds", "low_thresholds"),
        prod_high_thresholds=inherited("prodHighThresholds", "prod_high_thresholds"),
        prod_low_thresholds=inherited("prodLowThresholds", "prod_low_thresholds"),
        resource_weights=weights if weights is not None else dict(parent.resource_weights if parent else {}),
        anomaly_condition=_anomaly(
            raw.get("anomalyCondition"), f"{path}.anomalyCondition", parent.anomaly_condition if parent else None
        ),
    )
    _check_pool(pool, path)
    return pool


def parse_low_node_load_args(raw: Any, path: str = "args") -> LowNodeLoadArgs:
    """Parse, default and validate ``LowNodeLoadArgs`` (JSON-shaped dict).

    Defaults (``SetDefaults_LowNodeLoadArgs``): nodeFit true, nodeMetricExpirationSeconds 180,
    anomalyCondition {1m, 5, 3}, detectorCacheTimeout 5m, resourceWeights cpu 1, memory 1 and 1 for
    every threshold resource (a weight <= 0 is replaced by its default). The top-level thresholds form
    the first pool ``__default_node_pool__``; configured pools inherit unset thresholds, weights and
    anomaly condition from the top level.

    Raises:
        ConfigError: naming the field (``numberOfNodes``, ``nodePools[1].lowThresholds[cpu]``, ...).
    """
    args = _map(raw, path)
    number = _int(args.get("numberOfNodes"), f"{path}.numberOfNodes")
    expiration = _int(args.get("nodeMetricExpirationSeconds"), f"{path}.nodeMetricExpirationSeconds", minimum=-(2**63))
    if expiration is not None and expiration <= 0:
        raise ConfigError(f"{path}.nodeMetricExpirationSeconds", "nodeMetricExpiredSeconds should be a positive value")
    selectors = args.get("podSelectors") or []
    if not isinstance(selectors, list):
        raise ConfigError(f"{path}.podSelectors", "expected a list")
    pod_selectors = []
    for i, item in enumerate(selectors):
        entry = _map(item, f"{path}.podSelectors[{i}]")
        sel = _selector(entry.get("selector"), f"{path}.podSelectors[{i}].selector")
        if sel is not None:
            pod_selectors.append(sel)

    high = _thresholds(args.get("highThresholds"), f"{path}.highThresholds") or {}
    low = _thresholds(args.get("lowThresholds"), f"{path}.lowThresholds") or {}
    weights: dict[str, int] = {"cpu": 1, "memory": 1}
    for name in (*low, *high):
        weights[name] = 1
    configured = _weights(args.get("resourceWeights"), f"{path}.resourceWeights")
    if configured is not None:
        merged = dict(configured)
        for name, w in weights.items():
            if merged.get(name, 0) <= 0:
                merged[name] = w
        weights = merged
    top = NodePool(
        name=DEFAULT_NODE_POOL,
        node_selector=_selector(args.get("nodeSelector"), f"{path}.nodeSelector"),
        use_deviation_thresholds=_bool(args.get("useDeviationThresholds"), f"{path}.useDeviationThresholds", False),
        high_thresholds=high,
        low_thresholds=low,
        prod_high_thresholds=_thresholds(args.get("prodHighThresholds"), f"{path}.prodHighThresholds") or {},
        prod_low_thresholds=_thresholds(args.get("prodLowThresholds"), f"{path}.prodLowThresholds") or {},
        resource_weights=weights,
        anomaly_condition=_anomaly(args.get("anomalyCondition"), f"{path}.anomalyCondition", AnomalyCondition()),
    )
    _check_pool(top, path)
    pools_raw = args.get("nodePools") or []
    if not isinstance(pools_raw, list):
        raise ConfigError(f"{path}.nodePools", "expected a list")
    pools = [top] if (high or low) else []
    for i, item in enumerate(pools_raw):
        pools.append(_pool(_map(item, f"{path}.nodePools[{i}]"), f"{path}.nodePools[{i}]", top))
    if not pools:
        raise ConfigError(f"{path}.highThresholds", "no thresholds: set highThresholds/lowThresholds or nodePools")
    return LowNodeLoadArgs(
        paused=_bool(args.get("paused"), f"{path}.paused", False),
        dry_run=_bool(args.get("dryRun"), f"{path}.dryRun", False),
        number_of_nodes=number or 0,
        node_metric_expiration_seconds=expiration if expiration is not None else 180,
        evictable_namespaces=_namespaces(args.get("evictableNamespaces"), f"{path}.evictableNamespaces"),
        node_selector=top.node_selector,
        pod_selectors=pod_selectors,
        node_fit=_bool(args.get("nodeFit"), f"{path}.nodeFit", True),
        detector_cache_timeout=_duration(args.get("detectorCacheTimeout"), f"{path}.detectorCacheTimeout", 300.0),
        node_pools=pools,
    )


def _evictor_args(raw: Any, path: str) -> DefaultEvictorArgs:
    args = _map(raw, path)
    threshold = _map(args.get("priorityThreshold"), f"{path}.priorityThreshold")
    value = threshold.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{path}.priorityThreshold.value", f"expected an integer, got {value!r}")
    return DefaultEvictorArgs(
        evict_system_critical_pods=_bool(args.get("evictSystemCriticalPods"), f"{path}.evictSystemCriticalPods", False),
        evict_failed_bare_pods=_bool(args.get("evictFailedBarePods"), f"{path}.evictFailedBarePods", False),
        evict_local_storage_pods=_bool(args.get("evictLocalStoragePods"), f"{path}.evictLocalStoragePods", False),
        ignore_pvc_pods=_bool(args.get("ignorePvcPods"), f"{path}.ignorePvcPods", False),
        priority_threshold=value,
        label_selector=_selector(args.get("labelSelector"), f"{path}.labelSelector"),
    )


def _migration_args(raw: Any, path: str) -> MigrationControllerArgs:
    args = _map(raw, path)
    mode = args.get("defaultJobMode") or "ReservationFirst"
    if mode not in ("ReservationFirst", "EvictDirectly"):
        raise ConfigError(f"{path}.defaultJobMode", f'unsupported mode {mode!r}: "ReservationFirst" or "EvictDirectly"')
    qps = args.get("evictQPS", 10)
    try:
        qps_value = float(qps)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}.evictQPS", f"expected a number, got {qps!r}") from None
    if qps_value < 0:
        raise ConfigError(f"{path}.evictQPS", "must not be negative")
    per_node = _int(args.get("maxMigratingPerNode"), f"{path}.maxMigratingPerNode")
    return MigrationControllerArgs(
        dry_run=_bool(args.get("dryRun"), f"{path}.dryRun", False),
        max_migrating_per_node=2 if per_node is None else per_node,
        max_migrating_per_namespace=_int(args.get("maxMigratingPerNamespace"), f"{path}.maxMigratingPerNamespace"),
        max_migrating_per_workload=_int(args.get("maxMigratingPerWorkload"), f"{path}.maxMigratingPerWorkload"),
        max_unavailable_per_workload=_int(args.get("maxUnavailablePerWorkload"), f"{path}.maxUnavailablePerWorkload"),
        default_job_mode=str(mode),
        default_job_ttl=_duration(args.get("defaultJobTTL"), f"{path}.defaultJobTTL", 300.0),
        evict_qps=qps_value,
        evict_burst=_int(args.get("evictBurst"), f"{path}.evictBurst", minimum=1) or 1,
        namespaces=_namespaces(args.get("namespaces"), f"{path}.namespaces"),
    )


def parse_config(raw: Any) -> DeschedulerConfig:
    """Parse a ``DeschedulerConfiguration`` object (the YAML decoded).

    Exactly one profile is supported. Its ``plugins`` sections may enable ``LowNodeLoad`` (balance),
    ``MigrationController`` (evict) and ``DefaultEvictor`` (filter); LowNodeLoad is on when its
    pluginConfig is given or it is enabled in ``plugins.balance``.

    Raises:
        ConfigError: naming the field (``apiVersion``, ``profiles[0].pluginConfig[0].args.numberOfNodes``, ...).
    """
    obj = _map(raw, "<config>")
    if obj.get("apiVersion") not in (API_VERSION, None):
        raise ConfigError("apiVersion", f"expected {API_VERSION!r}, got {obj.get('apiVersion')!r}")
    if obj.get("kind") not in (KIND, None):
        raise ConfigError("kind", f"expected {KIND!r}, got {obj.get('kind')!r}")
    cfg = DeschedulerConfig(
        descheduling_interval=_duration(obj.get("deschedulingInterval"), "deschedulingInterval", 0.0),
        dry_run=_bool(obj.get("dryRun"), "dryRun", False),
        node_selector=_selector(obj.get("nodeSelector"), "nodeSelector"),
        max_pods_per_node=_int(obj.get("maxNoOfPodsToEvictPerNode"), "maxNoOfPodsToEvictPerNode"),
        max_pods_per_namespace=_int(obj.get("maxNoOfPodsToEvictPerNamespace"), "maxNoOfPodsToEvictPerNamespace"),
        max_pods_total=_int(obj.get("maxNoOfPodsToEvictTotal"), "maxNoOfPodsToEvictTotal"),
    )
    profiles = obj.get("profiles") or []
    if not isinstance(profiles, list) or len(profiles) != 1:
        raise ConfigError("profiles", "expected exactly one profile")
    prof = _map(profiles[0], "profiles[0]")
    cfg.profile_name = str(prof.get("name") or cfg.profile_name)
    plugins = _map(prof.get("plugins"), "profiles[0].plugins")
    enabled: set[str] = set()
    for point in ("deschedule", "balance", "evict", "filter"):
        for i, plugin in enumerate(_map(plugins.get(point), f"profiles[0].plugins.{point}").get("enabled") or []):
            name = _map(plugin, f"profiles[0].plugins.{point}.enabled[{i}]").get("name")
            if name not in KNOWN_PLUGINS:
                raise ConfigError(f"profiles[0].plugins.{point}.enabled[{i}].name", f"unknown plugin {name!r}")
            enabled.add(str(name))
    configs = prof.get("pluginConfig") or []
    if not isinstance(configs, list):
        raise ConfigError("profiles[0].pluginConfig", "expected a list")
    for i, entry in enumerate(configs):
        path = f"profiles[0].pluginConfig[{i}]"
        item = _map(entry, path)
        name = item.get("name")
        if name == "LowNodeLoad":
            cfg.low_node_load = parse_low_node_load_args(item.get("args"), f"{path}.args")
        elif name == "DefaultEvictor":
            cfg.evictor = _evictor_args(item.get("args"), f"{path}.args")
        elif name == "MigrationController":
            cfg.migration = _migration_args(item.get("args"), f"{path}.args")
            cfg.migration_enabled = True
        elif name == "DrainNodeController":
            if item.get("args") not in (None, {}):
                raise ConfigError(f"{path}.args", "DrainNodeController takes no args")
        else:
            raise ConfigError(f"{path}.name", f"unknown plugin {name!r}")
    cfg.migration_enabled = cfg.migration_enabled or "MigrationController" in enabled
    cfg.drain_enabled = "DrainNodeController" in enabled
    if cfg.drain_enabled and not cfg.migration_enabled:
        raise ConfigError(
            "profiles[0].plugins", "DrainNodeController needs MigrationController, which runs its PodMigrationJobs"
        )
    if "LowNodeLoad" in enabled and cfg.low_node_load is None:
        raise ConfigError("profiles[0].pluginConfig", "LowNodeLoad is enabled but has no args (thresholds)")
    return cfg


def load_config(path: Path) -> DeschedulerConfig:
    """Read and parse a configuration file (YAML or JSON).

    Raises:
        ConfigError: unreadable file (field ``<file>``), bad YAML, or an invalid field.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("<file>", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError("<file>", f"{path} is not valid YAML: {exc}") from None
    return parse_config(raw)
