"""`koord sim`: replay a cluster trace through the extender (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def sim() -> None:
    """Not implemented yet."""
    raise typer.Exit(2)
