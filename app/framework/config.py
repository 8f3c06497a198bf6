"""The scheduler service's plugin configuration file (``--config``).

Shape (a subset of KubeSchedulerConfiguration's profile, with upstream's plugin args spelling)::

    plugins:
      - {name: LoadAwareScheduling, weight: 1}
    pluginConfig:
      - name: LoadAwareScheduling
        args: {usageThresholds: {cpu: 65, memory: 95}}

``plugins`` absent means the default set: every registered plugin in registration order
(``Registry.names()``, the in-tree order of :mod:`app.plugins.registry`), weight 1; present, it is
the exact list of enabled plugins in order. Args absent take upstream defaults. Any problem raises
:class:`ConfigError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.api.manifests import SafeLoader
from app.framework.duration import parse_duration


class ConfigError(ValueError):
    """Invalid configuration; the message starts with the path of the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class ArgsError(ValueError):
    """A plugin's args are invalid; ``field`` is the path inside the args (``usageThresholds.cpu``).

    Raised by the plugins' factories; the framework reports it as a :class:`ConfigError` at
    ``pluginConfig[<plugin>].args.<field>`` (upstream's ``ValidateXxxArgs`` field errors).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.detail = message


def duration_arg(raw: dict[str, Any], key: str, default: float) -> float:
    """``raw[key]``, a Go ``metav1.Duration`` string (``"30s"``, ``"1m30s"``), in seconds; ``default``
    (seconds) when absent or null.

    Raises:
        ArgsError: the value does not parse as a duration (``field`` is ``key``).
    """
    value = raw.get(key)
    if value is None:
        return default
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ArgsError(key, str(exc)) from None


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """One enabled plugin: its name, score weight (>= 1) and raw args mapping."""

    name: str
    weight: int = 1
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Enabled plugins in order."""

    plugins: tuple[PluginSpec, ...]


def default_config(known: list[str]) -> SchedulerConfig:
    """Every plugin of ``known`` (a registry's ``names()``, in registration order), weight 1, default args."""
    return SchedulerConfig(tuple(PluginSpec(name) for name in known))


def parse_config(data: Any, known: list[str]) -> SchedulerConfig:
    """Validate a decoded config mapping against the ``known`` plugin names.

    ``known`` is a registry's ``names()``; its order is the default plugin list (``plugins`` absent).

    Raises:
        ConfigError: unknown keys, unknown plugins, duplicate entries, bad weights or args types.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("", f"expected a mapping at the top level, got {type(data).__name__}")
    unknown = set(data) - {"apiVersion", "kind", "plugins", "pluginConfig"}
    if unknown:
        raise ConfigError(sorted(unknown)[0], "unknown field (allowed: plugins, pluginConfig)")
    args_by_name: dict[str, dict[str, Any]] = {}
    raw_cfg = data.get("pluginConfig") or []
    if not isinstance(raw_cfg, list):
        raise ConfigError("pluginConfig", "expected a list")
    for i, entry in enumerate(raw_cfg):
        path = f"pluginConfig[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(path, "expected a mapping with name and args")
        name = entry.get("name")
        if name not in known:
            raise ConfigError(f"{path}.name", f"unknown plugin {name!r} (known: {', '.join(sorted(known))})")
        if name in args_by_name:
            raise ConfigError(f"{path}.name", f"repeated config for plugin {name}")
        args = entry.get("args") or {}
        if not isinstance(args, dict):
            raise ConfigError(f"{path}.args", "expected a mapping")
        args_by_name[name] = args
    raw_plugins = data.get("plugins")
    specs: list[PluginSpec] = []
    if raw_plugins is None:
        specs = [PluginSpec(n, 1, args_by_name.get(n, {})) for n in known]
    else:
        if not isinstance(raw_plugins, list):
            raise ConfigError("plugins", "expected a list of {name, weight}")
        seen: set[str] = set()
        for i, entry in enumerate(raw_plugins):
            path = f"plugins[{i}]"
            if isinstance(entry, str):
                entry = {"name": entry}
            if not isinstance(entry, dict):
                raise ConfigError(path, "expected a mapping with name and weight")
            extra = set(entry) - {"name", "weight"}
            if extra:
                raise ConfigError(f"{path}.{sorted(extra)[0]}", "unknown field (allowed: name, weight)")
            name = entry.get("name")
            if name not in known:
                raise ConfigError(f"{path}.name", f"unknown plugin {name!r} (known: {', '.join(sorted(known))})")
            if name in seen:
                raise ConfigError(f"{path}.name", f"plugin {name} listed twice")
            seen.add(name)
            weight = entry.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
                raise ConfigError(f"{path}.weight", f"must be a non-negative integer, got {weight!r}")
            specs.append(PluginSpec(name, weight or 1, args_by_name.get(name, {})))
    return SchedulerConfig(tuple(specs))


def load_config(path: str | Path, known: list[str]) -> SchedulerConfig:
    """Read and validate a YAML/JSON config file.

    Raises:
        ConfigError: the file is unreadable, not YAML, or invalid (message names the field).
    """
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError("", f"config file {path} is not valid YAML: {exc}") from None
    return parse_config(data, known)
