"""`koord gang list | show NAMESPACE/NAME`: inspect gangs (Coscheduling) on a running service.

Reads ``/apis/v1/plugins/Coscheduling/gangs`` and ``/gang/{namespace}/{name}`` (upstream's paths) and
renders rich tables (min, children, pending, waiting, bound, once-satisfied, mode, policy, the members
waiting with their time left), or the JSON answer with ``-o json``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import httpx
import orjson
import typer
from rich.console import Console
from rich.table import Table

gang_app = typer.Typer(help="Inspect gangs (Coscheduling) on a running service.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)
PREFIX = "/apis/v1/plugins/Coscheduling"

ServerOpt = Annotated[str, typer.Option(help="Base URL of the running service.")]
OutputOpt = Annotated[str, typer.Option("-o", "--output", help="table or json.")]
InsecureOpt = Annotated[bool, typer.Option(help="Skip TLS verification (self-signed dev certs).")]


def _get(server: str, path: str, insecure: bool) -> Any:
    """GET ``path`` on ``server`` and decode JSON; exits 1 on 404 and 2 on any other failure, with the reason."""
    try:
        resp = httpx.get(f"{server.rstrip('/')}{PREFIX}{path}", timeout=10.0, verify=not insecure)
    except httpx.HTTPError as exc:
        err_console.print(f"[bold red]error:[/] cannot reach {server}: {exc}")
        raise typer.Exit(2) from None
    if resp.status_code != 200:
        try:
            body = resp.json()
        except ValueError:
            body = {}
        message = body.get("message", resp.text) if isinstance(body, dict) else resp.text
        if resp.status_code == 404 and not (isinstance(body, dict) and "message" in body):
            message = f"no {PREFIX} here: is the Coscheduling plugin enabled in the service's --config?"
        err_console.print(f"[bold red]error:[/] {server} answered {resp.status_code}: {message}")
        raise typer.Exit(1 if resp.status_code == 404 else 2)
    return resp.json()


def _dump(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n")


def _wait(gang: dict[str, Any]) -> str:
    """The gang's wait time (nanoseconds in the answer) in seconds."""
    return f"{gang.get('waitTime', 0) / 1e9:g}s"


def render_gangs(gangs: dict[str, Any]) -> Table:
    """One row per gang: group, mode, policy, min, children, pending, waiting, bound, satisfied, wait."""
    table = Table(title="Gangs")
    cols = ["gang", "group", "mode", "policy", "min", "children", "pending", "waiting", "bound", "satisfied", "wait"]
    for col in cols:
        table.add_column(col, justify="right" if col in cols[4:9] else "left")
    for gid, g in sorted(gangs.items()):
        table.add_row(
            gid if g.get("hasGangInit") else f"{gid} [red](not initialised)[/]",
            ",".join(g.get("gangGroup") or []),
            g.get("mode", ""),
            g.get("gangMatchPolicy", ""),
            str(g.get("minRequiredNumber", 0)),
            str(len(g.get("children") or {})),
            str(len(g.get("pendingChildren") or {})),
            str(len(g.get("waitingForBindChildren") or {})),
            str(len(g.get("boundChildren") or {})),
            "yes" if g.get("onceResourceSatisfied") else "no",
            _wait(g),
        )
    return table


def render_gang(g: dict[str, Any]) -> Table:
    """One gang: each member with its state, and for waiting ones the node and time left."""
    title = (
        f"Gang {g['name']} ({g.get('mode')}, {g.get('gangMatchPolicy')}, min {g.get('minRequiredNumber')}, "
        f"total {g.get('totalChildrenNum')}, wait {_wait(g)}, group {','.join(g.get('gangGroup') or [])})"
    )
    table = Table(title=title)
    for col in ("member", "state", "node", "waited", "time left"):
        table.add_column(col, justify="right" if col in ("waited", "time left") else "left")
    waiting = {w["pod"]: w for w in g.get("waitingPods") or []}
    states = [("bound", "boundChildren"), ("waiting", "waitingForBindChildren"), ("pending", "pendingChildren")]
    seen: set[str] = set()
    for state, key in states:
        for member in sorted(g.get(key) or {}):
            seen.add(member)
            w = waiting.get(member, {})
            table.add_row(
                member,
                state,
                w.get("node", ""),
                "" if w.get("waitedSeconds") is None else f"{w['waitedSeconds']:g}s",
                "" if w.get("timeLeftSeconds") is None else f"{w['timeLeftSeconds']:g}s",
            )
    for member in sorted(set(g.get("children") or {}) - seen):
        table.add_row(member, "assumed", "", "", "")
    table.caption = "once resource satisfied" if g.get("onceResourceSatisfied") else "not yet satisfied"
    return table


@gang_app.command("list")
def list_gangs(
    server: ServerOpt = "http://127.0.0.1:9876", output: OutputOpt = "table", insecure: InsecureOpt = False
) -> None:
    """Every gang with its counts (children, pending, waiting, bound)."""
    data = _get(server, "/gangs", insecure)
    _dump(data) if output == "json" else console.print(render_gangs(data))


@gang_app.command("show")
def show(
    gang: Annotated[str, typer.Argument(help="NAMESPACE/NAME of the gang (a bare NAME means default/NAME).")],
    server: ServerOpt = "http://127.0.0.1:9876",
    output: OutputOpt = "table",
    insecure: InsecureOpt = False,
) -> None:
    """One gang in detail: every member's state, waiting members with their time left. Exits 1 when unknown."""
    namespace, _, name = gang.rpartition("/")
    if not name or "/" in namespace:
        err_console.print(f"[bold red]error:[/] expected NAMESPACE/NAME, got {gang!r}")
        raise typer.Exit(2)
    data = _get(server, f"/gang/{namespace or 'default'}/{name}", insecure)
    _dump(data) if output == "json" else console.print(render_gang(data))
