"""The NodeSLO parts of the slo-controller ConfigMap and the NodeSLO spec they give each node.

Follows upstream's ``pkg/slo-controller/nodeslo/nodeslo_cm_event_handler.go`` and
``resource_strategy.go`` with the defaults of ``pkg/util/sloconfig/nodeslo_config.go``:

- keys ``resource-threshold-config``, ``resource-qos-config``, ``cpu-burst-config``,
  ``system-config`` (each ``{"clusterStrategy": {...}, "nodeStrategies": [{name, nodeSelector, ...}]}``)
  and ``host-application-config`` (``{"applications": [...], "nodeConfigs": [...]}``);
- an absent key gives its defaults; a malformed key keeps the previous value of that key only
  (and is reported); the cluster strategy is merged over the defaults, each node strategy over
  the cluster strategy;
- per node and per part, the first node strategy whose ``nodeSelector`` matches the node's
  labels wins, else the cluster strategy; node annotation ``node.koordinator.sh/network-bandwidth``
  overrides ``systemStrategy.totalNetworkBandwidth``.

Without ``resource-qos-config`` the NodeSLO carries an empty ``resourceQOSStrategy`` (the node
agent fills its defaults), as upstream.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from app.api.labelselector import SelectorError, selector_matches
from app.api.quantity import QuantityError, parse
from app.api.slo import (
    CPUBurstStrategy,
    HostApplicationSpec,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
)
from app.manager.mergecfg import merge_cfg
from app.server.wire import describe_validation_error

ANNOTATION_NODE_BANDWIDTH = "node.koordinator.sh/network-bandwidth"

#: ``DefaultResourceThresholdStrategy()``.
DEFAULT_THRESHOLD: dict[str, Any] = {
    "enable": False,
    "cpuSuppressThresholdPercent": 65,
    "cpuSuppressPolicy": "cpuset",
    "memoryEvictThresholdPercent": 70,
    "cpuEvictPolicy": "evictByRealLimit",
}
#: ``DefaultCPUBurstStrategy()``.
DEFAULT_CPU_BURST: dict[str, Any] = {
    "policy": "none",
    "cpuBurstPercent": 1000,
    "cfsQuotaBurstPercent": 300,
    "cfsQuotaBurstPeriodSeconds": -1,
    "sharePoolThresholdPercent": 50,
}
#: ``DefaultSystemStrategy()``.
DEFAULT_SYSTEM: dict[str, Any] = {"totalNetworkBandwidth": "0"}

#: ConfigMap key -> (NodeSLO spec field, pydantic model checking the types, defaults).
PARTS: dict[str, tuple[str, type[BaseModel], dict[str, Any]]] = {
    "resource-threshold-config": ("resourceUsedThresholdWithBE", ResourceThresholdStrategy, DEFAULT_THRESHOLD),
    "resource-qos-config": ("resourceQOSStrategy", ResourceQOSStrategy, {}),
    "cpu-burst-config": ("cpuBurstStrategy", CPUBurstStrategy, DEFAULT_CPU_BURST),
    "system-config": ("systemStrategy", SystemStrategy, DEFAULT_SYSTEM),
}
HOST_APPLICATION_KEY = "host-application-config"


class SLOConfigError(ValueError):
    """One key of the ConfigMap cannot be used; the message names the key and the field."""


@dataclass(frozen=True, slots=True)
class PartConfig:
    """One strategy part: the cluster strategy and ``(name, nodeSelector, merged strategy)`` per node strategy."""

    cluster: dict[str, Any]
    nodes: tuple[tuple[str, dict[str, Any] | None, dict[str, Any]], ...] = ()


@dataclass(frozen=True, slots=True)
class SLOConfig:
    """Every NodeSLO part of the ConfigMap, merged (``SLOCfg``)."""

    parts: dict[str, PartConfig] = field(
        default_factory=lambda: {k: PartConfig(dict(d)) for k, (_, _, d) in PARTS.items()}
    )
    host_apps: list[dict[str, Any]] = field(default_factory=list)
    host_app_nodes: tuple[tuple[dict[str, Any] | None, list[dict[str, Any]]], ...] = ()


def _check(model: type[BaseModel], obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise SLOConfigError(f"{where}: expected a JSON object")
    try:
        model.model_validate(obj, strict=True)
    except ValidationError as exc:
        raise SLOConfigError(f"{where}.{describe_validation_error(exc)}") from None
    return obj


def _load(text: str, key: str) -> dict[str, Any]:
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SLOConfigError(f"{key}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise SLOConfigError(f"{key}: expected a JSON object")
    return raw


def parse_part(key: str, text: str) -> PartConfig:
    """Parse one strategy key (``resource-threshold-config``, ...).

    Raises:
        SLOConfigError: not JSON, or a field of the wrong type.
    """
    _, model, defaults = PARTS[key]
    raw = _load(text, key)
    cluster = merge_cfg(defaults, _check(model, raw.get("clusterStrategy") or {}, f"{key}.clusterStrategy"))
    nodes = []
    entries = raw.get("nodeStrategies") or []
    if not isinstance(entries, list):
        raise SLOConfigError(f"{key}.nodeStrategies: expected a list")
    for i, entry in enumerate(entries):
        where = f"{key}.nodeStrategies[{i}]"
        if not isinstance(entry, dict):
            raise SLOConfigError(f"{where}: expected an object")
        body = {k: v for k, v in entry.items() if k not in ("name", "nodeSelector")}
        nodes.append(
            (str(entry.get("name") or ""), entry.get("nodeSelector"), merge_cfg(cluster, _check(model, body, where)))
        )
    return PartConfig(cluster, tuple(nodes))


def parse_host_apps(
    text: str,
) -> tuple[list[dict[str, Any]], tuple[tuple[dict[str, Any] | None, list[dict[str, Any]]], ...]]:
    """Parse ``host-application-config``: (cluster applications, (nodeSelector, applications) per node config).

    Raises:
        SLOConfigError: not JSON, or an application of the wrong shape.
    """
    raw = _load(text, HOST_APPLICATION_KEY)

    def apps(value: Any, where: str) -> list[dict[str, Any]]:
        if not isinstance(value or [], list):
            raise SLOConfigError(f"{where}: expected a list")
        return [_check(HostApplicationSpec, a, f"{where}[{i}]") for i, a in enumerate(value or [])]

    nodes = []
    for i, entry in enumerate(raw.get("nodeConfigs") or []):
        if not isinstance(entry, dict):
            raise SLOConfigError(f"{HOST_APPLICATION_KEY}.nodeConfigs[{i}]: expected an object")
        nodes.append(
            (entry.get("nodeSelector"), apps(entry.get("applications"), f"{HOST_APPLICATION_KEY}.nodeConfigs[{i}]"))
        )
    return apps(raw.get("applications"), f"{HOST_APPLICATION_KEY}.applications"), tuple(nodes)


def parse_slo_config(data: Mapping[str, str] | None, old: SLOConfig) -> tuple[SLOConfig, list[str]]:
    """The NodeSLO config of the ConfigMap ``data`` (None: the ConfigMap is gone -> defaults).

    Returns:
        (the new config, one message per key that was malformed and kept its previous value).
    """
    if data is None:
        return SLOConfig(), []
    errors: list[str] = []
    parts: dict[str, PartConfig] = {}
    for key, (_, _, defaults) in PARTS.items():
        if key not in data:
            parts[key] = PartConfig(dict(defaults))
            continue
        try:
            parts[key] = parse_part(key, data[key])
        except SLOConfigError as exc:
            errors.append(str(exc))
            parts[key] = old.parts[key]
    cfg = SLOConfig(parts=parts)
    if HOST_APPLICATION_KEY in data:
        try:
            apps, nodes = parse_host_apps(data[HOST_APPLICATION_KEY])
            cfg = replace(cfg, host_apps=apps, host_app_nodes=nodes)
        except SLOConfigError as exc:
            errors.append(str(exc))
            cfg = replace(cfg, host_apps=old.host_apps, host_app_nodes=old.host_app_nodes)
    return cfg, errors


def _first_match(selectors: list[tuple[dict[str, Any] | None, Any]], labels: Mapping[str, str]) -> Any:
    for selector, value in selectors:
        try:
            if selector_matches(selector, labels):
                return value
        except SelectorError:
            continue
    return None


def node_slo_spec(cfg: SLOConfig, labels: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    """The ``NodeSLO.spec`` of a node with these labels and annotations (``getNodeSLOSpec``)."""
    spec: dict[str, Any] = {}
    for key, (field_name, _, _) in PARTS.items():
        part = cfg.parts[key]
        chosen = _first_match([(sel, strategy) for _, sel, strategy in part.nodes], labels)
        spec[field_name] = copy.deepcopy(chosen if chosen is not None else part.cluster)
    bandwidth = annotations.get(ANNOTATION_NODE_BANDWIDTH)
    if bandwidth is not None:
        try:
            parse(bandwidth)
            spec["systemStrategy"]["totalNetworkBandwidth"] = bandwidth
        except QuantityError:
            del spec["systemStrategy"]  # upstream: the part errors and is left nil
    apps = _first_match(list(cfg.host_app_nodes), labels)
    apps = apps if apps is not None else cfg.host_apps
    if apps:
        spec["hostApplications"] = copy.deepcopy(apps)
    return spec
