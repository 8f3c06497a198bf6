"""kubectl's ``-o`` convention, shared by every ``koord`` listing and ``koord explain``.

- no ``-o``: a table that fits 100 columns; ``-o wide``: the same table with every column;
- ``-o json`` / ``-o yaml``: the service's answer as is (keys sorted);
- ``-o name``: one ``kind/name`` per line, as ``kubectl get -o name`` prints, where ``name`` is what the
  matching ``show`` command accepts.

An unknown value exits 2 listing the allowed ones (click's choice check), as kubectl refuses
``-o xml``. Commands call :func:`emit` with the answer, a table builder and the names; nothing else
decides how a format looks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Annotated, Any

import orjson
import typer
import yaml
from rich.console import Console, RenderableType
from rich.table import Table

#: The widest default table (characters); ``-o wide`` may be wider.
TABLE_WIDTH = 100


class OutputFormat(StrEnum):
    """The ``-o`` values kubectl accepts on ``get`` that ``koord`` supports."""

    json = "json"
    yaml = "yaml"
    wide = "wide"
    name = "name"


#: The ``-o/--output`` option of every listing (``None``: the default table).
OutputOpt = Annotated[
    OutputFormat | None,
    typer.Option(
        "-o",
        "--output",
        metavar="FORMAT",
        help="Output format: json, yaml, wide or name (default: a table of the main columns).",
        show_default=False,
    ),
]


def kube_table(title: str | None = None, caption: str | None = None) -> Table:
    """An empty table drawn as kubectl draws one: no borders, upper-case headers, two spaces between
    columns (a bordered table would spend a tenth of 100 columns on lines). Titles and captions are
    kept (left-aligned) for what kubectl would print as ``describe`` lines."""
    return Table(
        title=title,
        caption=caption,
        box=None,
        padding=(0, 2, 0, 0),
        pad_edge=False,
        show_edge=False,
        header_style="bold",
        title_justify="left",
        caption_justify="left",
    )


def add_columns(table: Table, *names: str, right: tuple[str, ...] = ()) -> Table:
    """Add ``names`` as upper-case headers (``autoScaleMin`` -> ``AUTOSCALEMIN``), those in ``right``
    right-aligned; returns ``table``."""
    for name in names:
        table.add_column(name.upper(), justify="right" if name in right else "left")
    return table


def table_console() -> Console:
    """A console for tables on stdout: the terminal's width on a terminal, otherwise unlimited (a pipe
    or file gets rows unwrapped, as kubectl prints them)."""
    console = Console()
    return console if console.is_terminal else Console(width=100_000)


def dump_json(data: Any) -> str:
    """``data`` as indented JSON with sorted keys and a final newline."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


def dump_yaml(data: Any) -> str:
    """``data`` as block-style YAML with sorted keys (PyYAML's C dumper when present)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(data, Dumper=dumper, default_flow_style=False, sort_keys=True, allow_unicode=True)
    return text


def emit(
    output: OutputFormat | None,
    data: Any,
    table: Callable[[bool], RenderableType],
    names: Callable[[], Iterable[str]],
    *,
    empty: str | None = None,
) -> None:
    """Print ``data`` in the ``-o`` format.

    Args:
        output: the ``-o`` value; ``None`` is the default table.
        data: the service's JSON answer (printed as is by json / yaml).
        table: builds the table; its argument is ``wide`` (every column) or not (fits :data:`TABLE_WIDTH`).
        names: the ``kind/name`` lines of ``-o name``.
        empty: what a listing says on stderr instead of a bare header (or nothing, for ``-o name``) when
            it has no rows, as kubectl's ``No resources found``: e.g. ``No gangs found.``.
    """
    if output is OutputFormat.json:
        sys.stdout.write(dump_json(data))
    elif output is OutputFormat.yaml:
        sys.stdout.write(dump_yaml(data))
    elif output is OutputFormat.name:
        lines = [f"{n}\n" for n in names()]
        if not lines and empty:
            say_empty(empty)
        sys.stdout.write("".join(lines))
    else:
        rendered = table(output is OutputFormat.wide)
        if empty and isinstance(rendered, Table) and rendered.row_count == 0:
            say_empty(empty)
            return
        table_console().print(rendered)


def say_empty(message: str) -> None:
    """Print an empty listing's message on stderr, as kubectl prints ``No resources found``."""
    sys.stderr.write(f"{message}\n")
