"""Everything a request handler needs, created by the app factory and kept on ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass

from app.cache.snapshot import ClusterCache
from app.framework.runtime import Framework
from app.server.extender import ExtenderService
from app.server.metrics import ServiceMetrics
from app.sources.base import Source
from app.sources.loops import LoopSupervisor


@dataclass(slots=True)
class ServiceState:
    """The service's parts: cache, framework, source, extender logic, metrics, and the supervisor every
    long-running loop of the service runs under (the source's loops included)."""

    cache: ClusterCache
    framework: Framework
    source: Source
    extender: ExtenderService
    metrics: ServiceMetrics
    loops: LoopSupervisor
