"""Koordinator-Py: Koordinator (github.com/koordinator-sh/koordinator) semantics in Python.

The scheduler service (kube-scheduler extender, admission webhooks, inspection API), the manager's
controllers and the ``koord`` CLI live here; the node agent is :mod:`agent`, the webhooks
:mod:`webhooks`. Layers, top to bottom; each imports only the layers below it (checked by
``lint-imports``, contracts in pyproject.toml):

- ``app.cli``: the ``koord`` command line; dispatches to every part, the agent included.
- ``app.sim`` | ``app.manager``: trace replay (optional ``sim`` extra) | the slo-controller's
  NodeSLO and batch-resource controllers. Independent of each other.
- ``app.server``: the FastAPI application factory and its routers.
- :mod:`webhooks`: the admission webhooks the server mounts.
- ``app.plugins``: the scheduling plugins, one package each, and their registry.
- ``app.framework``: kube-scheduler's extension points, generic registry, config and cycle state.
- ``app.cache``: the in-memory snapshot of the cluster and the parsed forms of its objects.
- ``app.sources``: where cluster objects come from (YAML files or an API server) and writes go.
- ``app.client``: the Kubernetes API client and its typed error tree.
- ``app.api``: Koordinator's shared names and rules (``apis/extension``), wire and edge models.
"""
