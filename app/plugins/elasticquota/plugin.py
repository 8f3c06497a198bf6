"""The ElasticQuota plugin: ElasticQuota (upstream pkg/scheduler/plugins/elasticquota).."""

from __future__ import annotations

from typing import Any

from app.framework.interfaces import Handle


class ElasticQuota:
    """Placeholder: no extension point yet, so enabling it changes nothing."""

    name = "ElasticQuota"

    def __init__(self, handle: Handle) -> None:
        self.handle = handle


def new_elastic_quota(args: dict[str, Any], handle: Handle) -> ElasticQuota:
    """Build the plugin from its (ignored) args."""
    return ElasticQuota(handle)
