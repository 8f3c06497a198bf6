"""Per-node anomaly detection over rounds (``pkg/descheduler/utils/anomaly/basic_detector.go`` and the
detector cache of ``low_node_load.go``).

A detector is OK or Anomaly. In OK an abnormal mark counts a consecutive abnormality (a normal mark
zeroes it) and the node turns Anomaly once the count is *greater than* ``consecutiveAbnormalities``;
entering a state clears the counters. Anomaly lasts ``timeout`` seconds (extra abnormal marks do not
extend it) or until normal marks exceed ``consecutiveNormalities``. ``reset`` switches to OK and so
clears counters only when the state actually changes. Times are epoch seconds from an injected clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.descheduler.config import AnomalyCondition


class State(StrEnum):
    """Detector states (``anomaly.State``)."""

    OK = "OK"
    ANOMALY = "Anomaly"


@dataclass
class BasicDetector:
    """One node's detector (``BasicDetector``); ``expiration`` is 0 when none."""

    condition: AnomalyCondition
    state: State = State.OK
    abnormalities: int = 0
    normalities: int = 0
    expiration: float = 0.0

    def _set_state(self, state: State, now: float) -> None:
        if self.state == state:
            return
        self.state = state
        self.abnormalities = self.normalities = 0
        self.expiration = now + self.condition.timeout if state == State.ANOMALY else 0.0

    def _normal(self) -> bool:
        return self.normalities > self.condition.consecutive_normalities

    def current(self, now: float) -> State:
        """The state at ``now`` (an expired or recovered Anomaly falls back to OK)."""
        if self.state == State.ANOMALY and (self.expiration < now or self._normal()):
            self._set_state(State.OK, now)
        return self.state

    def mark(self, normal: bool, now: float) -> State:
        """Record one observation and return the state after it."""
        state = self.current(now)
        if normal:
            self.normalities += 1
            self.abnormalities = 0
            if state == State.ANOMALY and self._normal():
                self._set_state(State.OK, now)
        else:
            self.abnormalities += 1
            self.normalities = 0
            if state == State.OK and self.abnormalities > self.condition.consecutive_abnormalities:
                self._set_state(State.ANOMALY, now)
        return self.current(now)

    def reset(self, now: float) -> None:
        """``Reset``: switch to OK (a no-op on an OK detector: partial counts survive)."""
        self._set_state(State.OK, now)


class DetectorCache:
    """Detectors by node name, each dropped ``cache_timeout`` seconds after it was last stored
    (go-cache with ``DefaultExpiration`` = detectorCacheTimeout)."""

    def __init__(self, cache_timeout: float) -> None:
        self.cache_timeout = cache_timeout
        self._items: dict[str, tuple[BasicDetector, float]] = {}

    def get(self, node: str, now: float) -> BasicDetector | None:
        """The node's live detector, or None."""
        item = self._items.get(node)
        if item is None:
            return None
        if item[1] <= now:
            del self._items[node]
            return None
        return item[0]

    def put(self, node: str, detector: BasicDetector, now: float) -> None:
        """Store (or refresh) the node's detector."""
        self._items[node] = (detector, now + self.cache_timeout)


def filter_abnormal(
    nodes: list[str], cache: DetectorCache, condition: AnomalyCondition | None, now: float
) -> list[str]:
    """``filterRealAbnormalNodes``: mark each high node abnormal once; keep those now in Anomaly.
    Without a condition, or with consecutiveAbnormalities 1, every node is abnormal at once."""
    if condition is None or condition.consecutive_abnormalities == 1:
        return list(nodes)
    out = []
    for name in nodes:
        detector = cache.get(name, now) or BasicDetector(condition)
        if detector.mark(False, now) == State.ANOMALY:
            out.append(name)
        cache.put(name, detector, now)
    return out


def reset_nodes(nodes: list[str], cache: DetectorCache, now: float) -> None:
    """``resetNodesAsNormal``."""
    for name in nodes:
        detector = cache.get(name, now)
        if detector is not None:
            detector.reset(now)


def mark_normal(nodes: list[str], cache: DetectorCache, now: float) -> None:
    """``tryMarkNodesAsNormal``: one normal mark for each node that has a detector."""
    for name in nodes:
        detector = cache.get(name, now)
        if detector is not None:
            detector.mark(True, now)
