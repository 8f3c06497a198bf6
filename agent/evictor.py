"""Carrying out evictions: through the Eviction API in Kubernetes mode, recorded in the embedded mode.

Upstream (``qosmanager/helpers`` / ``evictor``) evicts through ``policy/v1`` Eviction and records an
Event on the pod. In the embedded mode nothing is killed: the eviction is logged, counted and
appended as one JSON line (an Event-like record) to the events file.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agent.states.pods import PodMeta
from app.api.timeparse import format_time
from app.client.errors import ApiError, ConnectionFailed

if TYPE_CHECKING:
    from app.client.sync import Client

log = logging.getLogger("agent.evictor")


class Evictor(ABC):
    """Evicts one pod; returns True when the eviction was accepted (or recorded)."""

    def __init__(self, node_name: str, dry_run: bool = False) -> None:
        self.node_name = node_name
        self.dry_run = dry_run

    def event(self, pod: PodMeta, reason: str) -> dict[str, Any]:
        """A core/v1 Event about the eviction (reason ``evictPodSuccess`` as koordlet records it)."""
        now = format_time(time.time())
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
            "involvedObject": {"kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid},
            "reason": "evictPodSuccess",
            "message": f"evict pod {pod.key} by koordlet, reason: {reason}",
            "type": "Normal",
            "source": {"component": "koordlet", "host": self.node_name},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    def evict(self, pod: PodMeta, reason: str) -> bool:
        """Evict (or in dry-run only log) ``pod``."""
        if self.dry_run:
            log.warning("dry-run: would evict pod %s: %s", pod.key, reason)
            return True
        return self._evict(pod, reason)

    @abstractmethod
    def _evict(self, pod: PodMeta, reason: str) -> bool: ...


class RecordingEvictor(Evictor):
    """Embedded mode: log and append the Event to ``events_file`` (JSON lines); no process is killed."""

    def __init__(self, node_name: str, events_file: Path | None, dry_run: bool = False) -> None:
        super().__init__(node_name, dry_run)
        self.events_file = events_file
        self.records: list[dict[str, Any]] = []

    def _evict(self, pod: PodMeta, reason: str) -> bool:
        record = self.event(pod, reason)
        self.records.append(record)
        log.warning("eviction of pod %s recorded, not executed (embedded mode): %s", pod.key, reason)
        if self.events_file is not None:
            try:
                with open(self.events_file, "a") as f:
                    f.write(json.dumps(record) + "\n")
            except OSError as exc:
                log.warning("cannot append to %s: %s", self.events_file, exc)
        return True


class APIEvictor(Evictor):
    """Kubernetes mode: POST a policy/v1 Eviction with a uid precondition (:func:`app.client.bodies.eviction`,
    the body the service's evictions send too), then an Event.

    Args:
        node_name: this node (the Event's ``source.host``).
        client: the agent's API client (:class:`app.client.sync.Client`).
        dry_run: only log.
    """

    def __init__(self, node_name: str, client: Client, dry_run: bool = False) -> None:
        super().__init__(node_name, dry_run)
        self.client = client

    def _evict(self, pod: PodMeta, reason: str) -> bool:
        """False when the eviction was refused (429 from a PodDisruptionBudget, 404, ...) or got no answer."""
        try:
            self.client.evict(pod.namespace, pod.name, pod.uid)
        except ConnectionFailed as exc:
            log.warning("evicting pod %s failed: %s", pod.key, exc)
            return False
        except ApiError as exc:
            log.warning("evicting pod %s refused: HTTP %d %s", pod.key, exc.status, exc)
            return False
        log.warning("evicted pod %s: %s", pod.key, reason)
        try:
            self.client.create(f"/api/v1/namespaces/{pod.namespace}/events", self.event(pod, reason))
        except ApiError as exc:  # an Event is best effort
            log.info("event for pod %s not recorded: %s", pod.key, orjson.dumps(str(exc)).decode())
        return True
