"""The trace replay behind ``koord sim``: a GPU trace through the service's own extender verbs.

Needs the optional extra ``pip install 'koordinator-py[sim]'`` (matplotlib for ``--plot``); the
command's options live in :mod:`app.cli.sim`, so nothing else imports this package.

Layer: beside :mod:`app.manager`, below :mod:`app.cli`; may import :mod:`app.server` and everything
below it.
"""
