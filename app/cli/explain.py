"""``koord explain``: where the pod comes from and how the service's answer is drawn.

The pod: ``koord explain pod NAME -n NAMESPACE`` reads it from the cluster (kubeconfig and
``--context`` as kubectl), ``--pod FILE`` from a YAML/JSON file, ``--pod -`` from stdin.
``koord explain reservation NAME`` asks the Reservation plugin instead (:func:`render_reservation_explain`):
why no node fits a pending Reservation and what preemption would take.

The table (one row per node, feasible ones first, best score first): kube-scheduler's own verdict
(NodeResourcesFit on cpu, memory, ephemeral-storage and the pod count, computed by the service as
kube-scheduler would), the other plugins' filter verdicts, ElasticQuota, gang (Coscheduling) and
Reservation as their own columns, and the total score of feasible nodes. ``-o wide`` shows every
plugin's verdict and score and the extender score instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from app.api.manifests import SafeLoader
from app.cli.output import add_columns, kube_table
from app.cli.remote import fail

#: Plugins shown in their own columns of the default table (column header by plugin name).
OWN_COLUMNS = {"ElasticQuota": "quota", "Reservation": "reservation"}
GANG_PLUGIN = "Coscheduling"
#: What ``koord explain KIND NAME`` accepts as KIND (kubectl's names of pods).
POD_KINDS = ("pod", "pods", "po")
#: ... and of Reservations (the CRD's plural and singular).
RESERVATION_KINDS = ("reservation", "reservations")


def parse_pod(text: str, origin: str) -> dict[str, Any]:
    """The one Pod in YAML/JSON ``text``.

    Raises:
        typer.Exit: not YAML, or not exactly one Pod object (code 2; the message names ``origin``).
    """
    try:
        docs = [d for d in yaml.load_all(text, Loader=SafeLoader) if d is not None]
    except yaml.YAMLError as exc:
        fail(f"{origin}: {exc}")
    if len(docs) != 1 or not isinstance(docs[0], dict) or docs[0].get("kind", "Pod") != "Pod":
        fail(f"{origin}: expected exactly one Pod object")
    pod: dict[str, Any] = docs[0]
    return pod


def read_pod_file(path: str) -> dict[str, Any]:
    """The Pod in file ``path`` (``-``: standard input).

    Raises:
        typer.Exit: unreadable, or not exactly one Pod (code 2).
    """
    if path == "-":
        return parse_pod(sys.stdin.read(), "stdin")
    try:
        text = Path(path).read_text()
    except OSError as exc:
        fail(f"--pod {path}: {exc.strerror or exc}")
    return parse_pod(text, path)


def fetch_pod(namespace: str, name: str, kubeconfig: Path | None, context: str | None) -> dict[str, Any]:
    """The Pod ``namespace/name`` from the API server of the kubeconfig (``--context``), as kubectl finds it.

    Raises:
        typer.Exit: code 1 when the pod does not exist; code 2 without a usable kubeconfig or when the
            API server cannot be asked.
    """
    from kubernetes.config import ConfigException

    from app.client.errors import ApiError, NotFound
    from app.client.sync import Client

    try:
        client = Client.from_config(str(kubeconfig) if kubeconfig else None, context=context, timeout=10)
    except (ConfigException, OSError) as exc:
        fail(f"no usable kubeconfig{f' context {context!r}' if context else ''}: {exc}")
    try:
        with client:
            pod: dict[str, Any] = client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except NotFound:
        fail(f'pods "{name}" not found in namespace {namespace}', 1)
    except ApiError as exc:
        fail(f"cannot read pod {namespace}/{name} from {client.host}: {exc}")
    return pod


def _verdict_cell(verdict: dict[str, Any] | None) -> str:
    """``pass``, ``-`` (skipped or not enabled) or the failure's reason in red."""
    if verdict is None or verdict.get("status") == "Skip":
        return "-"
    if verdict.get("status") == "Success":
        return "[green]pass[/]"
    return f"[red]{escape(verdict.get('reason') or verdict.get('status', '?'))}[/]"


def _gang_cell(answer: dict[str, Any]) -> str:
    """The pod's gang verdict (the same on every node): ``-`` for a pod in no gang, ``pass``, ``wait``
    (Permit would hold it for its members) or the failure in red; the caption has the details."""
    verdict = (answer.get("podVerdicts") or {}).get(GANG_PLUGIN)
    if verdict is None:
        return "-"
    if verdict.get("status") != "Success":
        return f"[red]{escape(verdict.get('reason') or verdict.get('status', '?'))}[/]"
    return "[yellow]wait[/]" if str(verdict.get("permit", "")).startswith("Wait") else "[green]pass[/]"


def _plugins(nodes: dict[str, Any]) -> list[str]:
    """Every plugin named in a filter verdict or a score, in first-seen order."""
    plugins: list[str] = []
    for info in nodes.values():
        for name in [*info.get("filter", {}), *info.get("scores", {})]:
            if name not in plugins:
                plugins.append(name)
    return plugins


def _ordered(nodes: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Feasible nodes first, best total first, then by name."""
    return sorted(nodes.items(), key=lambda kv: (not kv[1].get("feasible"), -(kv[1].get("total") or 0), kv[0]))


def render_explain(answer: dict[str, Any], wide: bool = False) -> Table:
    """The explain answer as a table, one row per node (see the module docstring for the columns); the
    per-pod verdicts (``podVerdicts``, e.g. the gang of a Coscheduling member) are its caption."""
    nodes: dict[str, Any] = answer.get("nodes", {})
    plugins = _plugins(nodes)
    pre: dict[str, Any] = answer.get("preFilter") or {}
    table = kube_table(title=f"Why pod {answer.get('pod', '?')} goes where")
    if wide:
        add_columns(table, "node", "feasible", "kube-scheduler", *plugins, "total", "extender score", right=("total",))
    else:
        own = [p for p in OWN_COLUMNS if p in plugins or p in pre]
        add_columns(table, "node", "feasible", "kube-scheduler", "filters", *(OWN_COLUMNS[p] for p in own), "gang")
        add_columns(table, "score", right=("score",))
    for node, info in _ordered(nodes):
        filters: dict[str, Any] = info.get("filter", {})
        scores: dict[str, Any] = info.get("scores", {})
        kube = "; ".join(
            f"{name}: {_verdict_cell(v)}" if v.get("status") not in ("Success", "Skip") else _verdict_cell(v)
            for name, v in (info.get("kubeScheduler") or {}).items()
        )
        row = [escape(node), "[green]yes[/]" if info.get("feasible") else "[red]no[/]", kube or "-"]
        total = "-" if info.get("total") is None else str(info["total"])
        if wide:
            for name in plugins:
                parts = [_verdict_cell(filters.get(name))] if name in filters else []
                if name in scores:
                    parts.append(f"score {scores[name]}")
                row.append("\n".join(parts))
            extender = "-" if info.get("extenderScore") is None else str(info["extenderScore"])
            row += [total, extender]
        else:
            failing = [
                f"{name}: {_verdict_cell(v)}"
                for name, v in filters.items()
                if name not in OWN_COLUMNS and v.get("status") not in ("Success", "Skip")
            ]
            row.append("; ".join(failing) or "[green]pass[/]")
            row += [_verdict_cell(filters.get(p) or pre.get(p)) for p in own]
            row += [_gang_cell(answer), total]
        table.add_row(*row)
    verdicts = answer.get("podVerdicts") or {}
    lines = [
        escape(f"{plugin}: " + ", ".join(f"{k} {v}" for k, v in verdict.items() if v not in ("", None, [])))
        for plugin, verdict in sorted(verdicts.items())
    ]  # per-pod verdicts (e.g. Coscheduling's gang state) under the table
    lines += _cpu_lines(nodes)
    if lines:
        table.caption = "\n".join(lines)
    return table


def _cpu_lines(nodes: dict[str, Any]) -> list[str]:
    """One caption line per node with a cpu topology: per NUMA node its free / all cpus (NodeNUMAResource)."""
    out = []
    for node, info in _ordered(nodes):
        cpus = ((info.get("details") or {}).get("NodeNUMAResource")) or None
        if not isinstance(cpus, dict):
            continue
        parts = [
            f"NUMA {z.get('node')} free {z.get('free') or '-'} ({z.get('freeCount')}),"
            f" allocated {z.get('allocated') or '-'}"
            for z in cpus.get("numaNodes") or []
        ]
        out.append(escape(f"{node} cpus: " + "; ".join(parts)))
    return out


def feasible_names(answer: dict[str, Any]) -> list[str]:
    """``node/NAME`` of every feasible node, best first (``-o name``: where the pod can go)."""
    return [f"node/{name}" for name, info in _ordered(answer.get("nodes", {})) if info.get("feasible")]


def _victims(victims: list[dict[str, Any]]) -> str:
    return ", ".join(f"{v['namespace']}/{v['name']} (priority {v['priority']})" for v in victims)


def render_reservation_explain(answer: dict[str, Any], wide: bool = False) -> RenderableType:
    """A Reservation's explanation (``GET .../reservations/{name}/explain``): its phase and kube-scheduler's
    message as the title, one row per refused node with its reasons and, where preemption found victims
    there, those victims; the message and the preemption's verdict (the node and victims it would take, or
    why none) as lines under it (wrapped at the terminal's width, not the table's). ``wide`` changes nothing."""
    name, phase = answer.get("name", "?"), answer.get("phase", "?")
    title = f"Reservation {name}: {phase}"
    if answer.get("nodeName"):
        title += f" on node {answer['nodeName']}"
    table = kube_table(title=escape(title))
    add_columns(table, "node", "reasons", "victims")
    pre: dict[str, Any] = answer.get("preemption") or {}
    candidates: dict[str, list[str]] = pre.get("candidates") or {}
    for node, info in (answer.get("nodes") or {}).items():
        victims = ", ".join(candidates.get(node, [])) or "-"
        table.add_row(escape(node), escape("; ".join(info.get("reasons") or [])), escape(victims))
    lines = []
    if answer.get("message"):
        lines.append(answer["message"])
    if answer.get("fits"):
        lines.append(f"fits node {answer['fits']}: placed at the next round")
    if pre.get("eligible"):
        lines.append(
            f"preemption would evict {len(pre['victims'])} pod(s) on node {pre['node']}: {_victims(pre['victims'])}"
            + (f", {pre['numPDBViolations']} violating a PodDisruptionBudget" if pre.get("numPDBViolations") else "")
        )
    elif pre.get("node"):
        lines.append(f"preemption under way on node {pre['node']}: evicting {_victims(pre['victims'])}")
    elif pre.get("reason"):
        lines.append(f"no preemption: {pre['reason']}")
    return Group(table, Text("\n".join(lines))) if lines else table
