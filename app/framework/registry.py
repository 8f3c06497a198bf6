"""Plugin registry: plugin name -> factory building it from its (already YAML-decoded) args.

The generic map only (kube-scheduler's ``pkg/scheduler/framework/runtime/registry.go``); the
in-tree plugins are registered beside them, in :mod:`app.plugins.registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.framework.handle import Handle
from app.framework.interfaces import Plugin

#: A factory receives the plugin's ``args`` mapping (``{}`` when absent) and the framework handle,
#: applies upstream defaults, validates, and returns the plugin.
PluginFactory = Callable[[dict[str, Any], Handle], Plugin]


class Registry:
    """Name -> factory map (kube-scheduler's ``runtime.Registry``)."""

    def __init__(self) -> None:
        self._factories: dict[str, PluginFactory] = {}

    def register(self, name: str, factory: PluginFactory) -> None:
        """Add ``name``.

        Raises:
            ValueError: ``name`` is already registered.
        """
        if name in self._factories:
            raise ValueError(f"a plugin named {name} already exists")
        self._factories[name] = factory

    def names(self) -> list[str]:
        """Registered plugin names in registration order (the default plugin list of a config)."""
        return list(self._factories)

    def factory(self, name: str) -> PluginFactory:
        """Factory of ``name``.

        Raises:
            KeyError: no such plugin.
        """
        return self._factories[name]

    def __contains__(self, name: object) -> bool:
        return name in self._factories
