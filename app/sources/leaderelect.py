"""client-go style leader election on a ``coordination.k8s.io/v1`` Lease, for the components that run
their own election (``koord manager``, ``koord descheduler``), through the ``kubernetes`` package's
``leaderelection`` (lease duration / renew deadline / retry period as controller-runtime's defaults
15 s / 10 s / 2 s are passed in by the caller).

The library logs every renewal and every follower's retry at INFO (one line each retry period); its
INFO lines are demoted to DEBUG here (:class:`DemoteToDebug`), and the callers log acquiring and losing
leadership themselves, as client-go's ``leaderelection`` logs only transitions at its default level.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("koord.leaderelect")


class DemoteToDebug(logging.Filter):
    """A filter that turns a logger's INFO records into DEBUG ones, kept only when DEBUG is logged
    (``--log-level debug`` or ``-v 4``); warnings and errors pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Demote INFO; True when the record is still to be logged."""
        if record.levelno != logging.INFO:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


#: The kubernetes package's election logger ("leader X has successfully acquired lease" on every renewal).
LIBRARY_LOGGER = "leaderelection"


def quiet_library_logs() -> None:
    """Attach :class:`DemoteToDebug` to the election library's logger (once)."""
    logger = logging.getLogger(LIBRARY_LOGGER)
    if not any(isinstance(f, DemoteToDebug) for f in logger.filters):
        logger.addFilter(DemoteToDebug())


class _Stopped(Exception):
    """The caller ended the election (``on_stopped`` set): leaves the library's loops."""


def tolerant_lease_lock(name: str, namespace: str, identity: str) -> Any:
    """A ``LeaseLock`` whose transport errors (connection refused, timeouts) count as a failed attempt.

    The library's lock only catches ``ApiException``; anything else would end the election thread
    silently while the controllers keep running. As client-go does, a failed attempt is retried
    every retry period, and a leader that cannot renew within the renew deadline stops leading.
    """
    from kubernetes.client.rest import ApiException
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    class TolerantLeaseLock(LeaseLock):
        def get(self, name: str, namespace: str) -> tuple[bool, Any]:
            try:
                return super().get(name, namespace)
            except ApiException:
                raise
            except Exception as exc:
                log.warning("reading Lease %s/%s failed: %s", namespace, name, exc)
                return False, ApiException(status=0, reason=str(exc))

        def create(self, name: str, namespace: str, election_record: Any) -> bool:
            try:
                return bool(super().create(name, namespace, election_record))
            except Exception as exc:
                log.warning("creating Lease %s/%s failed: %s", namespace, name, exc)
                return False

        def update(self, name: str, namespace: str, updated_record: Any) -> bool:
            try:
                return bool(super().update(name, namespace, updated_record))
            except Exception as exc:
                log.warning("renewing Lease %s/%s failed: %s", namespace, name, exc)
                return False

    return TolerantLeaseLock(name, namespace, identity)


def elect(
    api_client: object,
    name: str,
    namespace: str,
    identity: str,
    durations: tuple[int, int, int],
    on_started: threading.Event,
    on_stopped: threading.Event,
) -> None:
    """Run client-go style leader election in this (daemon) thread until leadership is lost, or until
    the caller sets ``on_stopped`` (the thread then ends at its next attempt, within one retry period).

    ``on_started`` is set when this instance becomes the leader, ``on_stopped`` when it stops
    leading or the election ends for any reason (the caller then exits).
    """
    from kubernetes import client
    from kubernetes.leaderelection import electionconfig, leaderelection

    quiet_library_logs()
    lock = tolerant_lease_lock(name, namespace, identity)
    lock.api_instance = client.CoordinationV1Api(api_client)
    lease, renew, retry = durations

    def lead() -> None:
        on_started.set()
        on_stopped.wait()  # keep "leading" until the process ends or leadership is lost

    class StoppableElection(leaderelection.LeaderElection):
        """The library's election loops forever (no stop); every attempt first checks ``on_stopped``."""

        def try_acquire_or_renew(self) -> bool:
            if on_stopped.is_set():
                raise _Stopped
            return bool(super().try_acquire_or_renew())

    try:
        config = electionconfig.Config(lock, lease, renew, retry, lead, on_stopped.set)
        StoppableElection(config).run()
    except _Stopped:
        log.debug("leader election for Lease %s/%s stopped", namespace, name)
    except Exception:
        log.exception("leader election failed")
    finally:
        on_stopped.set()
