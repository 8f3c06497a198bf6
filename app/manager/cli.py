"""`koord manager`: the manager controllers (NodeSLO, batch resources) (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def manager() -> None:
    """Not implemented yet."""
    raise typer.Exit(2)
