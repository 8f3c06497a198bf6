"""The koord device-daemon loop (upstream ``cmd/koord-device-daemon/main.go`` ``resourceFeatureDiscovery.run``).

Each round scans with every registered manager, builds the prints (:func:`agent.devicedaemon.printer.collect`)
and hands the labels to the writer. ``oneshot`` (``--oneshot``) does one round and returns; otherwise a round
runs every ``sleep_interval`` seconds (upstream's default 900 s) until ``stop`` is set, and a failed round is
logged and retried at the next one. When a looping daemon stops, a feature file it wrote is removed, as
upstream removes its output file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent.devicedaemon.printer import Prints, collect
from agent.devicedaemon.resource import Manager
from agent.devicedaemon.writer import DeviceDaemonError, FeatureFileWriter, Writer

log = logging.getLogger("agent.devicedaemon")

#: Upstream's ``--sleep-interval`` default, seconds.
DEFAULT_SLEEP_INTERVAL = 900.0


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    """Upstream's ``KDDCommandLineFlags``.

    Attributes:
        oneshot: label once and exit. no_timestamp: leave the timestamp label out.
        sleep_interval: seconds between rounds (> 0).
    """

    oneshot: bool = False
    no_timestamp: bool = False
    sleep_interval: float = DEFAULT_SLEEP_INTERVAL


class DeviceDaemon:
    """Scans and labels (see the module docstring).

    Args:
        managers: the registry (:func:`agent.devicedaemon.registry.manager_map`).
        writer: where the labels go. config: the flags. clock: Unix seconds, for the timestamp label.

    Raises:
        ValueError: ``sleep_interval`` <= 0.
    """

    def __init__(
        self,
        managers: Mapping[str, Manager],
        writer: Writer,
        config: DaemonConfig,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if config.sleep_interval <= 0:
            raise ValueError(f"sleep interval must be > 0, got {config.sleep_interval}")
        self.managers = managers
        self.writer = writer
        self.config = config
        self.clock = clock
        self.rounds = 0

    def run_once(self) -> Prints:
        """One round: scan, then write.

        Raises:
            DeviceDaemonError: the writer failed (the message names the Node or file).
        """
        prints = collect(self.managers, None if self.config.no_timestamp else int(self.clock()))
        if not prints.devices:
            log.warning("No prints generated from any source")
        changed = self.writer.output(prints.labels)
        self.rounds += 1
        log.info(
            "%d device(s), %d label(s)%s",
            len(prints.devices),
            len(prints.labels),
            " written" if changed else ", unchanged",
        )
        return prints

    def run(self, stop: threading.Event) -> None:
        """Round after round until ``stop`` is set (one round when ``oneshot``).

        Raises:
            DeviceDaemonError: only with ``oneshot``, when its round failed.
        """
        if self.config.oneshot:
            self.run_once()
            return
        try:
            while not stop.is_set():
                try:
                    self.run_once()
                except DeviceDaemonError as exc:
                    log.error("%s; retrying in %gs", exc, self.config.sleep_interval)
                stop.wait(self.config.sleep_interval)
        finally:
            if isinstance(self.writer, FeatureFileWriter):
                try:
                    self.writer.remove()
                except DeviceDaemonError as exc:
                    log.warning("%s", exc)
