"""Where cluster objects come from and where the service's writes go.

- :mod:`app.sources.base`: the :class:`~app.sources.base.Source` interface and the watched kinds.
- :mod:`app.sources.files`: YAML/JSON cluster files (the embedded default).
- :mod:`app.sources.kubernetes`: a Kubernetes API server (list, watch, bind, patch).
- :mod:`app.sources.events`: the watch events a source delivers to the snapshot cache.

Layer: below :mod:`app.cache`; may import :mod:`app.client` and :mod:`app.api` only.
"""
