"""The FastAPI application: extender verbs, inspection API, admission webhooks, health and metrics.

:func:`app.server.app.create_app` wires cache, framework, plugins (from the in-tree registry) and
the webhooks' context; nothing is created at import time.

Layer: below :mod:`app.cli`, :mod:`app.sim` and :mod:`app.manager`; may import :mod:`webhooks`
and everything below it.
"""
