"""Plugin configuration: defaults, and invalid config failing at start with the field named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.cache.snapshot import ClusterCache
from app.framework.config import ConfigError, default_config, load_config, parse_config
from app.framework.handle import Handle
from app.framework.runtime import Framework
from app.plugins.registry import default_registry

KNOWN = default_registry().names()


def build(data: object) -> Framework:
    return Framework(parse_config(data, KNOWN), default_registry(), Handle(ClusterCache()))


def test_defaults() -> None:
    fw = build(None)
    assert [p.name for p in fw.plugins] == [
        "NodeResourcesFit",
        "LoadAwareScheduling",
        "ElasticQuota",
        "DeviceShare",
        "NodeNUMAResource",
        "Reservation",
        "Coscheduling",
    ]
    la = fw.plugin("LoadAwareScheduling")
    assert la is not None
    args = la.args  # type: ignore[attr-defined]
    assert args.usage_thresholds == {"cpu": 65, "memory": 95}
    assert args.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert args.node_metric_expiration_seconds == 180
    assert default_config(KNOWN).plugins[0].weight == 1


def test_issue_example_and_no_per_key_merge() -> None:
    fw = build(
        {
            "plugins": [{"name": "LoadAwareScheduling", "weight": 2}],
            "pluginConfig": [{"name": "LoadAwareScheduling", "args": {"usageThresholds": {"memory": 60}}}],
        }
    )
    assert [p.name for p in fw.plugins] == ["LoadAwareScheduling"]
    assert fw.weights == {"LoadAwareScheduling": 2}
    assert fw.plugins[0].args.usage_thresholds == {"memory": 60}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([1], "expected a mapping at the top level"),
        ({"profiles": []}, "profiles: unknown field"),
        ({"plugins": [{"name": "Nope"}]}, "plugins[0].name: unknown plugin 'Nope'"),
        ({"plugins": [{"name": "LoadAwareScheduling", "weight": -1}]}, "plugins[0].weight"),
        (
            {"plugins": ["LoadAwareScheduling", "LoadAwareScheduling"]},
            "plugins[1].name: plugin LoadAwareScheduling listed twice",
        ),
        (
            {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 120}}}]},
            "pluginConfig[LoadAwareScheduling].args.usageThresholds.cpu: "
            "resource Threshold of cpu should be less than 100",
        ),
        (
            {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"nodeMetricExpirationSeconds": 0}}]},
            "nodeMetricExpirationSeconds: nodeMetricExpiredSeconds should be a positive value",
        ),
        (
            {
                "pluginConfig": [
                    {"name": "LoadAwareScheduling", "args": {"aggregated": {"usageAggregationType": "p42"}}}
                ]
            },
            'aggregated.usageAggregationType: Unsupported value: "p42"',
        ),
        (
            {
                "pluginConfig": [
                    {"name": "LoadAwareScheduling", "args": {"aggregated": {"usageAggregatedDuration": "5 min"}}}
                ]
            },
            "aggregated.usageAggregatedDuration: invalid duration '5 min'",
        ),
        (
            {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"resourceWeights": {"gpu": 1}}}]},
            "estimatedScalingFactors.gpu: Not found",
        ),
        (
            {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"usageThreshold": {}}}]},
            "usageThreshold: unknown field",
        ),
        ({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"x": 1}}]}, "args.x: unknown field"),
    ],
    ids=[
        "not-mapping",
        "unknown-top",
        "unknown-plugin",
        "bad-weight",
        "twice",
        "threshold>100",
        "expiration<=0",
        "agg-type",
        "agg-duration",
        "weight-without-factor",
        "unknown-arg",
        "fit-args",
    ],
)
def test_invalid_config_names_the_field(data: object, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(data)
    assert needle in str(info.value)


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml", KNOWN)
    bad = tmp_path / "bad.yaml"
    bad.write_text("plugins: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, KNOWN)


def test_cli_refuses_invalid_config(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("pluginConfig:\n- name: LoadAwareScheduling\n  args: {usageThresholds: {cpu: 101}}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "scheduler", "--config", str(cfg), "--cluster", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "usageThresholds.cpu" in proc.stderr
