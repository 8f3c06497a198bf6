"""In-tree scheduling plugins, one package each, named as upstream (``loadaware``, ...)."""
