"""The ``koord`` command line (typer)."""
