"""CoschedulingArgs: upstream defaults, upstream's validation messages, and the start-up warning when the
default gang wait is not shorter than the bind extender's httpTimeout."""

from __future__ import annotations

import logging

import pytest

from app.cache.snapshot import ClusterCache
from app.framework.config import ArgsError, ConfigError, parse_config
from app.framework.handle import Handle
from app.framework.runtime import Framework
from app.plugins.coscheduling.args import CoschedulingArgs, decode_args
from app.plugins.coscheduling.plugin import new_coscheduling
from app.plugins.registry import default_registry


def test_defaults_are_upstreams() -> None:
    assert decode_args({}) == CoschedulingArgs(600.0, 1, "once-satisfied", 960.0)
    assert decode_args({"defaultTimeout": "30s", "defaultMatchPolicy": "only-waiting"}).default_timeout == 30.0


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"defaultTimeout": "-1s"}, "defaultTimeout", "coeSchedulingArgs DefaultTimeoutSeconds invalid"),
        ({"controllerWorkers": 0}, "controllerWorkers", "coeSchedulingArgs ControllerWorkers invalid"),
        ({"defaultTimeout": "soon"}, "defaultTimeout", "invalid duration 'soon'"),
        ({"defaultMatchPolicy": "eager"}, "defaultMatchPolicy", "expected one of"),
        ({"bindHTTPTimeout": "0s"}, "bindHTTPTimeout", "must be positive"),
        ({"enablePreemption": "yes"}, "enablePreemption", "expected true or false"),
        ({"timeout": "1s"}, "timeout", "unknown field"),
    ],
)
def test_invalid_args_are_refused_with_the_field(raw: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(ArgsError) as err:
        decode_args(raw)
    assert err.value.field == field and message in err.value.detail


def test_the_framework_reports_bad_args_under_plugin_config() -> None:
    config = parse_config(
        {"pluginConfig": [{"name": "Coscheduling", "args": {"controllerWorkers": -1}}]}, default_registry().names()
    )
    with pytest.raises(ConfigError, match=r"pluginConfig\[Coscheduling\]\.args\.controllerWorkers"):
        Framework(config, default_registry(), Handle(ClusterCache()))


def test_a_default_wait_not_shorter_than_the_bind_timeout_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        new_coscheduling({"defaultTimeout": "10m", "bindHTTPTimeout": "5m"}, Handle(ClusterCache()))
    assert "not less than the bind extender's httpTimeout 5m0s" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        new_coscheduling({}, Handle(ClusterCache()))
    assert caplog.text == ""
