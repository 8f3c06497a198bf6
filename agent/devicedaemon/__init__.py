"""koord device-daemon: discovers the node's heterogeneous devices and labels the node with them (upstream
``cmd/koord-device-daemon`` and ``pkg/device-daemon``).

A registry of per-hardware managers (:mod:`~agent.devicedaemon.registry`: NVIDIA through the agent's NVML
layer, RDMA NICs from sysfs) answers upstream's prints (:mod:`~agent.devicedaemon.resource`,
:mod:`~agent.devicedaemon.printer`); a writer (:mod:`~agent.devicedaemon.writer`) puts the labels on the Node
or into a node-feature-discovery feature file; :mod:`~agent.devicedaemon.daemon` loops or runs once.
"""

from agent.devicedaemon.daemon import DaemonConfig, DeviceDaemon
from agent.devicedaemon.printer import Prints, collect
from agent.devicedaemon.registry import manager_map
from agent.devicedaemon.resource import DeviceTopology, Manager, XPUDeviceInfo
from agent.devicedaemon.writer import DeviceDaemonError, FeatureFileWriter, NodeLabelWriter

__all__ = [
    "DaemonConfig",
    "DeviceDaemon",
    "DeviceDaemonError",
    "DeviceTopology",
    "FeatureFileWriter",
    "Manager",
    "NodeLabelWriter",
    "Prints",
    "XPUDeviceInfo",
    "collect",
    "manager_map",
]
