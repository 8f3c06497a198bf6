"""``koord sim``: replay a cluster trace through the service's own extender verbs.

The simulator (:mod:`app.sim`) and its plotting library come with the optional extra
``pip install 'koordinator-py[sim]'``; this module holds only the command's options, so the
``koord`` CLI (and the service it starts) never imports :mod:`app.sim`. The simulator is imported
when the command runs, after checking that the extra is installed.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

err_console = Console(stderr=True)


def _fail(message: str) -> NoReturn:
    """Print ``message`` (plain text: brackets such as ``[ray]`` are not markup) and exit 2."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


#: What ``koord sim`` needs beyond the service's own dependencies (the ``sim`` extra of pyproject.toml).
SIM_EXTRA_MODULES = ("matplotlib",)
SIM_EXTRA_HINT = "pip install 'koordinator-py[sim]'"


def require_sim_extra() -> None:
    """Exit 2 with an install hint when a module of the ``sim`` extra is missing.

    Raises:
        typer.Exit: code 2, the message names the missing module and ``pip install 'koordinator-py[sim]'``.
    """
    for module in SIM_EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            _fail(f"koord sim needs the optional 'sim' extra ({module} is not installed): {SIM_EXTRA_HINT}")


def _trace_files(nodes: Path | None, pods: list[Path] | None) -> tuple[Path, list[Path]]:
    """``--nodes`` and ``--pods`` as given, or the bundled example trace when neither is.

    Raises:
        typer.Exit: only one of them given, or neither and the example is missing (code 2).
    """
    if nodes is not None and pods:
        return nodes, pods
    if nodes is not None or pods:
        _fail("--nodes and --pods go together (neither: the bundled example trace, examples/sim/)")
    from app.cli.embedded import example_trace

    found = example_trace()
    if found is None:
        _fail("no --nodes/--pods given and the bundled example trace (examples/sim/) is missing")
    assert found is not None
    return found[0], [found[1]]


def sim(
    nodes: Annotated[
        Path | None,
        typer.Option(
            help="Node list CSV (sn, cpu_milli, memory_mib, gpu, model). Default, with --pods: the bundled "
            "example trace, examples/sim/."
        ),
    ] = None,
    pods: Annotated[
        list[Path] | None,
        typer.Option(
            help="Pod list CSV (name, cpu_milli, memory_mib, num_gpu, gpu_milli, [gpu_spec, qos, times]); "
            "repeatable: the sweep covers every list."
        ),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(help="Random, MostAllocated, LeastAllocated or FragmentationAware; repeatable (default: all)."),
    ] = None,
    config: Annotated[
        list[Path] | None, typer.Option(help="A plugin config file to run as a policy (named after it); repeatable.")
    ] = None,
    seed: Annotated[list[int] | None, typer.Option(help="Seed of arrival order and tie-breaks; repeatable.")] = None,
    inflate: Annotated[float, typer.Option(help="Static: resample until GPU requests reach this x capacity.")] = 1.3,
    mode: Annotated[str, typer.Option(help="static (the paper's protocol) or timed (creation/deletion times).")] = (
        "static"
    ),
    tie_break: Annotated[
        str | None,
        typer.Option(
            help="Among the best-scored nodes: order (first in the run's node order, a permutation drawn "
            "from the seed: the paper's simulator), name (smallest name) or random (kube-scheduler's own). "
            "Default: order in static mode, random in timed mode."
        ),
    ] = None,
    pod_popularity_threshold: Annotated[
        float,
        typer.Option(
            help="Percent of the trace's pods its typical shapes cover: FragmentationAware's target "
            "workload and the fragmentation metric's (the paper's runs: 95)."
        ),
    ] = 95.0,
    gang_size: Annotated[
        int | None,
        typer.Option(
            help="Replay gang jobs: every N consecutive multi-GPU pods (num_gpu > 1) in arrival order form a "
            "Strict gang of N (the last may be smaller), scheduled all-or-nothing by the Coscheduling plugin. "
            "A pod list's job_id column groups its pods into gangs without this option."
        ),
    ] = None,
    gang_wait: Annotated[
        float, typer.Option(help="Seconds a gang waits at Permit for its members (the waiting-time annotation).")
    ] = 10.0,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the JSON records here.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of allocation ratio vs arrived workload.")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            help="Runs at once, each in its own worker process with its own service (default: the "
            "machine's cores; 1: one after another in this process)."
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Fan the runs out as Ray tasks on this cluster (ray.init address: auto, "
            "ray://host:10001, local); needs pip install 'koordinator-py[ray]'."
        ),
    ] = None,
) -> None:
    """Replay a GPU trace through /filter, /prioritize and /bind of an in-process service; report
    GPU allocation and fragmentation ratios per policy and seed beside the published results.

    Without --nodes and --pods it replays the small bundled trace of examples/sim/ (seconds); the public
    Alibaba GPU traces (cluster-trace-gpu-v2023) are in alibaba/clusterdata on GitHub.

    Needs the ``sim`` extra (``pip install 'koordinator-py[sim]'``); without it, exits 2 saying so.
    The pod list x policy x seed runs fan out over ``--jobs`` local processes or, with
    ``--ray-address``, Ray tasks (:mod:`app.sim.sweep`); the records come out in pod list, policy,
    seed order either way, with one table per pod list and one plot (a panel per pod list).
    With ``--gang-size`` (or a ``job_id`` column) each record also carries ``gangs``: planned, completed,
    failed, fail_fast and waiting_gpu_seconds (:mod:`app.sim.gangs`).
    """
    require_sim_extra()
    nodes, pods = _trace_files(nodes, pods)
    import orjson
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from app.framework.config import ConfigError
    from app.plugins.registry import default_registry
    from app.sim.errors import SimInputError
    from app.sim.experiment import load_trace
    from app.sim.gangs import check_gang_size, check_gang_wait
    from app.sim.policies import POLICIES, Policy, builtin_policy, config_policy
    from app.sim.published import find_published
    from app.sim.report import failures_table, json_records, plot_workloads, summary_table
    from app.sim.run import SimResult
    from app.sim.sweep import (
        RunOutcome,
        RunSpec,
        SweepError,
        check_spec,
        default_jobs,
        execute,
        run_local,
        run_ray,
    )

    to_stderr = output is None or str(output) == "-"
    # the summary table has 12 columns: keep it readable when the output is a file or a pipe
    console = Console(stderr=to_stderr, width=None if Console(stderr=to_stderr).is_terminal else 160)
    try:
        check_gang_size(gang_size)
        check_gang_wait(gang_wait)
        chosen: list[Policy] = [builtin_policy(p) for p in policy or []]
        known = default_registry().names()
        chosen += [config_policy(path, known) for path in config or []]
        if not chosen:
            chosen = [builtin_policy(p) for p in POLICIES]
        traces = [load_trace(nodes, path, mode) for path in pods]
    except SimInputError as exc:
        _fail(str(exc))
    except ConfigError as exc:
        _fail(f"invalid config: {exc}")
    seeds = seed or [42]
    names = [t.pods_path.stem for t in traces]
    if len(set(names)) < len(names):
        _fail(f"--pods: two pod lists share the name {next(n for n in names if names.count(n) > 1)!r}")
    specs = [
        RunSpec(nodes, t.pods_path, mode, pol, s, inflate, tie_break, pod_popularity_threshold, gang_size, gang_wait)
        for t in traces
        for pol in chosen
        for s in seeds
    ]
    n_jobs = default_jobs() if jobs is None else jobs
    if n_jobs < 1:
        _fail(f"--jobs: must be at least 1, got {n_jobs}")
    try:
        for trace in traces:
            check_spec(trace, replace(specs[0], pods=trace.pods_path))
    except SimInputError as exc:
        _fail(str(exc))
    results: list[SimResult] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
    ) as progress:

        def warn(outcome: RunOutcome) -> None:
            if outcome.result is not None:
                r = outcome.result
                for problem in r.problems[:10]:
                    console.print(f"[yellow]check:[/] {r.policy} seed {r.seed}: {problem}", highlight=False)

        if ray_address is None and (n_jobs == 1 or len(specs) == 1):
            for spec in specs:
                task = progress.add_task(f"{spec.policy.name} seed {spec.seed}", total=None)

                def report(done: int, total: int, task: TaskID = task) -> None:
                    progress.update(task, completed=done, total=total)

                outcome = execute(spec, report)
                if outcome.result is None:
                    _fail(outcome.error or "the run failed")
                warn(outcome)
                results.append(outcome.result)
        else:
            where = f"Ray at {ray_address}" if ray_address is not None else f"{min(n_jobs, len(specs))} processes"
            runs_task = progress.add_task(f"{len(specs)} runs over {where}", total=len(specs))

            def done(_: int, outcome: RunOutcome) -> None:
                progress.advance(runs_task)
                warn(outcome)

            try:
                if ray_address is not None:
                    results = run_ray(specs, ray_address, done)
                else:
                    results = run_local(specs, n_jobs, done)
            except SimInputError as exc:
                _fail(str(exc))
            except SweepError as exc:
                _fail(str(exc))
    groups = []
    for trace in traces:
        workload = trace.pods_path.stem
        mine = [r for r in results if r.workload == workload]
        published = find_published(trace.pods_path) if mode == "static" else None
        groups.append((workload, mine, published))
        console.print(summary_table(mine, published, workload))
        if mode != "static":
            console.print("published: the authors' figures are for the static protocol only (--mode static)")
        failures = failures_table(mine, workload if len(traces) > 1 else "")
        if failures is not None:
            console.print(failures)
    records = orjson.dumps(json_records(results), option=orjson.OPT_INDENT_2)
    if output is None or str(output) == "-":
        sys.stdout.write(records.decode() + "\n")
    else:
        try:
            output.write_bytes(records + b"\n")
        except OSError as exc:
            _fail(f"{output}: cannot write: {exc.strerror}")
    if plot is not None:
        try:
            plot_workloads(groups, plot)
        except OSError as exc:
            _fail(f"{plot}: cannot write: {exc.strerror}")
