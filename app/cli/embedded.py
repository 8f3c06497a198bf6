"""Where the embedded examples live: the default cluster the service serves, and the small GPU trace
``koord sim`` replays when given no trace."""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable that overrides the embedded example cluster's location.
ENV_EXAMPLE_CLUSTER = "KOORD_EXAMPLE_CLUSTER"


def embedded_cluster_path() -> Path | None:
    """The example cluster: ``$KOORD_EXAMPLE_CLUSTER``, ``./examples/cluster``, or the repo's copy."""
    candidates = []
    if os.environ.get(ENV_EXAMPLE_CLUSTER):
        candidates.append(Path(os.environ[ENV_EXAMPLE_CLUSTER]))
    candidates.append(Path.cwd() / "examples" / "cluster")
    candidates.append(Path(__file__).resolve().parents[2] / "examples" / "cluster")
    return next((p for p in candidates if p.exists()), None)


#: The bundled trace of ``examples/sim/`` (written by ``examples/sim/generate.py``).
EXAMPLE_NODE_LIST = "example_node_list.csv"
EXAMPLE_POD_LIST = "example_pod_list.csv"


def example_trace() -> tuple[Path, Path] | None:
    """The bundled trace's node list and pod list (``./examples/sim`` or the repo's copy), None when absent."""
    for base in (Path.cwd() / "examples" / "sim", Path(__file__).resolve().parents[2] / "examples" / "sim"):
        nodes, pods = base / EXAMPLE_NODE_LIST, base / EXAMPLE_POD_LIST
        if nodes.is_file() and pods.is_file():
            return nodes, pods
    return None
