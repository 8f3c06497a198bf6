"""`koord agent`: the node agent (koordlet) (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def agent() -> None:
    """Not implemented yet."""
    raise typer.Exit(2)
