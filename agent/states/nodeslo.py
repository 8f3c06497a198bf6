"""NodeSLO as the agent applies it: the received spec merged over upstream's defaults, validated.

Defaults follow ``pkg/util/sloconfig/nodeslo_config.go`` (``DefaultNodeSLOSpecConfig``): koordlet
merges the NodeSLO it receives over them again, so an absent NodeSLO or an empty
``resourceQOSStrategy`` still yields complete strategies.

Validation follows the ``validate:"..."`` markers of upstream's ``apis/slo/v1alpha1/nodeslo_types.go``
(checked by ``pkg/util/sloconfig``'s validator): percents 0..100 (``cpuSuppressThresholdPercent``,
``memoryEvictThresholdPercent``, ``cpuEvictBESatisfaction*``, memory QoS, resctrl), the ``*Allocatable*``
percents >= 0, ``cpuBurstPercent`` 1..10000, ``cfsQuotaBurstPercent`` >= 100, ``wmarkMinAdj`` -25..50,
``groupIdentity`` -1..2, ...; the ``gtfield`` / ``ltfield`` pairs (``memoryEvictLowerPercent`` <
``memoryEvictThresholdPercent``, ``catRangeStartPercent`` < ``catRangeEndPercent``, ...) are checked when
both are set after the merge; every integer fits int64 (upstream's fields are ``*int64``); each
``blkioQOS.blocks[]`` has a name, a type of upstream's (device | volumegroup | podvolume) and ``ioCfg`` values in
``IOCfg``'s ranges (bps / iops >= 0, ``ioWeightPercent`` 1..100); each ``networkQOS`` request / limit is a
non-negative quantity or a 0..100 % percent. A NodeSLO
that does not parse or breaks a range is refused as a whole: :class:`NodeSLOIntake` keeps the last good
spec in force (the defaults when none was good yet), so a threshold of 1000000 % never plans a quota.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from app.api.quantity import QuantityError, int_value
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
    # upstream DefaultSystemStrategy: min_free_kbytes 1 % of memory, watermark_scale_factor 150, no memcg reaper
    "systemStrategy": {
        "minFreeKbytesFactor": 100,
        "watermarkScaleFactor": 150,
        "memcgReapBackGround": 0,
        "totalNetworkBandwidth": "0",
    },
}


def _merge(base: Any, over: Any) -> Any:
    """Deep merge: dict keys of ``over`` replace ``base``'s; ``None`` in ``over`` keeps the default."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if v is not None else base.get(k)
        return out
    return copy.deepcopy(over) if over is not None else base


#: Largest int64: upstream's NodeSLO integers are ``*int64``.
INT64_MAX = (1 << 63) - 1

_QOS_CLASSES = ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")

#: ``(field path under spec, minimum, maximum)`` inclusive (None: int64 bound), upstream's ``validate`` markers.
RANGES: tuple[tuple[str, int | None, int | None], ...] = (
    ("resourceUsedThresholdWithBE.cpuSuppressThresholdPercent", 0, 100),
    ("resourceUsedThresholdWithBE.cpuSuppressMinPercent", 0, 100),
    ("resourceUsedThresholdWithBE.memoryEvictThresholdPercent", 0, 100),
    ("resourceUsedThresholdWithBE.memoryEvictLowerPercent", 0, 100),
    ("resourceUsedThresholdWithBE.memoryAllocatableEvictThresholdPercent", 0, None),
    ("resourceUsedThresholdWithBE.memoryAllocatableEvictLowerPercent", 0, None),
    ("resourceUsedThresholdWithBE.cpuEvictBESatisfactionUpperPercent", 0, 100),
    ("resourceUsedThresholdWithBE.cpuEvictBESatisfactionLowerPercent", 0, 100),
    ("resourceUsedThresholdWithBE.cpuEvictBEUsageThresholdPercent", 0, 100),
    ("resourceUsedThresholdWithBE.cpuEvictTimeWindowSeconds", 1, None),
    ("resourceUsedThresholdWithBE.cpuEvictThresholdPercent", 0, 100),
    ("resourceUsedThresholdWithBE.cpuEvictLowerPercent", 0, 100),
    ("resourceUsedThresholdWithBE.cpuAllocatableEvictThresholdPercent", 0, None),
    ("resourceUsedThresholdWithBE.cpuAllocatableEvictLowerPercent", 0, None),
    ("resourceUsedThresholdWithBE.allocatableEvictPriorityThreshold", 0, 7999),
    *(
        (f"resourceQOSStrategy.{cls}.{field}", lo, hi)
        for cls in _QOS_CLASSES
        for field, lo, hi in (
            ("cpuQOS.groupIdentity", -1, 2),
            ("cpuQOS.schedIdle", 0, 1),
            ("memoryQOS.minLimitPercent", 0, 100),
            ("memoryQOS.lowLimitPercent", 0, 100),
            ("memoryQOS.throttlingPercent", 0, 100),
            ("memoryQOS.wmarkRatio", 0, 100),
            ("memoryQOS.wmarkScalePermill", 1, 1000),
            ("memoryQOS.wmarkMinAdj", -25, 50),
            ("memoryQOS.priorityEnable", 0, 1),
            ("memoryQOS.priority", 0, 12),
            ("memoryQOS.oomKillGroup", 0, 1),
            ("memoryQOS.pageCacheLimitPercent", 0, 100),
            ("resctrlQOS.catRangeStartPercent", 0, 100),
            ("resctrlQOS.catRangeEndPercent", 0, 100),
            ("resctrlQOS.mbaPercent", 0, 100),
        )
    ),
    ("cpuBurstStrategy.cpuBurstPercent", 1, 10000),
    ("cpuBurstStrategy.cfsQuotaBurstPercent", 100, None),
    ("cpuBurstStrategy.cfsQuotaBurstPeriodSeconds", -1, None),
    ("cpuBurstStrategy.sharePoolThresholdPercent", 0, 100),
    ("systemStrategy.minFreeKbytesFactor", 1, None),
    ("systemStrategy.watermarkScaleFactor", 1, 400),
    ("systemStrategy.memcgReapBackGround", 0, 1),
    ("systemStrategy.pageCacheLimitEnabled", 0, 1),
)

#: ``(lower field, upper field)``: lower < upper when both are set (upstream's ``ltfield`` / ``gtfield``).
ORDERED: tuple[tuple[str, str], ...] = (
    *(
        (f"resourceUsedThresholdWithBE.{lo}", f"resourceUsedThresholdWithBE.{hi}")
        for lo, hi in (
            ("memoryEvictLowerPercent", "memoryEvictThresholdPercent"),
            ("memoryAllocatableEvictLowerPercent", "memoryAllocatableEvictThresholdPercent"),
            ("cpuEvictBESatisfactionLowerPercent", "cpuEvictBESatisfactionUpperPercent"),
            ("cpuEvictLowerPercent", "cpuEvictThresholdPercent"),
            ("cpuAllocatableEvictLowerPercent", "cpuAllocatableEvictThresholdPercent"),
        )
    ),
    *(
        (
            f"resourceQOSStrategy.{cls}.resctrlQOS.catRangeStartPercent",
            f"resourceQOSStrategy.{cls}.resctrlQOS.catRangeEndPercent",
        )
        for cls in _QOS_CLASSES
    ),
)


def _get(tree: Any, path: str) -> Any:
    """The value at a dotted ``path`` of nested dicts, None when any part is missing."""
    for part in path.split("."):
        if not isinstance(tree, dict):
            return None
        tree = tree.get(part)
    return tree


def _oversized(tree: Any, path: str) -> list[tuple[str, Any]]:
    """``(path, value)`` of every integer beyond int64 in ``tree`` (lists indexed ``[i]``)."""
    if isinstance(tree, bool):
        return []
    if isinstance(tree, int):
        return [(path, tree)] if not -INT64_MAX - 1 <= tree <= INT64_MAX else []
    items: list[tuple[str, Any]] = []
    if isinstance(tree, dict):
        items = [(f"{path}.{k}" if path else str(k), v) for k, v in tree.items()]
    elif isinstance(tree, list):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(tree)]
    return [found for sub, v in items for found in _oversized(v, sub)]


def spec_problems(spec: NodeSLOSpec) -> list[tuple[str, str]]:
    """``(field, message)`` for every value of a merged, parsed spec outside upstream's ranges (see the module
    docstring); ``field`` is the JSON path under ``spec`` (``resourceUsedThresholdWithBE.cpuSuppressThresholdPercent``).
    Empty when the spec is valid. ``extensions`` is free-form and not checked."""
    tree = spec.model_dump(by_alias=True, exclude_none=True, exclude={"extensions"})
    problems = [(f, f"{v} is beyond int64") for f, v in _oversized(tree, "")]
    for path, lo, hi in RANGES:
        value = _get(tree, path)
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            continue
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            allowed = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
            problems.append((path, f"{value} is outside {allowed}"))
    for low_path, high_path in ORDERED:
        low, high = _get(tree, low_path), _get(tree, high_path)
        if isinstance(low, int) and isinstance(high, int) and not low < high:
            problems.append((low_path, f"{low} must be below {high_path.rsplit('.', 1)[1]} ({high})"))
    for cls in _QOS_CLASSES:
        blkio = f"resourceQOSStrategy.{cls}.blkioQOS"
        problems += _blocks_problems(blkio, _get(tree, blkio))
        problems += _network_problems(
            f"resourceQOSStrategy.{cls}.networkQOS", _get(tree, f"resourceQOSStrategy.{cls}.networkQOS")
        )
    return problems


#: ``blkioQOS.blocks[].ioCfg`` fields and their inclusive ranges (upstream ``IOCfg`` ``validate`` markers).
IO_RANGES: tuple[tuple[str, int, int | None], ...] = (
    ("readIOPS", 0, None),
    ("writeIOPS", 0, None),
    ("readBPS", 0, None),
    ("writeBPS", 0, None),
    ("ioWeightPercent", 1, 100),
    ("readLatency", 0, None),
    ("writeLatency", 0, None),
    ("readLatencyPercent", 0, 100),
    ("writeLatencyPercent", 0, 100),
)
#: Upstream's block types (``BlockTypeDevice``, ``BlockTypeVolumeGroup``, ``BlockTypePodVolume``).
BLOCK_TYPES = ("device", "volumegroup", "podvolume")


def _blocks_problems(path: str, cfg: Any) -> list[tuple[str, str]]:
    """Problems of a class's ``blkioQOS``: each block needs a name and a known type, its ``ioCfg`` values in range."""
    if not isinstance(cfg, dict):
        return []
    problems: list[tuple[str, str]] = []
    for i, block in enumerate(cfg.get("blocks") or []):
        where = f"{path}.blocks[{i}]"
        if not block.get("name"):
            problems.append((f"{where}.name", "a block needs a name"))
        if block.get("type") not in BLOCK_TYPES:
            problems.append((f"{where}.type", f"{block.get('type')!r} is not one of {', '.join(BLOCK_TYPES)}"))
        io = block.get("ioCfg") or {}
        for name, lo, hi in IO_RANGES:
            value = io.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            if value < lo or (hi is not None and value > hi):
                allowed = f"[{lo}, {hi if hi is not None else 'inf'}]"
                problems.append((f"{where}.ioCfg.{name}", f"{value} is outside {allowed}"))
    return problems


def network_value(value: Any, total: int) -> int:
    """bits/s of a ``networkQOS`` request or limit: an integer or quantity (``"100M"``), or a percent string
    (``"30%"``) of ``total`` (``systemStrategy.totalNetworkBandwidth``, bits/s).

    Raises:
        ValueError: not a non-negative quantity, or a percent outside 0..100.
    """
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = int(value[:-1])
        except ValueError:
            raise ValueError(f"{value!r} is not an integer percent") from None
        if not 0 <= pct <= 100:
            raise ValueError(f"{value!r} is outside [0%, 100%]")
        return total * pct // 100
    try:
        bps = int_value(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if bps < 0:
        raise ValueError(f"{value!r} is negative")
    return bps


def _network_problems(path: str, cfg: Any) -> list[tuple[str, str]]:
    """Problems of a class's ``networkQOS``: each request / limit a non-negative quantity or a 0..100 % percent."""
    if not isinstance(cfg, dict):
        return []
    problems: list[tuple[str, str]] = []
    for name in ("ingressRequest", "ingressLimit", "egressRequest", "egressLimit"):
        if cfg.get(name) is None:
            continue
        try:
            network_value(cfg[name], 0)
        except ValueError as exc:
            problems.append((f"{path}.{name}", str(exc)))
    return problems


class InvalidNodeSLO(ValueError):
    """A NodeSLO refused on intake.

    Attributes:
        problems: ``(field, message)`` pairs; the field is ``spec`` when the spec does not parse.
    """

    def __init__(self, name: str | None, problems: list[tuple[str, str]]) -> None:
        text = "; ".join(f"spec.{f} = {m}" if f != "spec" else m for f, m in problems)
        super().__init__(f"NodeSLO {name}: {text}")
        self.problems = problems


def validated_spec(node_slo: dict[str, Any] | None) -> NodeSLOSpec:
    """``node_slo.spec`` merged over :data:`DEFAULT_SPEC`, parsed and range-checked; an absent NodeSLO
    (None) or spec gives the defaults.

    Raises:
        InvalidNodeSLO: the merged spec does not parse as a NodeSLO spec, or a value is out of range.
    """
    spec = (node_slo or {}).get("spec") if isinstance(node_slo, dict) else None
    name = ((node_slo or {}).get("metadata") or {}).get("name") if isinstance(node_slo, dict) else None
    merged = _merge(DEFAULT_SPEC, spec if isinstance(spec, dict) else {})
    try:
        parsed = NodeSLOSpec.model_validate(merged)
    except ValidationError as exc:
        problems = [
            (".".join(str(p) for p in err["loc"]) or "spec", f"{err.get('input')!r}: {err['msg']}")
            for err in exc.errors()[:3]
        ]
        raise InvalidNodeSLO(name, problems) from None
    problems = spec_problems(parsed)
    if problems:
        raise InvalidNodeSLO(name, problems)
    return parsed


def default_spec() -> NodeSLOSpec:
    """Upstream's default NodeSLO spec, parsed."""
    return NodeSLOSpec.model_validate(copy.deepcopy(DEFAULT_SPEC))


def merged_spec(node_slo: dict[str, Any] | None) -> NodeSLOSpec:
    """The NodeSLO spec the agent applies without history: :func:`validated_spec`, or the defaults (logged)
    when it is refused, so a malformed object never reaches a cgroup. The agent itself uses
    :class:`NodeSLOIntake`, which keeps the last good spec instead."""
    try:
        return validated_spec(node_slo)
    except InvalidNodeSLO as exc:
        log.warning("%s; using the defaults", exc)
        return default_spec()


_UNSET = object()


class NodeSLOIntake:
    """Every NodeSLO the agent receives passes here; the spec in force is :attr:`spec`.

    A refused NodeSLO (:func:`validated_spec` raises) keeps the last good spec, or the defaults when no
    NodeSLO was good yet; it is logged (one line naming the fields and values) and reported to
    ``on_refused(field)`` once per field, each only the first time that same NodeSLO content is seen
    (intake runs whenever any state changes). An absent NodeSLO is no error: the defaults apply.

    Args:
        on_refused: called with the field path of each problem of a newly refused NodeSLO (the metric).

    Attributes:
        spec: the spec in force. refused: whether the newest NodeSLO was refused.
    """

    def __init__(self, on_refused: Callable[[str], None] | None = None) -> None:
        self.on_refused = on_refused
        self.spec: NodeSLOSpec = default_spec()
        self.refused = False
        self._last_refused: Any = _UNSET

    def update(self, node_slo: dict[str, Any] | None) -> NodeSLOSpec:
        """Take in the newest NodeSLO (None: none exists) and return the spec in force."""
        try:
            self.spec = validated_spec(node_slo)
        except InvalidNodeSLO as exc:
            self.refused = True
            raw = node_slo.get("spec") if isinstance(node_slo, dict) else None
            if raw != self._last_refused:
                self._last_refused = copy.deepcopy(raw)
                log.warning("%s; keeping the last good NodeSLO spec", exc)
                for field in dict.fromkeys(f for f, _ in exc.problems):
                    if self.on_refused is not None:
                        self.on_refused(field)
            return self.spec
        self.refused = False
        self._last_refused = _UNSET
        return self.spec


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
