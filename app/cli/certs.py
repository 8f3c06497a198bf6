"""`koord certs`: write a self-signed CA and serving certificate (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def certs() -> None:
    """Not implemented yet."""
    raise typer.Exit(2)
