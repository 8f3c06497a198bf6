"""The CLI reference of the documentation site, rendered from the ``koord`` typer app itself.

``docs/hooks/cli_reference.py`` (a MkDocs hook) puts :func:`render_markdown` in place of the marker
``<!-- koord-cli-reference -->`` of ``docs/cli.md`` at every build, so the page always lists exactly the
commands, options, defaults and help texts that ``koord --help`` shows. :func:`walk` is shared with the
help tests (every command's help rendered at 80 columns).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from typing import Any

import typer
import typer.main

#: The marker of docs/cli.md that the hook replaces with the rendered reference.
MARKER = "<!-- koord-cli-reference -->"


@functools.cache
def root_command() -> Any:
    """The command object typer builds from :data:`app.cli.main.cli` (every sub-command registered).

    typer's command classes are those of its own (vendored) click, read here by their attributes only
    (``commands``, ``get_params``, ``opts``, ...) so a typer that moves its bases does not break the docs.
    Built once per process (typer builds the whole tree, and :class:`~app.cli.helpstyle.KoordGroup` walks it).
    """
    from app.cli.main import cli

    return typer.main.get_command(cli)


def walk(command: Any = None, path: tuple[str, ...] = ("koord",)) -> Iterator[tuple[str, ...]]:
    """Every command path of the tree, depth first in name order: ``("koord",)``, ``("koord", "gang")``,
    ``("koord", "gang", "list")``, ...; hidden commands are left out."""
    command = command or root_command()
    yield path
    subs = getattr(command, "commands", None) or {}
    for name in sorted(subs):
        if not getattr(subs[name], "hidden", False):
            yield from walk(subs[name], (*path, name))


def find(path: tuple[str, ...]) -> Any:
    """The command at ``path`` (as :func:`walk` yields it).

    Raises:
        KeyError: no such command.
    """
    command = root_command()
    for name in path[1:]:
        command = (getattr(command, "commands", None) or {})[name]
    return command


def _text(text: str) -> str:
    """``text`` as Markdown text, not HTML: ``<CN>.crt`` shows as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell: one line, pipes escaped, no HTML."""
    return _text(" ".join(text.split())).replace("|", "\\|")


def _section(path: tuple[str, ...], command: Any) -> list[str]:
    """One command's Markdown: heading, help text, usage, then its arguments and options as a table."""
    ctx = typer.Context(command, info_name=" ".join(path))
    level = "#" * min(2 + len(path) - 1, 6)
    out = [f"{level} `{' '.join(path)}`", ""]
    help_text = inspect.cleandoc(command.help or command.short_help or "")
    if help_text:
        out += [_text(help_text.replace("\b\n", "")), ""]
    pieces = command.collect_usage_pieces(ctx)
    out += ["```", f"{' '.join(path)} {' '.join(pieces)}".rstrip(), "```", ""]
    rows = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)  # what --help prints: ("-o, --output FORMAT", "help  [default: x]")
        if record is None:
            continue
        names, help_ = record
        rows.append(f"| `{_cell(names)}` | {_cell(help_)} |")
    if rows:
        out += ["| option | description |", "|---|---|", *rows, ""]
    children = getattr(command, "commands", None) or {}
    subs = [n for n in sorted(children) if not getattr(children[n], "hidden", False)]
    if subs:
        out += ["Commands: " + ", ".join(f"`{' '.join((*path, n))}`" for n in subs) + ".", ""]
    return out


def render_markdown() -> str:
    """The whole reference: one section per command of :func:`walk`, in its order."""
    root = root_command()
    lines: list[str] = []
    for path in walk(root):
        lines += _section(path, find(path) if len(path) > 1 else root)
    return "\n".join(lines).rstrip() + "\n"


def expand(markdown: str) -> str:
    """``markdown`` with :data:`MARKER` replaced by :func:`render_markdown` (unchanged without it)."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_markdown())


def main() -> None:
    """``python -m app.cli.reference``: print the rendered reference (to read it without MkDocs)."""
    print(render_markdown(), end="")


if __name__ == "__main__":
    main()
