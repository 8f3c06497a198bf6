"""`koord quota list | tree | show NAME`: inspect ElasticQuotas on a running service.

Reads ``/apis/v1/plugins/ElasticQuota/quotas``, ``/quota/{name}`` and ``/tree`` and renders rich
tables and a tree (min / max / runtime / used per resource), or the answer in any ``-o`` format
(:mod:`app.cli.output`). Upstream's stand-in for "no limit" (``math.MaxInt64 / 5``, the default max of
the default and system quotas) shows as ``unlimited``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.tree import Tree

from app.api.quantity import INT64_MAX, QuantityError, parse
from app.cli.output import OutputOpt, add_columns, emit, kube_table
from app.cli.remote import DEFAULT_SERVER, CAOpt, ContextOpt, InsecureOpt, KubeconfigOpt, ServerOpt, request

quota_app = typer.Typer(
    help="Inspect ElasticQuotas (min / max / runtime / used) on a running service.", no_args_is_help=True
)
PREFIX = "/apis/v1/plugins/ElasticQuota"
#: At or above this (in base units: cores, bytes) a quantity is upstream's "no limit" (MaxInt64 / 5).
UNLIMITED = INT64_MAX // 5


def _get(
    server: str, path: str, insecure: bool, ca: Any, kubeconfig: Path | None = None, context: str | None = None
) -> Any:
    """GET ``PREFIX + path``; exits 1 on 404 and 2 on any other failure (:func:`app.cli.remote.request`)."""
    return request("GET", server, f"{PREFIX}{path}", insecure=insecure, ca=ca, kubeconfig=kubeconfig, context=context)


def _resources(*lists: dict[str, str]) -> list[str]:
    names: set[str] = set()
    for rl in lists:
        names |= set(rl or {})
    return sorted(names)


def quantity_cell(value: str | None) -> str:
    """A quantity for a table: ``-`` when absent, ``unlimited`` for upstream's MaxInt64/5 stand-in (or
    more), else as the service wrote it."""
    if value is None:
        return "-"
    try:
        return "unlimited" if parse(value) >= UNLIMITED else value
    except QuantityError:
        return value


def _cell(rl: dict[str, str], res: str) -> str:
    return quantity_cell((rl or {}).get(res))


def render_quotas(quotas: dict[str, Any], wide: bool = False) -> Table:
    """One row per quota and resource: parent, min, max, runtime, used (``wide``: and request)."""
    cols = ["quota", "parent", "resource", "min", "max", "runtime", "used"] + (["request"] if wide else [])
    table = add_columns(kube_table(), *cols, right=("min", "max", "runtime", "used", "request"))
    for name, q in sorted(quotas.items()):
        keys = _resources(q.get("max", {}), q.get("used", {}), q.get("request", {}))
        for i, res in enumerate(keys or ["-"]):
            row = [
                name if i == 0 else "",
                q.get("parentName", "") if i == 0 else "",
                res,
                *(_cell(q.get(f, {}), res) for f in ("min", "max", "runtime", "used")),
            ]
            if wide:
                row.append(_cell(q.get("request", {}), res))
            table.add_row(*row)
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


def render_quota(q: dict[str, Any], wide: bool = False) -> Table:
    """One quota: min, max, runtime, request and used per resource (``wide``: every ResourceList field),
    then its pods."""
    table = kube_table(title=f"ElasticQuota {q['name']} (parent {q.get('parentName') or '-'})")
    fields = ["min", "max", "runtime", "request", "used"]
    if wide:
        fields = ["min", "autoScaleMin", "max", "sharedWeight", "runtime", "request", "childRequest", "used"]
    add_columns(table, "resource", *fields, right=tuple(fields))
    for res in _resources(*(q.get(f, {}) for f in fields)):
        table.add_row(res, *(_cell(q.get(f, {}), res) for f in fields))
    pods = q.get("podCache") or {}
    if pods:
        table.caption = f"{len(pods)} pods: " + ", ".join(
            f"{k}{'' if v['isAssigned'] else ' (pending)'}" for k, v in sorted(pods.items())
        )
    return table


def tree_names(data: dict[str, Any]) -> list[str]:
    """``elasticquota/NAME`` of every quota in a ``/tree`` answer, depth first (orphans last)."""
    names: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        names.append(f"elasticquota/{node['name']}")
        for child in node.get("children", []):
            walk(child)

    walk(data["root"])
    for orphan in data.get("orphans", []):
        walk(orphan)
    return names


@quota_app.command("list")
def list_quotas(
    server: ServerOpt = DEFAULT_SERVER,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Every quota with min / max / runtime / used per resource (-o wide: and request)."""
    data = _get(server, "/quotas", insecure, certificate_authority, kubeconfig, context)
    emit(
        output,
        data,
        lambda wide: render_quotas(data, wide),
        lambda: [f"elasticquota/{n}" for n in sorted(data)],
        empty="No quotas found.",
    )


@quota_app.command("tree")
def tree(
    server: ServerOpt = DEFAULT_SERVER,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """The quota tree from the root."""
    data = _get(server, "/tree", insecure, certificate_authority, kubeconfig, context)
    emit(output, data, lambda _wide: render_tree(data), lambda: tree_names(data))


@quota_app.command("show")
def show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Quota name.")],
    server: ServerOpt = DEFAULT_SERVER,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """One quota in detail, with its pods. Exits 1 when the quota does not exist."""
    data = _get(server, f"/quota/{name}", insecure, certificate_authority, kubeconfig, context)
    emit(output, data, lambda wide: render_quota(data, wide), lambda: [f"elasticquota/{data['name']}"])
