"""The in-tree registry (upstream ``plugins/registry.go``): keyed by each plugin class's NAME, and
its registration order is the default plugin list."""

from __future__ import annotations

from app.cache.snapshot import ClusterCache
from app.framework.config import default_config, parse_config
from app.framework.handle import Handle
from app.plugins.registry import default_registry

UPSTREAM_ORDER = [
    "NodeResourcesFit",
    "LoadAwareScheduling",
    "ElasticQuota",
    "DeviceShare",
    "NodeNUMAResource",
    "Reservation",
    "Coscheduling",
]


def test_registry_is_keyed_by_each_plugin_class_name() -> None:
    registry = default_registry()
    assert registry.names() == UPSTREAM_ORDER
    handle = Handle(ClusterCache())
    for name in registry.names():
        plugin = registry.factory(name)({}, handle)
        assert name == type(plugin).NAME
        assert plugin.name == name


def test_default_plugin_list_is_the_registration_order() -> None:
    names = default_registry().names()
    assert [spec.name for spec in default_config(names).plugins] == UPSTREAM_ORDER
    assert [spec.name for spec in parse_config({}, names).plugins] == UPSTREAM_ORDER
