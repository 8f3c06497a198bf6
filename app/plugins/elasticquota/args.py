"""ElasticQuotaArgs: decoding, upstream defaults and validation.

Defaults follow ``pkg/scheduler/apis/config/v1/defaults.go`` (``SetDefaults_ElasticQuotaArgs``),
validation ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``
(``ValidateElasticQuotaArgs``). Field names are upstream's JSON names; durations are Go duration
strings and are held in seconds; ResourceLists are held as internal integers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.api.quantity import QuantityError, parse_resource_list
from app.framework.config import ArgsError, duration_arg

#: ``math.MaxInt64 / 5`` as upstream's default max of the default and system quotas (cpu in cores).
_MAX_DIV5 = (2**63 - 1) // 5
DEFAULT_QUOTA_GROUP_MAX: dict[str, int] = {"cpu": _MAX_DIV5 * 1000, "memory": _MAX_DIV5}
DEFAULT_DELAY_EVICT_TIME = 120.0
DEFAULT_REVOKE_POD_INTERVAL = 1.0
DEFAULT_QUOTA_GROUP_NAMESPACE = "koordinator-system"

_FIELDS = {
    "delayEvictTime",
    "revokePodInterval",
    "defaultQuotaGroupMax",
    "systemQuotaGroupMax",
    "quotaGroupNamespace",
    "monitorAllQuotas",
    "enableCheckParentQuota",
    "enableRuntimeQuota",
    "enableMinQuotaScale",
    "disableDefaultQuotaPreemption",
    "enableQueueHint",
    "quotaSnapshotUpdateInterval",
    "hookPlugins",
    "enablePreemption",
}


@dataclass(slots=True)
class ElasticQuotaArgs:
    """Plugin args after defaulting.

    Attributes:
        delay_evict_time: seconds ``used > runtime`` must last before the revoke controller evicts.
        revoke_pod_interval: seconds between revoke cycles.
        default_quota_group_max / system_quota_group_max: internal-unit max of the two reserved quotas.
        quota_group_namespace: namespace of the reserved quotas.
        monitor_all_quotas: run the over-use revoke loop (needs enable_runtime_quota).
        enable_check_parent_quota: PreFilter also checks every ancestor below the root.
        enable_runtime_quota: compare against runtime (else against max).
        enable_min_quota_scale: scale children's min down when their sum exceeds the parent's total.
        disable_default_quota_preemption: pods of the default quota are never preemption victims.
        enable_preemption: koordinator-py's stand-in for listing ElasticQuota under the profile's
            ``postFilter`` plugins (as upstream's shipped scheduler-config.yaml does, so on by default): a
            pod ElasticQuota's PreFilter rejects for its quota preempts lower-priority pods of that quota
            inside the service (:meth:`~app.plugins.elasticquota.plugin.ElasticQuota.select_candidates`).
    """

    delay_evict_time: float = DEFAULT_DELAY_EVICT_TIME
    revoke_pod_interval: float = DEFAULT_REVOKE_POD_INTERVAL
    default_quota_group_max: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_QUOTA_GROUP_MAX))
    system_quota_group_max: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_QUOTA_GROUP_MAX))
    quota_group_namespace: str = DEFAULT_QUOTA_GROUP_NAMESPACE
    monitor_all_quotas: bool = False
    enable_check_parent_quota: bool = False
    enable_runtime_quota: bool = True
    enable_min_quota_scale: bool = True
    disable_default_quota_preemption: bool = True
    enable_preemption: bool = True


def _bool(raw: dict[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ArgsError(key, f"expected true or false, got {value!r}")
    return value


def _resources(raw: dict[str, Any], key: str, default: dict[str, int]) -> dict[str, int]:
    value = raw.get(key)
    if not value:
        return dict(default)
    try:
        return parse_resource_list(value, field=key)
    except QuantityError as exc:
        raise ArgsError(key, str(exc)) from None


def decode_args(raw: dict[str, Any]) -> ElasticQuotaArgs:
    """Decode ``pluginConfig[].args`` of ElasticQuota, apply upstream defaults, validate.

    Raises:
        ArgsError: unknown field, wrong type, or a value upstream's validation rejects, with
            upstream's message (``elasticQuotaArgs error, DelayEvictTime should be a positive value``).
    """
    extra = set(raw) - _FIELDS
    if extra:
        raise ArgsError(sorted(extra)[0], "unknown field")
    args = ElasticQuotaArgs()
    args.delay_evict_time = duration_arg(raw, "delayEvictTime", DEFAULT_DELAY_EVICT_TIME)
    args.revoke_pod_interval = duration_arg(raw, "revokePodInterval", DEFAULT_REVOKE_POD_INTERVAL)
    args.default_quota_group_max = _resources(raw, "defaultQuotaGroupMax", DEFAULT_QUOTA_GROUP_MAX)
    args.system_quota_group_max = _resources(raw, "systemQuotaGroupMax", DEFAULT_QUOTA_GROUP_MAX)
    namespace = raw.get("quotaGroupNamespace") or DEFAULT_QUOTA_GROUP_NAMESPACE
    if not isinstance(namespace, str):
        raise ArgsError("quotaGroupNamespace", f"expected a string, got {namespace!r}")
    args.quota_group_namespace = namespace
    args.monitor_all_quotas = _bool(raw, "monitorAllQuotas", False)
    args.enable_check_parent_quota = _bool(raw, "enableCheckParentQuota", False)
    args.enable_runtime_quota = _bool(raw, "enableRuntimeQuota", True)
    args.enable_min_quota_scale = _bool(raw, "enableMinQuotaScale", True)
    args.disable_default_quota_preemption = _bool(raw, "disableDefaultQuotaPreemption", True)
    args.enable_preemption = _bool(raw, "enablePreemption", True)
    for key, values in (
        ("defaultQuotaGroupMax", args.default_quota_group_max),
        ("systemQuotaGroupMax", args.system_quota_group_max),
    ):
        for name in sorted(values):
            if values[name] < 0:
                raise ArgsError(
                    f"{key}.{name}",
                    f"elasticQuotaArgs error, {key} should be a positive value, resourceName:{name}, "
                    f"got {raw[key][name]}",
                )
    if args.delay_evict_time < 0:
        raise ArgsError("delayEvictTime", "elasticQuotaArgs error, DelayEvictTime should be a positive value")
    if args.revoke_pod_interval < 0:
        raise ArgsError("revokePodInterval", "elasticQuotaArgs error, RevokePodCycle should be a positive value")
    return args
