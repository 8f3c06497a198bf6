"""The ``koord`` command line (typer): ``scheduler``, ``explain``, ``agent``, ``manager``, ``sim``,
``certs``, ``quota``.

Layer: the top; may import every layer of :mod:`app` and :mod:`agent` (``koord agent``). Heavy or
optional parts (the simulator, the Kubernetes source) are imported when their command runs.
"""
