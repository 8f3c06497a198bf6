"""Prints: every manager's devices and the node labels they make (upstream
``pkg/device-daemon/printer/printer.go``, which gathers each manager's ``XPUDeviceInfo`` into one list).

:func:`collect` asks each manager once per round and returns :class:`Prints`: the devices (upstream's
prints) and the labels, with ``node.koordinator.sh/device-daemon-timestamp`` (Unix seconds) unless
``timestamp`` is None (``--no-timestamp``). A label whose value is not a valid label value (a model name
with characters labels refuse) is left out with a warning, so the Node write is never refused for it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.devicedaemon.resource import Manager, XPUDeviceInfo
from app.api import devicenames as dn

log = logging.getLogger("agent.devicedaemon")


@dataclass(slots=True)
class Prints:
    """One round's result.

    Attributes:
        devices: every manager's devices, in registry order. labels: label key -> value, sorted by key.
    """

    devices: list[XPUDeviceInfo] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"devices": [upstream's XPUDeviceInfo objects], "labels": {...}}``."""
        return {"devices": [d.to_json() for d in self.devices], "labels": dict(self.labels)}


def collect(managers: Mapping[str, Manager], timestamp: int | None) -> Prints:
    """Scan with every manager and build the prints; ``timestamp`` in Unix seconds, None for none.
    Raises nothing the managers do not (they raise nothing)."""
    out = Prints()
    labels: dict[str, str] = {}
    for vendor, manager in managers.items():
        devices = manager.devices()
        log.debug("%s: %d device(s)", vendor, len(devices))
        out.devices.extend(devices)
        labels.update(manager.labels(devices))
    if timestamp is not None:
        labels[dn.LABEL_DEVICE_DAEMON_TIMESTAMP] = str(int(timestamp))
    for key in sorted(labels):
        if dn.is_label_value(labels[key]):
            out.labels[key] = labels[key]
        else:
            log.warning("label %s=%r is not a valid label value; left out", key, labels[key])
    return out
