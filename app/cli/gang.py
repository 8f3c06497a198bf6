"""`koord gang list | show NAMESPACE/NAME`: inspect gangs (Coscheduling) on a running service.

Reads ``/apis/v1/plugins/Coscheduling/gangs`` and ``/gang/{namespace}/{name}`` (upstream's paths) and
renders rich tables (min, children, pending, waiting, bound, once-satisfied, mode, policy, the members
waiting with their time left), or the JSON answer with ``-o json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from app.cli.output import OutputOpt, add_columns, emit, kube_table
from app.cli.remote import DEFAULT_SERVER, CAOpt, ContextOpt, InsecureOpt, KubeconfigOpt, ServerOpt, fail, request

gang_app = typer.Typer(help="Inspect gangs (Coscheduling) on a running service.", no_args_is_help=True)
PREFIX = "/apis/v1/plugins/Coscheduling"


def _get(
    server: str, path: str, insecure: bool, ca: Any, kubeconfig: Path | None = None, context: str | None = None
) -> Any:
    """GET ``PREFIX + path``; exits 1 on 404 and 2 on any other failure, naming a disabled plugin."""
    hint = f"no {PREFIX} here: is the Coscheduling plugin enabled in the service's --config?"
    return request(
        "GET",
        server,
        f"{PREFIX}{path}",
        insecure=insecure,
        ca=ca,
        kubeconfig=kubeconfig,
        context=context,
        not_found_hint=hint,
    )


def _wait(gang: dict[str, Any]) -> str:
    """The gang's wait time (nanoseconds in the answer) in seconds."""
    return f"{gang.get('waitTime', 0) / 1e9:g}s"


def render_gangs(gangs: dict[str, Any], wide: bool = False) -> Table:
    """One row per gang: min, children, pending, waiting, bound, satisfied, wait (``wide``: and group,
    mode, policy)."""
    table = kube_table()
    counts = ["min", "children", "pending", "waiting", "bound"]
    cols = ["gang", *(["group", "mode", "policy"] if wide else []), *counts, "satisfied", "wait"]
    add_columns(table, *cols, right=tuple(counts))
    for gid, g in sorted(gangs.items()):
        row = [gid if g.get("hasGangInit") else f"{gid} [red](not initialised)[/]"]
        if wide:
            row += [",".join(g.get("gangGroup") or []), g.get("mode", ""), g.get("gangMatchPolicy", "")]
        row += [
            str(g.get("minRequiredNumber", 0)),
            str(len(g.get("children") or {})),
            str(len(g.get("pendingChildren") or {})),
            str(len(g.get("waitingForBindChildren") or {})),
            str(len(g.get("boundChildren") or {})),
            "yes" if g.get("onceResourceSatisfied") else "no",
            _wait(g),
        ]
        table.add_row(*row)
    return table


def render_gang(g: dict[str, Any], wide: bool = False) -> Table:
    """One gang: each member with its state, and for waiting ones the node and time left."""
    title = (
        f"Gang {g['name']} ({g.get('mode')}, {g.get('gangMatchPolicy')}, min {g.get('minRequiredNumber')}, "
        f"total {g.get('totalChildrenNum')}, wait {_wait(g)}, group {','.join(g.get('gangGroup') or [])})"
    )
    table = add_columns(
        kube_table(title=title), "member", "state", "node", "waited", "time left", right=("waited", "time left")
    )
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
    server: ServerOpt = DEFAULT_SERVER,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Every gang with its counts (children, pending, waiting, bound); -o wide adds group, mode and policy."""
    data = _get(server, "/gangs", insecure, certificate_authority, kubeconfig, context)
    emit(
        output,
        data,
        lambda wide: render_gangs(data, wide),
        lambda: [f"gang/{gid}" for gid in sorted(data)],
        empty="No gangs found.",
    )


@gang_app.command("show")
def show(
    gang: Annotated[str, typer.Argument(help="NAMESPACE/NAME of the gang (a bare NAME means default/NAME).")],
    server: ServerOpt = DEFAULT_SERVER,
    output: OutputOpt = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """One gang in detail: every member's state, waiting members with their time left. Exits 1 when unknown."""
    namespace, _, name = gang.rpartition("/")
    if not name or "/" in namespace:
        fail(f"expected NAMESPACE/NAME, got {gang!r}")
    data = _get(server, f"/gang/{namespace or 'default'}/{name}", insecure, certificate_authority, kubeconfig, context)
    emit(output, data, lambda wide: render_gang(data, wide), lambda: [f"gang/{data['name']}"])
