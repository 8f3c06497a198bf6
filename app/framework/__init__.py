"""kube-scheduler's extension points, plugin registry, cycle state and configuration.

Follows the shape of k8s.io/kubernetes/pkg/scheduler/framework: each extension point is one
small interface, a registry maps plugin names to factories, and per-pod data travels through
a :class:`CycleState`. Unlike kube-scheduler, Filter and Score take a whole batch of nodes at
once (numpy rows) so plugins can vectorise over thousands of nodes.
"""
