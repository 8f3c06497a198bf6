"""Executes evictions through the Eviction API (``evictions.go`` ``PodEvictor`` with the native evictor).

A 429 (a PodDisruptionBudget, or API rate limiting) is retried after the server's ``Retry-After`` or an
exponential backoff, up to ``attempts`` times; it is never turned into a delete. A 404 means the pod is
already gone (counted as done). Embedded mode passes the file source, which records the eviction.
An optional token bucket (``evictQPS`` / ``evictBurst`` of MigrationControllerArgs) paces evictions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.client.errors import ApiError, NotFound, TooManyRequests
from app.sources.base import ClusterClient

log = logging.getLogger("koord.descheduler")


@dataclass
class EvictionOutcome:
    """What happened to one eviction: ``evicted`` true when the API accepted it (or the pod was gone),
    ``attempts`` how many POSTs were made, ``error`` the last refusal ("" on success)."""

    evicted: bool
    attempts: int
    error: str = ""


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` stored (client-go's token bucket); qps 0 = unlimited."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self.clock = qps, max(1, burst), clock
        self.tokens = float(self.burst)
        self.stamp = clock()

    def delay(self) -> float:
        """Take a token; the seconds to wait before using it (0 when one was available)."""
        if self.qps <= 0:
            return 0.0
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps


class PodEvictor:
    """Evicts pods via ``client.evict`` with 429 retries and pacing.

    Args:
        client: the source (KubernetesSource POSTs the Eviction; FileSource records it).
        attempts: POSTs per pod before giving up on 429s (>= 1).
        backoff: first retry delay in seconds (doubled per retry, Retry-After wins when given).
        bucket: eviction pacing, or None.
        sleep: injectable for tests.
    """

    def __init__(
        self,
        client: ClusterClient,
        attempts: int = 5,
        backoff: float = 1.0,
        bucket: TokenBucket | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client, self.attempts, self.backoff, self.bucket, self.sleep = (
            client,
            max(1, attempts),
            backoff,
            bucket,
            sleep,
        )

    async def evict(self, namespace: str, name: str, uid: str, reason: str) -> EvictionOutcome:
        """Evict one pod; never raises for API refusals (they are in the outcome)."""
        if self.bucket is not None:
            wait = self.bucket.delay()
            if wait > 0:
                await self.sleep(wait)
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            try:
                await self.client.evict(namespace, name, uid, reason)
                return EvictionOutcome(True, attempt)
            except NotFound:
                return EvictionOutcome(True, attempt, "pod already gone")
            except TooManyRequests as exc:
                if attempt == self.attempts:
                    return EvictionOutcome(False, attempt, f"eviction refused (429): {exc.message or exc}")
                wait = exc.retry_after if exc.retry_after else delay
                log.info("eviction of %s/%s refused (429), retrying in %.1fs: %s", namespace, name, wait, exc)
                await self.sleep(wait)
                delay *= 2
            except ApiError as exc:
                return EvictionOutcome(False, attempt, f"eviction failed: {exc}")
        return EvictionOutcome(False, self.attempts, "eviction refused")  # pragma: no cover - loop always returns
