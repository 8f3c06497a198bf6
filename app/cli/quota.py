"""`koord quota list | tree | show NAME`: inspect ElasticQuotas on a running service.

Reads ``/apis/v1/plugins/ElasticQuota/quotas``, ``/quota/{name}`` and ``/tree`` and renders rich
tables and a tree (min / max / runtime / used per resource), or the JSON answer with ``-o json``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import httpx
import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

quota_app = typer.Typer(
    help="Inspect ElasticQuotas (min / max / runtime / used) on a running service.", no_args_is_help=True
)
console = Console()
err_console = Console(stderr=True)
PREFIX = "/apis/v1/plugins/ElasticQuota"

ServerOpt = Annotated[str, typer.Option(help="Base URL of the running service.")]
OutputOpt = Annotated[str, typer.Option("-o", "--output", help="table or json.")]
InsecureOpt = Annotated[bool, typer.Option(help="Skip TLS verification (self-signed dev certs).")]


def _get(server: str, path: str, insecure: bool) -> Any:
    """GET ``path`` on ``server`` and decode JSON; exits 2 with the reason on any failure."""
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
        raise typer.Exit(2 if resp.status_code != 404 else 1)
    return resp.json()


def _dump(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n")


def _resources(*lists: dict[str, str]) -> list[str]:
    names: set[str] = set()
    for rl in lists:
        names |= set(rl or {})
    return sorted(names)


def _cell(rl: dict[str, str], res: str) -> str:
    return (rl or {}).get(res, "-")


def render_quotas(quotas: dict[str, Any]) -> Table:
    """One row per quota and resource: parent, min, max, runtime, used, request."""
    table = Table(title="ElasticQuotas")
    for col in ("quota", "parent", "resource", "min", "max", "runtime", "used", "request"):
        table.add_column(col, justify="right" if col in ("min", "max", "runtime", "used", "request") else "left")
    for name, q in sorted(quotas.items()):
        keys = _resources(q.get("max", {}), q.get("used", {}), q.get("request", {}))
        for i, res in enumerate(keys or ["-"]):
            table.add_row(
                name if i == 0 else "",
                q.get("parentName", "") if i == 0 else "",
                res,
                _cell(q.get("min", {}), res),
                _cell(q.get("max", {}), res),
                _cell(q.get("runtime", {}), res),
                _cell(q.get("used", {}), res),
                _cell(q.get("request", {}), res),
            )
    return table


def _label(node: dict[str, Any]) -> str:
    parts = []
    for res in _resources(node.get("max", {}), node.get("used", {})):
        parts.append(
            f"{res} min {_cell(node.get('min', {}), res)} max {_cell(node.get('max', {}), res)} "
            f"runtime [cyan]{_cell(node.get('runtime', {}), res)}[/] used [yellow]{_cell(node.get('used', {}), res)}[/]"
        )
    summary = "; ".join(parts) or "no resources"
    return f"[bold]{node['name']}[/] ({node.get('pods', 0)} pods) {summary}"


def render_tree(data: dict[str, Any]) -> Tree:
    """The quota tree from the root, each node with min / max / runtime / used per resource."""

    def grow(branch: Tree, node: dict[str, Any]) -> None:
        for child in node.get("children", []):
            grow(branch.add(_label(child)), child)

    root = data["root"]
    total = ", ".join(f"{k} {v}" for k, v in sorted((data.get("clusterTotal") or {}).items()))
    tree = Tree(f"[bold]{root['name']}[/] (cluster {total or 'empty'})")
    grow(tree, root)
    for orphan in data.get("orphans", []):
        grow(tree.add(f"[red]orphan[/] {_label(orphan)}"), orphan)
    return tree


def render_quota(q: dict[str, Any]) -> Table:
    """One quota: every ResourceList field per resource, then its pods."""
    table = Table(title=f"ElasticQuota {q['name']} (parent {q.get('parentName') or '-'})")
    fields = ["min", "autoScaleMin", "max", "sharedWeight", "runtime", "request", "childRequest", "used"]
    table.add_column("resource")
    for f in fields:
        table.add_column(f, justify="right")
    for res in _resources(*(q.get(f, {}) for f in fields)):
        table.add_row(res, *(_cell(q.get(f, {}), res) for f in fields))
    pods = q.get("podCache") or {}
    if pods:
        table.caption = f"{len(pods)} pods: " + ", ".join(
            f"{k}{'' if v['isAssigned'] else ' (pending)'}" for k, v in sorted(pods.items())
        )
    return table


@quota_app.command("list")
def list_quotas(
    server: ServerOpt = "http://127.0.0.1:9876", output: OutputOpt = "table", insecure: InsecureOpt = False
) -> None:
    """Every quota with min / max / runtime / used / request per resource."""
    data = _get(server, "/quotas", insecure)
    _dump(data) if output == "json" else console.print(render_quotas(data))


@quota_app.command("tree")
def tree(
    server: ServerOpt = "http://127.0.0.1:9876", output: OutputOpt = "table", insecure: InsecureOpt = False
) -> None:
    """The quota tree from the root."""
    data = _get(server, "/tree", insecure)
    _dump(data) if output == "json" else console.print(render_tree(data))


@quota_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Quota name.")],
    server: ServerOpt = "http://127.0.0.1:9876",
    output: OutputOpt = "table",
    insecure: InsecureOpt = False,
) -> None:
    """One quota in detail, with its pods. Exits 1 when the quota does not exist."""
    data = _get(server, f"/quota/{name}", insecure)
    _dump(data) if output == "json" else console.print(render_quota(data))
