"""`koord reservation list | show NAME`: inspect Reservations on a running service.

Reads ``/apis/v1/plugins/Reservation/reservations`` and ``/reservations/{name}`` and renders a rich
table (phase, node, allocatable / allocated per resource, owners, expiry) with, under it, each pending
Reservation's Scheduled message and, while it preempts, its nominated node and victims; or the JSON
answer with ``-o json``. Exit codes: 0 answered, 1 the reservation does not exist, 2 the service could not be asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from app.cli.output import OutputOpt, add_columns, emit, kube_table
from app.cli.remote import DEFAULT_SERVER, CAOpt, ContextOpt, InsecureOpt, KubeconfigOpt, ServerOpt, request

reservation_app = typer.Typer(
    help="Inspect Reservations (phase, node, allocatable / allocated, owners) on a running service.",
    no_args_is_help=True,
)
PREFIX = "/apis/v1/plugins/Reservation"


def _get(
    server: str, path: str, insecure: bool, ca: Any, kubeconfig: Path | None = None, context: str | None = None
) -> Any:
    """GET ``PREFIX + path``; exits 1 on 404, 2 on any other failure (:func:`app.cli.remote.request`)."""
    return request("GET", server, f"{PREFIX}{path}", insecure=insecure, ca=ca, kubeconfig=kubeconfig, context=context)


def _owners(r: dict[str, Any]) -> str:
    current = r.get("currentOwners") or []
    return ", ".join(f"{o['namespace']}/{o['name']}" for o in current) or "-"


def render_reservations(items: list[dict[str, Any]], title: str | None = None, wide: bool = False) -> RenderableType:
    """One row per reservation and resource: phase, node, allocatable, allocated, expires (``wide``: and
    the owners); under the table, the pending ones' messages, nominated nodes and victims."""
    table = kube_table(title=title)
    cols = ["name", "phase", "node", "resource", "allocatable", "allocated", *(["owners"] if wide else []), "expires"]
    add_columns(table, *cols, right=("allocatable", "allocated"))
    for r in items:
        keys = sorted(set(r.get("allocatable") or {}) | set(r.get("allocated") or {})) or ["-"]
        for i, res in enumerate(keys):
            first = i == 0
            row = [
                r["name"] if first else "",
                r.get("phase", "") if first else "",
                (r.get("nodeName") or "-") if first else "",
                res,
                (r.get("allocatable") or {}).get(res, "-"),
                (r.get("allocated") or {}).get(res, "-"),
            ]
            if wide:
                row.append(_owners(r) if first else "")
            row.append((r.get("expires") or "never") if first else "")
            table.add_row(*row)
    lines = [line for r in items for line in _pending_lines(r)]
    return Group(table, Text("\n".join(lines))) if lines else table


def _pending_lines(r: dict[str, Any]) -> list[str]:
    """A pending Reservation's Scheduled message, nominated node and the victims its preemption evicts."""
    if r.get("phase") not in ("Pending", ""):
        return []
    out = [f"{r['name']}: {r['message']}"] if r.get("message") else []
    if r.get("nominatedNodeName"):
        victims = ", ".join(f"{v['namespace']}/{v['name']} (priority {v['priority']})" for v in r.get("victims") or [])
        out.append(f"{r['name']}: nominated node {r['nominatedNodeName']}, victims: {victims or '-'}")
    return out


@reservation_app.command("list")
def list_reservations(
    server: ServerOpt = DEFAULT_SERVER,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Every reservation the service knows (-o wide: with its owners)."""
    data = _get(server, "/reservations", insecure, certificate_authority, kubeconfig, context)
    emit(
        output,
        data,
        lambda wide: render_reservations(data, wide=wide),
        lambda: [f"reservation/{r['name']}" for r in data],
        empty="No reservations found.",
    )


@reservation_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Reservation name.")],
    server: ServerOpt = DEFAULT_SERVER,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """One reservation. Exits 1 when it does not exist."""
    data = _get(server, f"/reservations/{name}", insecure, certificate_authority, kubeconfig, context)
    emit(
        output,
        data,
        lambda wide: render_reservations([data], title=f"Reservation {name}", wide=wide),
        lambda: [f"reservation/{data['name']}"],
    )
