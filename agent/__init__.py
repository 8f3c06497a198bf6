"""The node agent (koordlet): states, metrics collection, NodeMetric reporting and QoS enforcement.

Shaped as upstream's ``pkg/koordlet``: :mod:`agent.states` (what runs on the node),
:mod:`agent.collectors` and :mod:`agent.metriccache` (metrics), :mod:`agent.qos` (strategies that
decide), :mod:`agent.executor` (the only code that writes cgroups, via :mod:`agent.cgroups`).

Layer: beside the service, started by ``koord agent``; may import :mod:`app.api` and
:mod:`app.client` only (never the cache, the plugins or the server).
"""
