"""``koord sim whatif --mid-tier``: the nodes of a what-if copy get the Mid resources the manager would write.

Runs on the what-if service's loop before any pod is placed (:attr:`app.sim.whatif.RunOptions.prepare`): for
each node, :func:`app.manager.mid.calculate_mid` over its cached pods and NodeMetric (``prodReclaimableMetric``
from the node agent's prediction), with the snapshot's ``colocation-config`` (or the defaults) and colocation
**enabled** (the point is to see the tier on), then ``kubernetes.io/mid-cpu`` / ``mid-memory`` written to the
node's status in that copy only (removed where the NodeMetric is missing or stale). It lives in the CLI because
it joins the simulator and the manager, which do not import each other.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from app.api.koordext import MID_CPU, MID_MEMORY
from app.manager.colocation import (
    COLOCATION_CONFIG_KEY,
    ColocationConfig,
    ColocationConfigError,
    ColocationStrategy,
    node_strategy,
    parse_colocation_config,
)
from app.manager.controllers import CONFIG_KEY
from app.manager.inputs import metric_input, node_input, pod_inputs
from app.manager.mid import calculate_mid

log = logging.getLogger(__name__)


def colocation_config(cache: Any) -> ColocationConfig:
    """The snapshot's ``colocation-config`` (defaults when absent or malformed, logged)."""
    cm = cache.objects.get("ConfigMap", {}).get(CONFIG_KEY) or {}
    try:
        return parse_colocation_config(((cm.get("data") or {}) or {}).get(COLOCATION_CONFIG_KEY))
    except ColocationConfigError as exc:
        log.warning("mid tier: the snapshot's colocation-config is unusable (%s); using the defaults", exc)
        return ColocationConfig()


async def write_mid_resources(state: Any) -> None:
    """Write every node's mid-cpu / mid-memory into the service's source (see the module docstring).

    ``state`` is the what-if service's :class:`~app.server.state.ServiceState` (its ``cache`` and ``source``).
    """
    cache, source = state.cache, state.source
    cfg = colocation_config(cache)
    now = time.time()
    for name in sorted(cache.nodes):
        node = cache.nodes[name]
        strategy = ColocationStrategy.of({**node_strategy(cfg, node.labels, node.annotations), "enable": True})
        metric = metric_input(cache.objects.get("NodeMetric", {}).get(name))
        result = calculate_mid(
            strategy, node_input(node.obj, node.allocatable, node.annotations), pod_inputs(cache, name), metric, now
        )
        values: dict[str, str | None] = (
            {MID_CPU: None, MID_MEMORY: None}
            if result.reset
            else {MID_CPU: str(result.cpu), MID_MEMORY: str(result.memory)}
        )
        log.debug("mid tier: node %s %s (%s)", name, values, result.cpu_message)
        await source.patch("Node", name, {"status": {"allocatable": values, "capacity": values}}, subresource="status")
