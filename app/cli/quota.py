"""`koord quota list | tree | show NAME`: inspect ElasticQuotas on a running service."""

from __future__ import annotations

import typer

quota_app = typer.Typer(
    help="Inspect ElasticQuotas (min / max / runtime / used) on a running service.", no_args_is_help=True
)
