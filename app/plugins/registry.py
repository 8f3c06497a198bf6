"""The in-tree plugin registry: every plugin of :mod:`app.plugins`, keyed by its class's ``NAME``.

Mirrors kube-scheduler's ``pkg/scheduler/framework/plugins/registry.go`` (``NewInTreeRegistry``)
and koord-scheduler's ``cmd/koord-scheduler/main.go`` (``app.WithPlugin(loadaware.Name, loadaware.New)``).
The registration order is the default plugin list: a config without ``plugins`` enables every
plugin in this order (see :func:`app.framework.config.default_config`).
"""

from __future__ import annotations

from app.framework.registry import Registry
from app.plugins.coscheduling.plugin import Coscheduling, new_coscheduling
from app.plugins.deviceshare.plugin import DeviceShare, new_device_share
from app.plugins.elasticquota.plugin import ElasticQuota, new_elastic_quota
from app.plugins.loadaware.plugin import LoadAwareScheduling, new_load_aware
from app.plugins.nodenumaresource.plugin import NodeNUMAResource, new_node_numa_resource
from app.plugins.noderesources.fit import NodeResourcesFit, new_node_resources_fit
from app.plugins.reservation.plugin import Reservation, new_reservation


def default_registry() -> Registry:
    """A new registry with every in-tree plugin, in the default plugin order.

    Order: NodeResourcesFit, LoadAwareScheduling, ElasticQuota, DeviceShare, NodeNUMAResource, Reservation,
    Coscheduling
    (``Registry.names()``).
    """
    registry = Registry()
    registry.register(NodeResourcesFit.NAME, new_node_resources_fit)
    registry.register(LoadAwareScheduling.NAME, new_load_aware)
    registry.register(ElasticQuota.NAME, new_elastic_quota)
    registry.register(DeviceShare.NAME, new_device_share)
    registry.register(NodeNUMAResource.NAME, new_node_numa_resource)
    registry.register(Reservation.NAME, new_reservation)
    registry.register(Coscheduling.NAME, new_coscheduling)
    return registry
