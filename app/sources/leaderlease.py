"""Following kube-scheduler's leader election: is the kube-scheduler beside us the leader?

In ``koord-scheduler`` our extender runs as a second container of kube-scheduler's pod. kube-scheduler
elects a leader through a ``coordination.k8s.io/v1`` Lease; only the leader calls its extender, and
in upstream Koordinator only the leader runs the scheduler's controllers (the ElasticQuota status
writer, the over-quota revoke loop). The standby's extender keeps its watches and a warm cache, but
must not write: two replicas would write every quota status twice and evict twice.

:class:`LeaseFollower` reads that Lease (read-only: it never takes part in the election) every
``poll_seconds`` and says we lead when ``spec.holderIdentity`` is our kube-scheduler's identity and
the lease has not expired. client-go's identity for kube-scheduler is ``<hostname>_<uuid>``; the two
containers of one pod share the hostname (the pod name), so ours is the holder when the identity is
``identity`` or starts with ``identity + "_"``. A failed read keeps the last lease read, so
leadership ends no later than that lease's own expiry (``renewTime + leaseDurationSeconds``), as
the elector's would.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from app.api.timeparse import parse_time
from app.client.errors import ApiError, NotFound

log = logging.getLogger(__name__)


class LeaseReader(Protocol):
    """What :class:`LeaseFollower` needs of the API client (:class:`app.client.aio.AsyncClient`)."""

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        """GET one object by path.

        Raises:
            ApiError: the API refused or did not answer.
        """
        ...


def parse_lease_ref(text: str) -> tuple[str, str]:
    """``"namespace/name"`` -> ``(namespace, name)``.

    Raises:
        ValueError: not exactly two non-empty parts.
    """
    parts = text.split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"expected NAMESPACE/NAME, got {text!r}")
    return parts[0], parts[1]


class LeaseFollower:
    """Whether the Lease ``namespace/name`` is held by ``identity`` (see the module docstring).

    Args:
        client: the API client.
        namespace, name: the Lease kube-scheduler's leaderElection uses (``resourceNamespace``,
            ``resourceName``).
        identity: our kube-scheduler's identity prefix (the pod's hostname).
        poll_seconds: seconds between reads (client-go's retry period is 2 s).
        clock: epoch seconds (tests).
    """

    def __init__(
        self,
        client: LeaseReader,
        namespace: str,
        name: str,
        identity: str,
        *,
        poll_seconds: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.poll_seconds = poll_seconds
        self.clock = clock
        self.holder: str | None = None
        self._expires = 0.0
        self._was_leading = False
        self.read_errors = 0

    @property
    def path(self) -> str:
        """The Lease's API path."""
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def leading(self) -> bool:
        """True while the last Lease read names our kube-scheduler and has not expired."""
        holder = self.holder
        ours = holder is not None and (holder == self.identity or holder.startswith(self.identity + "_"))
        return ours and self.clock() < self._expires

    def observe(self, lease: dict[str, Any]) -> None:
        """Take one Lease object as read from the API. A Lease whose times cannot be read counts as expired."""
        spec = lease.get("spec")
        if not isinstance(spec, dict):
            spec = {}
        holder = spec.get("holderIdentity")
        self.holder = holder if isinstance(holder, str) and holder else None
        try:
            renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
            duration = spec.get("leaseDurationSeconds")
            if isinstance(duration, bool) or not isinstance(duration, int):
                raise ValueError(f"leaseDurationSeconds {duration!r}")
            # the elector's own clock judges expiry from when it saw the renewal; we use the renewTime
            # but never let a skewed clock stretch it past one lease duration from now
            self._expires = min(renewed + duration, self.clock() + duration)
        except ValueError as exc:
            log.warning("Lease %s/%s: cannot read its times (%s): treated as expired", self.namespace, self.name, exc)
            self._expires = 0.0

    async def poll_once(self) -> None:
        """Read the Lease once; a missing Lease means nobody leads; an API error keeps the last read."""
        try:
            self.observe(await self.client.get(self.path))
        except NotFound:
            self.holder, self._expires = None, 0.0
        except ApiError as exc:
            self.read_errors += 1
            log.warning("reading Lease %s/%s failed: %s", self.namespace, self.name, exc)
        now_leading = self.leading()
        if now_leading != self._was_leading:
            self._was_leading = now_leading
            log.info(
                "%s: kube-scheduler beside us %s the leader (Lease %s/%s, holder %s)",
                self.identity,
                "is now" if now_leading else "is no longer",
                self.namespace,
                self.name,
                self.holder,
            )

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await self.poll_once()
            await asyncio.sleep(self.poll_seconds)
