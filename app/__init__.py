"""Koordinator-Py scheduler service: kube-scheduler extender, admission webhooks and inspection API.

The service mirrors Koordinator (github.com/koordinator-sh/koordinator) semantics in Python. Its parts:

- ``app.api``: pydantic models of the extender wire protocol and the Koordinator kinds.
- ``app.cache``: the in-memory snapshot of the cluster, fed by a source.
- ``app.sources``: where objects come from (YAML files, or a Kubernetes API server).
- ``app.framework``: kube-scheduler's extension points, registry and cycle state.
- ``app.plugins``: scheduling plugins (``loadaware``, ``noderesources``, ...).
- ``app.server``: the FastAPI application factory and its routers.
- ``app.cli``: the ``koord`` command line.
"""
