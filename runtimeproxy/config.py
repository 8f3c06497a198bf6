"""The hook server registrations in a folder (upstream ``pkg/runtimeproxy/config/config_manager.go``).

A hook server registers by writing a JSON file into the folder (default ``/etc/runtime/hookserver.d``), in the
format of :mod:`app.api.runtime.config`. :class:`HookConfigManager` reads the folder again when a file in it
changed (checked at most once a second); a file that is not of that shape is logged once and skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from app.api.runtime.config import HookConfigError, RuntimeHookConfig, parse_hook_config

log = logging.getLogger("runtimeproxy.config")


class HookConfigManager:
    """The registrations in a folder, read again when its files change (at most every ``recheck`` seconds).

    Args:
        path: the folder (missing: no hook server).
        recheck: seconds between looks at the folder's files' mtimes.
    """

    def __init__(self, path: Path, recheck: float = 1.0) -> None:
        self.path = path
        self.recheck = recheck
        self._lock = threading.Lock()
        self._checked = -1e18
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self._configs: list[RuntimeHookConfig] = []
        self._bad: set[tuple[str, int]] = set()

    def _scan(self) -> tuple[tuple[str, int], ...]:
        try:
            files = sorted(p for p in self.path.iterdir() if p.name.endswith(".json") and p.is_file())
        except OSError:
            return ()
        out = []
        for p in files:
            try:
                out.append((str(p), p.stat().st_mtime_ns))
            except OSError:
                continue
        return tuple(out)

    def all_hooks(self) -> list[RuntimeHookConfig]:
        """The valid registrations, in file-name order (``GetAllHook``)."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked < self.recheck:
                return self._configs
            self._checked = now
            stamp = self._scan()
            if stamp == self._stamp:
                return self._configs
            self._stamp = stamp
            configs: list[RuntimeHookConfig] = []
            for name, mtime in stamp:
                try:
                    configs.append(parse_hook_config(Path(name).read_text(), name))
                except (OSError, HookConfigError) as exc:
                    if (name, mtime) not in self._bad:
                        self._bad.add((name, mtime))
                        log.warning("hook server registration skipped: %s", exc)
            if [c.source for c in configs] != [c.source for c in self._configs]:
                log.info("hook servers: %s", [f"{c.remote_endpoint} ({c.source})" for c in configs] or "none")
            self._configs = configs
            return configs
