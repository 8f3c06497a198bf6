"""The one Kubernetes API client: configuration loading, requests and a typed error tree.

Every API call of the service, the manager and the agent goes through this package; callers
catch the classes of :mod:`app.client.errors` instead of comparing status codes.

Layer: below :mod:`app.sources`; may import :mod:`app.api` only.

- :mod:`app.client.errors`: the typed error tree (apimachinery's ``errors``); imports only orjson.
- :mod:`app.client.config`: kubeconfig / in-cluster configuration, and what httpx needs from it.
- :mod:`app.client.wire`: request building and answer decoding shared by both clients.
- :mod:`app.client.aio`: :class:`~app.client.aio.AsyncClient` (the service and the manager; watches).
- :mod:`app.client.sync`: :class:`~app.client.sync.Client` (the node agent and command-line tools).
- :mod:`app.client.pager`, :mod:`app.client.watch`, :mod:`app.client.bodies`: paginated lists, watch
  events, and the Binding and Eviction requests.
- :mod:`app.client.reviews`: TokenReview and SubjectAccessReview (delegated authentication and
  authorization of the service's callers), sent by :class:`~app.client.aio.AsyncClient`.

This package imports nothing eagerly: ``import app.client.errors`` does not load httpx or the
``kubernetes`` package (the node agent's embedded mode relies on it).
"""
