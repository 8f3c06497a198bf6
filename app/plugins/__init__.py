"""In-tree scheduling plugins, one package each, named as upstream (``loadaware``, ``noderesources``,
``elasticquota``, ``deviceshare``), and :mod:`app.plugins.registry`, the in-tree registry keyed by
each plugin class's ``NAME``.

Plugins never import each other nor the HTTP layer: their REST handlers return data or raise
:class:`app.client.errors.NotFound`, which the server answers.

Layer: below :mod:`webhooks`; may import :mod:`app.framework` and everything below it.
"""
