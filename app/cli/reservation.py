"""`koord reservation list | show NAME`: inspect Reservations on a running service.

Reads ``/apis/v1/plugins/Reservation/reservations`` and ``/reservations/{name}`` and renders a rich
table (phase, node, allocatable / allocated per resource, owners, expiry), or the JSON answer with
``-o json``. Exit codes: 0 answered, 1 the reservation does not exist, 2 the service could not be asked.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import httpx
import orjson
import typer
from rich.console import Console
from rich.table import Table

reservation_app = typer.Typer(
    help="Inspect Reservations (phase, node, allocatable / allocated, owners) on a running service.",
    no_args_is_help=True,
)
console = Console()
err_console = Console(stderr=True)
PREFIX = "/apis/v1/plugins/Reservation"

ServerOpt = Annotated[str, typer.Option(help="Base URL of the running service.")]
OutputOpt = Annotated[str, typer.Option("-o", "--output", help="table or json.")]
InsecureOpt = Annotated[bool, typer.Option(help="Skip TLS verification (self-signed dev certs).")]


def _get(server: str, path: str, insecure: bool) -> Any:
    """GET ``PREFIX + path`` on ``server`` and decode JSON; exits 1 on 404, 2 on any other failure."""
    try:
        resp = httpx.get(f"{server.rstrip('/')}{PREFIX}{path}", timeout=10.0, verify=not insecure)
    except httpx.HTTPError as exc:
        err_console.print(f"[bold red]error:[/] cannot reach {server}: {exc}")
        raise typer.Exit(2) from None
    if resp.status_code != 200:
        try:
            message = resp.json().get("message", resp.text)
        except ValueError:
            message = resp.text
        err_console.print(f"[bold red]error:[/] {server} answered {resp.status_code}: {message}")
        raise typer.Exit(1 if resp.status_code == 404 else 2)
    return resp.json()


def _dump(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n")


def _owners(r: dict[str, Any]) -> str:
    current = r.get("currentOwners") or []
    return ", ".join(f"{o['namespace']}/{o['name']}" for o in current) or "-"


def render_reservations(items: list[dict[str, Any]], title: str = "Reservations") -> Table:
    """One row per reservation and resource: phase, node, allocatable, allocated, owners, expires."""
    table = Table(title=title)
    for col in ("name", "phase", "node", "resource", "allocatable", "allocated", "owners", "expires"):
        table.add_column(col, justify="right" if col in ("allocatable", "allocated") else "left")
    for r in items:
        keys = sorted(set(r.get("allocatable") or {}) | set(r.get("allocated") or {})) or ["-"]
        for i, res in enumerate(keys):
            first = i == 0
            table.add_row(
                r["name"] if first else "",
                r.get("phase", "") if first else "",
                (r.get("nodeName") or "-") if first else "",
                res,
                (r.get("allocatable") or {}).get(res, "-"),
                (r.get("allocated") or {}).get(res, "-"),
                _owners(r) if first else "",
                (r.get("expires") or "never") if first else "",
            )
    return table


@reservation_app.command("list")
def list_reservations(
    server: ServerOpt = "http://127.0.0.1:9876", output: OutputOpt = "table", insecure: InsecureOpt = False
) -> None:
    """Every reservation the service knows."""
    data = _get(server, "/reservations", insecure)
    _dump(data) if output == "json" else console.print(render_reservations(data))


@reservation_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Reservation name.")],
    server: ServerOpt = "http://127.0.0.1:9876",
    output: OutputOpt = "table",
    insecure: InsecureOpt = False,
) -> None:
    """One reservation. Exits 1 when it does not exist."""
    data = _get(server, f"/reservations/{name}", insecure)
    _dump(data) if output == "json" else console.print(render_reservations([data], title=f"Reservation {name}"))
