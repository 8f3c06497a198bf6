"""``koord snapshot``: a live cluster as cluster files for ``koord sim whatif`` (and ``koord scheduler --cluster``).

From the API server of a kubeconfig (``--kubeconfig``, ``--context``; as kubectl finds it when neither is
given), or from a running koord service (``--server URL``: its ``GET /apis/v1/snapshot``, with the plugin
configuration it runs with; the kubeconfig's credentials go with it, :mod:`app.cli.remote`). What is read, kept
and dropped: :mod:`app.sim.snapshot`. Prints what was written and what was left out (``--summary json`` for JSON).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from app.cli.output import add_columns, kube_table
from app.cli.remote import CAOpt, InsecureOpt, fail, request

#: Dropped fields listed in the table (the JSON summary lists all).
TABLE_DROPPED = 15


def _read_kubernetes(kubeconfig: Path | None, context: str | None) -> Any:
    from kubernetes.config import ConfigException

    from app.client.errors import ApiError
    from app.client.sync import Client
    from app.sim.snapshot import SnapshotError, read_cluster

    try:
        client = Client.from_config(str(kubeconfig) if kubeconfig else None, context=context, timeout=60)
    except (ConfigException, OSError) as exc:
        fail(f"no usable kubeconfig{f' context {context!r}' if context else ''}: {exc}")
    try:
        with client:
            return read_cluster(client)
    except ApiError as exc:
        fail(f"cannot read the cluster from {client.host}: {exc}")
    except SnapshotError as exc:
        fail(str(exc))


def _read_service(server: str, insecure: bool, ca: Path | None, kubeconfig: Path | None, context: str | None) -> Any:
    from app.sim.snapshot import SnapshotError, read_service

    taken_at = time.time()
    answer = request(
        "GET",
        server,
        "/apis/v1/snapshot",
        insecure=insecure,
        ca=ca,
        kubeconfig=kubeconfig,
        context=context,
        not_found_hint="the service has no /apis/v1/snapshot (an older koord scheduler?)",
    )
    if not isinstance(answer, dict):
        fail(f"{server}: /apis/v1/snapshot did not answer an object")
    try:
        return read_service(answer, taken_at)
    except SnapshotError as exc:
        fail(str(exc))


def summary_lines(summary: dict[str, Any], written: list[Path], directory: Path) -> list[Table | str]:
    """What was written (objects per kind) and what was left out (skipped kinds, dropped fields), as kubectl
    draws tables, with one line of notes under each."""
    objects = kube_table()
    add_columns(objects, "kind", "objects", right=("objects",))
    for kind, count in summary["objects"].items():
        objects.add_row(kind, str(count))
    metrics = summary["nodeMetrics"]
    out: list[Table | str] = [
        f"Wrote {len(written)} files to {directory}:",
        objects,
        f"NodeMetrics fresh (stamped live when loaded): {metrics['fresh']}, expired (left expired): "
        f"{metrics['expired']}",
    ]
    if summary["skipped"]:
        skipped = kube_table()
        add_columns(skipped, "not in the snapshot", "why")
        for what, why in summary["skipped"].items():
            skipped.add_row(what, escape(why))
        out += ["", skipped]
    items = list(summary["dropped"].items())
    if items:
        dropped = kube_table()
        add_columns(dropped, "dropped (not read by the plugins)", "times", right=("times",))
        for path, count in items[:TABLE_DROPPED]:
            dropped.add_row(escape(path), str(count))
        out += ["", dropped]
        if len(items) > TABLE_DROPPED:
            out.append(f"... and {len(items) - TABLE_DROPPED} more fields (--summary json lists all)")
    else:
        out += ["", "Nothing dropped."]
    return out


def snapshot(
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Directory to write the files to.")],
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="kubeconfig of the cluster; with --server, whose user's credentials go to the service (default: "
            "as kubectl finds it).",
        ),
    ] = None,
    context: Annotated[str | None, typer.Option(help="The kubeconfig context to use.")] = None,
    server: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Read a running koord service instead of the API server."),
    ] = None,
    insecure: InsecureOpt = False,
    certificate_authority: CAOpt = None,
    summary: Annotated[str, typer.Option(help="How to print what was written: table or json.")] = "table",
) -> None:
    """Write the cluster (Nodes, Pods, NodeMetrics, NodeSLOs, Devices, ElasticQuotas, PodGroups, Reservations,
    Koordinator's ConfigMaps with the plugin configuration) as cluster files for koord sim whatif.

    Reads no Secret and no ConfigMap but Koordinator's own; pods keep only what the plugins read (no env,
    no command, no unrelated annotations). Prints what it wrote and what it dropped.
    """
    import orjson

    from app.sim.snapshot import SnapshotError, write_snapshot

    if summary not in ("table", "json"):
        fail(f"--summary: expected table or json, got {summary!r}")
    snap = (
        _read_kubernetes(kubeconfig, context)
        if server is None
        else _read_service(server, insecure, certificate_authority, kubeconfig, context)
    )
    try:
        written = write_snapshot(snap, output)
    except SnapshotError as exc:
        fail(str(exc))
    body = snap.summary()
    if summary == "json":
        typer.echo(orjson.dumps({**body, "directory": str(output), "files": [p.name for p in written]}).decode())
        return
    console = Console()
    for part in summary_lines(body, written, output):
        console.print(part, highlight=False, soft_wrap=isinstance(part, str))
