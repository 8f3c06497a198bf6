import pytest

from app.descheduler.config import DEFAULT_NODE_POOL, ConfigError, parse_config, parse_low_node_load_args


def _cfg(args):
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": "LowNodeLoad", "args": args}],
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
            }
        ],
    }


def test_defaults_follow_upstream():
    args = parse_low_node_load_args({"highThresholds": {"cpu": 70}, "lowThresholds": {"cpu": 30, "pods": 10}})
    assert args.node_fit is True
    assert args.node_metric_expiration_seconds == 180
    assert args.detector_cache_timeout == 300
    pool = args.node_pools[0]
    assert pool.name == DEFAULT_NODE_POOL
    assert pool.resource_weights == {"cpu": 1, "memory": 1, "pods": 1}
    assert pool.anomaly_condition is not None
    assert (
        pool.anomaly_condition.timeout,
        pool.anomaly_condition.consecutive_abnormalities,
        pool.anomaly_condition.consecutive_normalities,
    ) == (60, 5, 3)


def test_pools_inherit_thresholds_and_anomaly():
    args = parse_low_node_load_args(
        {
            "highThresholds": {"cpu": 70},
            "lowThresholds": {"cpu": 30},
            "anomalyCondition": {"consecutiveAbnormalities": 2},
            "nodePools": [
                {"name": "gpu", "nodeSelector": {"matchLabels": {"gpu": "true"}}, "highThresholds": {"cpu": 80}}
            ],
        }
    )
    gpu = args.node_pools[1]
    assert gpu.high_thresholds == {"cpu": 80}
    assert gpu.low_thresholds == {"cpu": 30}
    assert gpu.anomaly_condition.consecutive_abnormalities == 2


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"highThresholds": {"cpu": 50}, "lowThresholds": {"cpu": 60}}, "lowThresholds[cpu]"),
        ({"highThresholds": {"cpu": 50}, "numberOfNodes": -1}, "numberOfNodes"),
        ({"highThresholds": {"cpu": 50}, "nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds"),
        ({"highThresholds": {"cpu": -5}}, "highThresholds[cpu]"),
        (
            {"highThresholds": {"cpu": 50}, "evictableNamespaces": {"include": ["a"], "exclude": ["b"]}},
            "evictableNamespaces",
        ),
        (
            {"highThresholds": {"cpu": 50}, "nodePools": [{"prodHighThresholds": {"cpu": 60}}]},
            "nodePools[0].prodHighThresholds[cpu]",
        ),
        ({"highThresholds": {"cpu": 50}, "anomalyCondition": {"timeout": "soon"}}, "anomalyCondition.timeout"),
    ],
)
def test_invalid_args_name_the_field(args, field):
    with pytest.raises(ConfigError) as err:
        parse_config(_cfg(args))
    assert err.value.field == f"profiles[0].pluginConfig[0].args.{field}"


def test_unknown_plugin_and_top_level_fields():
    with pytest.raises(ConfigError, match="profiles"):
        parse_config({"apiVersion": "descheduler/v1alpha2", "profiles": []})
    cfg = _cfg({"highThresholds": {"cpu": 50}})
    cfg["profiles"][0]["plugins"]["balance"]["enabled"].append({"name": "RemoveDuplicates"})
    with pytest.raises(ConfigError) as err:
        parse_config(cfg)
    assert err.value.field == "profiles[0].plugins.balance.enabled[1].name"
    cfg = _cfg({"highThresholds": {"cpu": 50}})
    cfg["maxNoOfPodsToEvictPerNode"] = "x"
    with pytest.raises(ConfigError, match="maxNoOfPodsToEvictPerNode"):
        parse_config(cfg)
    good = parse_config(
        {**_cfg({"highThresholds": {"cpu": 50}}), "deschedulingInterval": "2m", "maxNoOfPodsToEvictTotal": 3}
    )
    assert good.descheduling_interval == 120 and good.max_pods_total == 3


def test_unreadable_or_malformed_files_are_config_errors(tmp_path):
    from app.descheduler.config import load_config

    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "missing.yaml")
    assert err.value.field == "<file>"
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(ConfigError, match="expected an object"):
        load_config(bad)
