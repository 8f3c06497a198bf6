"""Where the embedded default cluster lives and how the service picks its source."""

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
