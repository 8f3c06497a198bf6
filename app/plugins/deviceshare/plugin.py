"""The DeviceShare plugin: GPU sharing (upstream pkg/scheduler/plugins/deviceshare).."""

from __future__ import annotations

from typing import Any

from app.framework.interfaces import Handle


class DeviceShare:
    """Placeholder: no extension point yet, so enabling it changes nothing."""

    name = "DeviceShare"

    def __init__(self, handle: Handle) -> None:
        self.handle = handle


def new_device_share(args: dict[str, Any], handle: Handle) -> DeviceShare:
    """Build the plugin from its (ignored) args."""
    return DeviceShare(handle)
