"""``koord descheduler drain``: start, watch, confirm and undo DrainNodes (:mod:`app.api.drain`) on the API
server; the descheduler's DrainNodeController (:mod:`app.descheduler.drain`) carries them out.

- ``start NODE``: create a DrainNode (``confirmState: Confirmed`` and ``MigrateDirectly`` unless told
  otherwise); ``--wait-for-confirm`` only plans (Reservations, no eviction) until ``confirm``.
- ``list``: every drain with its node, phase, confirm state, per-phase pod counts and the conditions that
  say what is left; ``get NAME``: one drain's pods (phase, Reservation, target node, job, why).
- ``confirm NAME``, ``undo NAME``: set ``confirmState`` to ``Confirmed`` / ``Aborted`` (undo uncordons the
  node; the controller deletes an unfinished drain's Reservations and jobs).

Exit codes: 0 done, 1 no such DrainNode (or it exists already), 2 bad flags or no usable API server.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from app.api import drain as api
from app.api.kinds import KINDS

drain_app = typer.Typer(help="Drain nodes reservation-first (DrainNode objects) and show their progress.")

KubeconfigOption = Annotated[Path | None, typer.Option(help="kubeconfig (default: in-cluster, then ~/.kube/config).")]
OutputOption = Annotated[str, typer.Option("-o", "--output", help="table or json.")]


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _client(kubeconfig: Path | None) -> Any:
    from app.client.sync import Client

    try:
        return Client.from_config(str(kubeconfig) if kubeconfig else None, timeout=10)
    except Exception as exc:  # ConfigException, OSError
        raise _fail(f"no usable Kubernetes configuration: {exc}") from None


def _path(name: str | None = None) -> str:
    base = KINDS[api.KIND_DRAIN_NODE].collection_path()
    return f"{base}/{name}" if name else base


#: What a 404 on the DrainNode collection means.
NO_CRD = "the DrainNode CRD is not installed (kubectl apply -k manifests/overlays/<dev|production>)"


def _call(fn: Any, *args: Any, missing: str = NO_CRD, what: str = "") -> Any:
    """Run one request, turning the client's typed errors into exit codes: NotFound (``missing`` is the
    message) and AlreadyExists exit 1, anything else 2."""
    from app.client.errors import AlreadyExists, ApiError, NotFound

    try:
        return fn(*args)
    except NotFound:
        raise _fail(missing, 1) from None
    except AlreadyExists:
        raise _fail(f"drainnode {what} already exists", 1) from None
    except ApiError as exc:  # ConnectionFailed included
        raise _fail(str(exc)) from None


def summary_text(summary: dict[str, Any] | None) -> str:
    """``Succeed 4, Migrating 2`` from a ``pogMigrationSummary`` (phases with a count, in upstream's order)."""
    summary = summary or {}
    parts = [f"{p} {summary[p]}" for p in api.POD_PHASES if summary.get(p)]
    return ", ".join(parts) or "-"


def problems(dn: dict[str, Any]) -> list[str]:
    """The true conditions that say what is left (every one but ``OnceAvailable``), with their reasons."""
    out = []
    for cond in (dn.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") != api.COND_ONCE_AVAILABLE:
            out.append(f"{cond['type']}: {cond.get('message') or cond.get('reason') or ''}".rstrip(": "))
    return out


def render_list(items: list[dict[str, Any]]) -> Table:
    """One row per DrainNode; what each has left (its true conditions, with the pods and reasons) below."""
    table = Table(title="DrainNodes")
    for col in ("name", "node", "phase", "confirm", "pods"):
        table.add_column(col)
    left: list[str] = []
    for dn in items:
        status = dn.get("status") or {}
        name = dn["metadata"]["name"]
        table.add_row(
            name,
            str((dn.get("spec") or {}).get("nodeName") or ""),
            str(status.get("phase") or "-"),
            str((dn.get("spec") or {}).get("confirmState") or api.CONFIRM_WAIT),
            summary_text(status.get(api.STATUS_POD_MIGRATION_SUMMARY)),
        )
        left += [f"{name}: {problem}" for problem in problems(dn)]
    table.caption = "\n".join(left) if items else "No drains found."
    table.caption_justify = "left"
    return table


def render_one(dn: dict[str, Any]) -> Table:
    """One row per pod of one DrainNode, the conditions as the caption."""
    status = dn.get("status") or {}
    spec = dn.get("spec") or {}
    table = Table(
        title=f"DrainNode {dn['metadata']['name']}: node {spec.get('nodeName')}, {status.get('phase') or 'new'}, "
        f"{spec.get('confirmState') or api.CONFIRM_WAIT}"
    )
    for col in ("pod", "phase", "reservation", "target", "job", "why"):
        table.add_column(col)
    for e in status.get(api.STATUS_POD_MIGRATIONS) or []:
        job = e.get("podMigrationJobName") or ""
        if job:
            job = f"{job} ({e.get('podMigrationJobPhase') or 'Pending'})"
        reservation = e.get("reservationName") or ""
        if reservation:
            reservation = f"{reservation} ({e.get('reservationPhase') or 'Pending'})"
        table.add_row(
            f"{e.get('namespace')}/{e.get('podName')}",
            str(e.get("phase") or ""),
            reservation,
            str(e.get("targetNode") or ""),
            job,
            str(e.get("message") or ""),
        )
    table.caption = "\n".join(problems(dn)) or summary_text(status.get(api.STATUS_POD_MIGRATION_SUMMARY))
    table.caption_justify = "left"
    return table


def _emit(output: str, obj: Any, table: Table) -> None:
    if output == "json":
        sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        Console(width=100).print(table)  # tables stay within 100 columns, as every koord table


def _check_output(output: str) -> None:
    if output not in ("table", "json"):
        raise _fail("-o must be table or json")


@drain_app.command("start")
def start(
    node: Annotated[str, typer.Argument(help="The node to drain.")],
    name: Annotated[str | None, typer.Option(help="The DrainNode's name (default: the node's).")] = None,
    wait_for_confirm: Annotated[
        bool, typer.Option(help="Plan only (Reservations, no eviction) until `drain confirm`.")
    ] = False,
    wait_first: Annotated[
        str | None, typer.Option(help="WaitFirst: migrate pods only after this Go duration (default: at once).")
    ] = None,
    cordon_mode: Annotated[str | None, typer.Option(help="Also cordon with a Taint, or Label (cordonPolicy).")] = None,
    ttl: Annotated[str | None, typer.Option(help="Abort and delete the drain this long (Go duration) after.")] = None,
    kubeconfig: KubeconfigOption = None,
    output: OutputOption = "table",
) -> None:
    """Start draining NODE: cordon it and move its pods away, each onto a Reservation made first."""
    _check_output(output)
    from app.api.duration import parse_duration

    for flag, value in (("--wait-first", wait_first), ("--ttl", ttl)):
        if value is not None:
            try:
                parse_duration(value)
            except ValueError as exc:
                raise _fail(f"{flag}: {exc}") from None
    try:
        body = api.new_drain_node(
            name or node,
            node,
            confirm_state=api.CONFIRM_WAIT if wait_for_confirm else api.CONFIRM_CONFIRMED,
            mode=api.MODE_WAIT_FIRST if wait_first else api.MODE_MIGRATE_DIRECTLY,
            wait_duration=wait_first,
            cordon_mode=cordon_mode,
            ttl=ttl,
        )
    except ValueError as exc:
        raise _fail(str(exc)) from None
    with _client(kubeconfig) as client:
        _call(client.get, f"/api/v1/nodes/{node}", missing=f"node {node} not found")
        created = _call(client.create, _path(), body, what=name or node)
    _emit(output, created, render_one(created))


@drain_app.command("list")
def list_drains(kubeconfig: KubeconfigOption = None, output: OutputOption = "table") -> None:
    """Every drain: node, phase, confirm state, pods per phase, and what is left (why a drain cannot finish)."""
    _check_output(output)
    with _client(kubeconfig) as client:
        result = _call(client.list, _path())
    items = sorted(result.items, key=lambda d: d["metadata"]["name"])
    _emit(output, items, render_list(items))


@drain_app.command("get")
def get(
    name: Annotated[str, typer.Argument(help="The DrainNode.")],
    kubeconfig: KubeconfigOption = None,
    output: OutputOption = "table",
) -> None:
    """One drain's pods: phase, Reservation, target node, migration job and why one is stuck."""
    _check_output(output)
    with _client(kubeconfig) as client:
        dn = _call(client.get, _path(name), missing=f"drainnode {name} not found")
    _emit(output, dn, render_one(dn))


def _set_confirm(name: str, state: str, kubeconfig: Path | None) -> None:
    with _client(kubeconfig) as client:
        _call(client.merge_patch, _path(name), {"spec": {"confirmState": state}}, missing=f"drainnode {name} not found")
    typer.echo(f"drainnode/{name} confirmState={state}")


@drain_app.command("confirm")
def confirm(name: Annotated[str, typer.Argument(help="The DrainNode.")], kubeconfig: KubeconfigOption = None) -> None:
    """Let a drain started with --wait-for-confirm migrate its pods."""
    _set_confirm(name, api.CONFIRM_CONFIRMED, kubeconfig)


@drain_app.command("undo")
def undo(name: Annotated[str, typer.Argument(help="The DrainNode.")], kubeconfig: KubeconfigOption = None) -> None:
    """Abort a drain: the node is uncordoned; an unfinished drain's Reservations and jobs are deleted."""
    _set_confirm(name, api.CONFIRM_ABORTED, kubeconfig)
