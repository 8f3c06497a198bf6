"""NodeSLO as the agent applies it: the received spec merged over upstream's defaults.

Defaults follow ``pkg/util/sloconfig/nodeslo_config.go`` (``DefaultNodeSLOSpecConfig``): koordlet
merges the NodeSLO it receives over them again, so an absent NodeSLO or an empty
``resourceQOSStrategy`` still yields complete strategies.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from pydantic import ValidationError

from app.api.slo import NodeSLOSpec, ResourceQOS

log = logging.getLogger("agent.states")


def _class_qos(group_identity: int, wmark_min_adj: int, cat_end: int) -> dict[str, Any]:
    return {
        "cpuQOS": {
            "enable": False,
            "groupIdentity": group_identity,
            "schedIdle": 0,
            "coreExpeller": group_identity == 2,
        },
        "memoryQOS": {
            "enable": False,
            "minLimitPercent": 0,
            "lowLimitPercent": 0,
            "throttlingPercent": 0,
            "wmarkRatio": 95,
            "wmarkScalePermill": 20,
            "wmarkMinAdj": wmark_min_adj,
            "priorityEnable": 0,
            "priority": 0,
            "oomKillGroup": 0,
        },
        "resctrlQOS": {"enable": False, "catRangeStartPercent": 0, "catRangeEndPercent": cat_end, "mbaPercent": 100},
    }


#: Upstream's default NodeSLO spec (the parts the agent uses).
DEFAULT_SPEC: dict[str, Any] = {
    "resourceUsedThresholdWithBE": {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    },
    "resourceQOSStrategy": {
        "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
        "lsrClass": _class_qos(2, -25, 100),
        "lsClass": _class_qos(2, -25, 100),
        "beClass": _class_qos(-1, 50, 30),
        "systemClass": {
            **_class_qos(0, 0, 100),
            "memoryQOS": {
                **_class_qos(0, 0, 100)["memoryQOS"],
                "wmarkRatio": 0,
                "wmarkScalePermill": 50,
                "wmarkMinAdj": 0,
            },
        },
    },
    "cpuBurstStrategy": {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    },
    "systemStrategy": {"totalNetworkBandwidth": "0"},
}


def _merge(base: Any, over: Any) -> Any:
    """Deep merge: dict keys of ``over`` replace ``base``'s; ``None`` in ``over`` keeps the default."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if v is not None else base.get(k)
        return out
    return copy.deepcopy(over) if over is not None else base


def merged_spec(node_slo: dict[str, Any] | None) -> NodeSLOSpec:
    """The NodeSLO spec the agent applies: ``node_slo.spec`` merged over :data:`DEFAULT_SPEC`.

    A spec that does not validate against the NodeSLO model is ignored (logged) and the
    defaults apply, so a malformed object never reaches a cgroup.
    """
    spec = (node_slo or {}).get("spec") if isinstance(node_slo, dict) else None
    merged = _merge(DEFAULT_SPEC, spec if isinstance(spec, dict) else {})
    try:
        return NodeSLOSpec.model_validate(merged)
    except ValidationError as exc:
        name = ((node_slo or {}).get("metadata") or {}).get("name")
        log.warning("NodeSLO %s is malformed, using defaults: %s", name, exc.errors()[:3])
        return NodeSLOSpec.model_validate(copy.deepcopy(DEFAULT_SPEC))


def class_qos(spec: NodeSLOSpec, qos: str) -> ResourceQOS:
    """The ResourceQOS of a koord QoS class: LSE and LSR use ``lsrClass``, LS ``lsClass``, BE ``beClass``,
    SYSTEM ``systemClass``; an unknown class gets an empty ResourceQOS."""
    strategy = spec.resource_qos_strategy
    if strategy is None:
        return ResourceQOS()
    found = {
        "LSE": strategy.lsr_class,
        "LSR": strategy.lsr_class,
        "LS": strategy.ls_class,
        "BE": strategy.be_class,
        "SYSTEM": strategy.system_class,
    }.get(qos)
    return found or ResourceQOS()
