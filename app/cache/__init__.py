"""The in-memory snapshot of the cluster and the parsed forms of its objects.

:class:`~app.cache.snapshot.ClusterCache` applies the sources' watch events, keeps pods as
:class:`~app.cache.podinfo.PodInfo` and nodes as :class:`~app.cache.nodestate.NodeState` with
numpy columns (:mod:`~app.cache.nodetable`), and tells :class:`~app.cache.listener.CacheListener` s.

Layer: below :mod:`app.framework`; may import :mod:`app.sources` (its event types), :mod:`app.client`
and :mod:`app.api`.
"""
