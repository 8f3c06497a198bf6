"""kube-scheduler's extension points, generic plugin registry, cycle state and configuration.

Follows the shape of k8s.io/kubernetes/pkg/scheduler/framework: each extension point is one
small interface, a registry maps plugin names to factories, and per-pod data travels through
a :class:`~app.framework.cyclestate.CycleState`. Unlike kube-scheduler, Filter and Score take a
whole batch of nodes at once (numpy rows) so plugins can vectorise over thousands of nodes. The
in-tree plugins and their registry live in :mod:`app.plugins`; the framework never names them.

Layer: below :mod:`app.plugins`; may import :mod:`app.cache`, :mod:`app.sources`,
:mod:`app.client` and :mod:`app.api`.
"""
