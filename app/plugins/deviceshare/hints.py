"""A pod's device allocation hints and joint-allocation request (upstream ``apis/extension/device_share.go``,
``deviceshare/utils.go`` ``parsePodDeviceShareExtensions`` / ``newHintSelectors``).

``scheduling.koordinator.sh/device-allocate-hint``: device type -> ``DeviceHint``::

    {"rdma": {"selector": {"matchLabels": {"type": "fullNIC"}},
              "vfSelector": {"matchLabels": {"type": "general"}},
              "allocateStrategy": "RequestsAsCount",        # or "ApplyForAll"
              "requiredTopologyScope": "PCIe",              # gpu: "PCIe" | "NUMANode" | "Node"
              "exclusivePolicy": "DeviceLevel"}}            # or "PCIeLevel"

``scheduling.koordinator.sh/device-joint-allocate``: ``{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}``.

Malformed JSON or selectors raise :class:`HintError` with upstream's message prefix; the plugin answers
it UnschedulableAndUnresolvable at PreFilter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.api.labelselector import SelectorError, selector_matches
from app.plugins.deviceshare import names as n

APPLY_FOR_ALL = "ApplyForAll"
REQUESTS_AS_COUNT = "RequestsAsCount"
EXCLUSIVE_DEVICE_LEVEL = "DeviceLevel"
EXCLUSIVE_PCIE_LEVEL = "PCIeLevel"
SCOPE_SAME_PCIE = "SamePCIe"
#: ``DeviceTopologyScopeLevel``: a required scope may be met at its level or a finer one.
TOPOLOGY_SCOPE_LEVEL: dict[str, int] = {"Device": 4, "PCIe": 3, "NUMANode": 2, "Node": 1}


class HintError(ValueError):
    """A hint or joint-allocate annotation is malformed; the message is upstream's (with our detail)."""


@dataclass(frozen=True, slots=True)
class DeviceHint:
    """One type's ``DeviceHint``: selectors (``metav1.LabelSelector`` dicts, None = none) and strategies."""

    selector: Mapping[str, Any] | None = None
    vf_selector: Mapping[str, Any] | None = None
    allocate_strategy: str = ""
    required_topology_scope: str = ""
    exclusive_policy: str = ""
    #: (selector or VF selector, labels) -> match, memoised: nodes of a cluster repeat the same device labels.
    _memo: dict[tuple[bool, frozenset[tuple[str, str]]], bool] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @property
    def must_allocate_vf(self) -> bool:
        """``mustAllocateVF``: a ``vfSelector`` asks one VF per device given."""
        return self.vf_selector is not None

    def _matches(self, vf: bool, labels: Mapping[str, str]) -> bool:
        selector = self.vf_selector if vf else self.selector
        if selector is None:
            return True
        key = (vf, frozenset(labels.items()))
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = selector_matches(selector, labels)
        return found

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a device with ``labels`` passes the ``selector`` (no selector: every device)."""
        return self._matches(False, labels)

    def selects_vfs(self, labels: Mapping[str, str]) -> bool:
        """Whether a VF group with ``labels`` passes the ``vfSelector`` (no selector: every group)."""
        return self._matches(True, labels)


@dataclass(frozen=True, slots=True)
class JointAllocate:
    """``DeviceJointAllocate``: the types allocated together (the first is primary) and the required scope."""

    device_types: tuple[str, ...]
    required_scope: str = ""


def _obj(value: str, what: str) -> Any:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise HintError(f"invalid {what} annotation, err: {exc}") from None


def _str(raw: Mapping[str, Any], key: str, what: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise HintError(f"invalid {what} annotation, err: {key}: expected a string, got {value!r}")
    return value


def _selector(raw: Any, label: str, kind: str) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise HintError(f"invalid {label} of DeviceHint, deviceType: {kind}, err: expected a label selector object")
    try:
        selector_matches(raw, {})  # validates operators and values
    except SelectorError as exc:
        raise HintError(f"invalid {label} of DeviceHint, deviceType: {kind}, err: {exc}") from None
    return raw


def parse_hints(annotations: Mapping[str, str]) -> dict[str, DeviceHint]:
    """The pod's ``device-allocate-hint`` (type -> hint; ``{}`` when absent; null hints dropped).

    Raises:
        HintError: ``invalid DeviceAllocateHint annotation, err: ...`` (not JSON, not an object, a field of
            the wrong type) or ``invalid Selector of DeviceHint, deviceType: rdma, err: ...`` (and
            ``VFSelector``) for a malformed selector.
    """
    raw = annotations.get(n.ANNOTATION_DEVICE_ALLOCATE_HINT)
    if raw is None:
        return {}
    what = "DeviceAllocateHint"
    data = _obj(raw, what)
    if not isinstance(data, dict):
        raise HintError(f"invalid {what} annotation, err: expected a JSON object of device type to hint")
    out: dict[str, DeviceHint] = {}
    for kind, hint in data.items():
        if hint is None:
            continue
        if not isinstance(hint, dict):
            raise HintError(f"invalid {what} annotation, err: {kind}: expected an object")
        out[str(kind)] = DeviceHint(
            selector=_selector(hint.get("selector"), "Selector", kind),
            vf_selector=_selector(hint.get("vfSelector"), "VFSelector", kind),
            allocate_strategy=_str(hint, "allocateStrategy", what),
            required_topology_scope=_str(hint, "requiredTopologyScope", what),
            exclusive_policy=_str(hint, "exclusivePolicy", what),
        )
    return out


def parse_joint_allocate(annotations: Mapping[str, str]) -> JointAllocate | None:
    """The pod's ``device-joint-allocate`` (None when absent).

    Raises:
        HintError: ``invalid DeviceJointAllocate annotation, err: ...`` (not JSON, not an object,
            ``deviceTypes`` not a list of strings, ``requiredScope`` not a string).
    """
    raw = annotations.get(n.ANNOTATION_DEVICE_JOINT_ALLOCATE)
    if raw is None:
        return None
    what = "DeviceJointAllocate"
    data = _obj(raw, what)
    if not isinstance(data, dict):
        raise HintError(f"invalid {what} annotation, err: expected a JSON object")
    types = data.get("deviceTypes") or []
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise HintError(f"invalid {what} annotation, err: deviceTypes: expected a list of device types")
    return JointAllocate(tuple(types), _str(data, "requiredScope", what))
