"""``koord sim whatif``: the same pods on identical copies of a cluster snapshot under several configurations.

``koord sim`` stays the trace replay it was (every option as before); :class:`SimCommand` only hands
``koord sim whatif ...`` to :func:`whatif` before the replay's options are parsed. The engine is
:mod:`app.sim.whatif` (imported when the command runs, after checking that the ``sim`` extra is installed).

Configurations: ``--config A.yaml --config B.yaml`` (as many as wanted, in that order); one ``--config B``
compares the snapshot's own configuration (or the defaults when it holds none) with B; none compares the
snapshot's own configuration with the defaults. ``--mid-tier`` adds, for each configuration ``X``, a run
``X+mid`` on a copy whose nodes carry the Mid resources the manager would write from their NodeMetrics
(:mod:`app.cli.midtier`): how many more pods fit with the Mid tier on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand

from app.cli.helpstyle import name_values
from app.cli.sim import _fail, require_sim_extra

#: The sub-command of ``koord sim`` this module adds.
WHATIF = "whatif"
OUTPUTS = ("table", "json")


def whatif(
    cluster: Annotated[Path, typer.Option(metavar="DIR", help="The snapshot's cluster files (koord snapshot -o DIR).")],
    config: Annotated[
        list[Path] | None,
        typer.Option(metavar="FILE", help="A plugin configuration to compare; repeatable, in order (A, B, ...)."),
    ] = None,
    pending: Annotated[
        bool, typer.Option("--pending", help="Place the snapshot's pending pods (the default without --workload).")
    ] = False,
    workload: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Place these pods instead: templates with counts, optional gang and quota."),
    ] = None,
    seed: Annotated[int, typer.Option(metavar="INTEGER", help="Seed of kube-scheduler's tie-breaks.")] = 42,
    output: Annotated[str, typer.Option("-o", "--output", metavar="[table|json]", help="table or json.")] = "table",
    plot: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write a PNG of per-node cpu utilisation per configuration.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    percentage_of_nodes_to_score: Annotated[
        int,
        typer.Option(
            metavar="INTEGER",
            help="kube-scheduler's percentageOfNodesToScore: it stops looking once this percent of the nodes "
            "passed its filters and sends only those to the extender (0: its adaptive default; 100: all).",
        ),
    ] = 0,
    scheduler_name: Annotated[
        list[str] | None,
        typer.Option(
            metavar="TEXT",
            help="Place only the pending pods of this spec.schedulerName (koord-scheduler in the manifests; "
            "absent counts as default-scheduler); repeatable (default: every pending pod).",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            metavar="INTEGER",
            help="Configurations run at once, each in its own process (default: one per core; 1: one after "
            "another, with a progress bar per pod).",
        ),
    ] = None,
    mid_tier: Annotated[
        bool,
        typer.Option(
            "--mid-tier",
            help="Also run each configuration as NAME+mid, its nodes given the kubernetes.io/mid-cpu / mid-memory "
            "the manager would write from their NodeMetrics' prodReclaimableMetric (colocation on).",
        ),
    ] = False,
) -> None:
    """What would these settings do to my cluster? Places the same pods on identical copies of a snapshot under
    each configuration, through the real extender verbs, and reports them side by side: pods placed and
    unschedulable (by reason, as koord explain words it), requested and estimated-real utilisation per node,
    nodes over the LoadAware threshold, GPU allocation and fragmentation, each quota's runtime and used, gangs
    completed, then the pods placed differently.
    """
    require_sim_extra()
    import orjson
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from app.framework.config import ConfigError, default_config, load_config, parse_config
    from app.plugins.registry import default_registry
    from app.sim.errors import SimInputError
    from app.sim.service import ServiceError
    from app.sim.snapshot import SnapshotError, snapshot_config
    from app.sim.whatif import Configuration, RunOptions, WhatIfError, run_whatif
    from app.sim.whatifreport import changed_table, plot_whatif, summary_table
    from app.sim.whatifworkload import load_workload

    if output not in OUTPUTS:
        _fail(f"-o/--output: expected one of {', '.join(OUTPUTS)}, got {output!r}")
    if pending and workload is not None:
        _fail("--pending and --workload exclude each other")
    if not 0 <= percentage_of_nodes_to_score <= 100:
        _fail(f"--percentage-of-nodes-to-score: must be in [0, 100], got {percentage_of_nodes_to_score}")
    n_jobs = (os.cpu_count() or 1) if jobs is None else jobs
    if n_jobs < 1:
        _fail(f"--jobs: must be at least 1, got {n_jobs}")
    if not cluster.is_dir() and not cluster.is_file():
        _fail(f"--cluster {cluster}: no such file or directory")
    known = default_registry().names()
    configurations: list[Configuration] = []
    try:
        created = load_workload(workload) if workload is not None else None
        given = [Configuration(path.stem, load_config(path, known)) for path in config or []]
        if len(given) < 2:
            own = snapshot_config(cluster)
            if own is None and not given:
                _fail(
                    f"--cluster {cluster} holds no plugin configuration (ConfigMap koordinator-system/"
                    "koord-scheduler-extender-config): give two --config files to compare"
                )
            first = (
                Configuration("snapshot", parse_config(own, known))
                if own is not None
                else Configuration("defaults", default_config(known))
            )
            second = given or [Configuration("defaults", default_config(known))]
            given = [first, *second]
        seen: dict[str, int] = {}
        for c in given:
            seen[c.name] = seen.get(c.name, 0) + 1
            name = c.name if seen[c.name] == 1 else f"{c.name}#{seen[c.name]}"
            configurations.append(Configuration(name, c.config))
    except ConfigError as exc:
        _fail(f"invalid config: {exc}")
    except (SnapshotError, SimInputError) as exc:
        _fail(str(exc))
    probe = Console(stderr=output == "json")
    console = Console(stderr=output == "json", width=None if probe.is_terminal else 140)  # rows unwrapped in files
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet,
    ) as progress:
        mid_configurations = [Configuration(f"{c.name}+mid", c.config) for c in configurations] if mid_tier else []
        tasks = {c.name: progress.add_task(c.name, total=None) for c in configurations + mid_configurations}

        def report(name: str, done: int, total: int) -> None:
            progress.update(tasks[name], completed=done, total=total)

        try:
            options = RunOptions(seed, percentage_of_nodes_to_score, tuple(scheduler_name or ()))
            result = run_whatif(cluster, configurations, created, options, report, n_jobs)
            if mid_configurations:
                from dataclasses import replace

                from app.cli.midtier import write_mid_resources
                from app.sim.whatifresult import WhatIfResult

                with_mid = replace(options, prepare=write_mid_resources)
                mid = run_whatif(cluster, mid_configurations, created, with_mid, report, n_jobs)
                result = WhatIfResult(result.configurations + mid.configurations)
        except ConfigError as exc:
            _fail(f"invalid config: {exc}")
        except (ServiceError, WhatIfError) as exc:
            _fail(_files_problem(cluster) or str(exc))
    if output == "json":
        sys.stdout.write(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        console.print(summary_table(result))
        if result.changed():
            console.print(changed_table(result))
        else:
            console.print("No pod placed differently.")
    if plot is not None:
        try:
            plot_whatif(result, plot)
        except OSError as exc:
            _fail(f"{plot}: cannot write: {exc.strerror}")


def _files_problem(cluster: Path) -> str | None:
    """What is wrong with the cluster files at ``cluster`` (the file and document), or None when they load: a
    service that did not start says only that it exited."""
    from app.api.manifests import ManifestError, load_objects

    try:
        load_objects(cluster)
    except ManifestError as exc:
        return f"--cluster: {exc}"
    return None


def _whatif_command() -> Any:
    """:func:`whatif` as a click command, its values named as the rest of ``koord --help`` names them."""
    app = typer.Typer(add_completion=False)
    app.command(name=WHATIF)(whatif)
    command = typer.main.get_command(app)
    name_values(command)
    return command


class SimCommand(TyperCommand):
    """``koord sim``: the trace replay, unless its first argument is ``whatif``: then :func:`whatif` parses
    the rest (``koord sim whatif --help`` is its help). Every other invocation is the replay's, unchanged."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        """The replay's context, or, for ``whatif ...``, the what-if command's under a ``koord sim`` context."""
        if args and args[0] == WHATIF:
            sim_ctx = typer.Context(self, info_name=info_name, parent=parent)
            return _whatif_command().make_context(WHATIF, list(args[1:]), parent=sim_ctx)
        return super().make_context(info_name, args, parent=parent, **extra)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("epilog"):
            kwargs["epilog"] = "koord sim whatif --help: compare configurations on a snapshot of your own cluster."
        super().__init__(*args, **kwargs)
