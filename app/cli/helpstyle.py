"""``koord --help`` without Python type names: option values are named as click and kubectl's help
name them (``TEXT``, ``INTEGER``, ``FILE``, ...), flags show no value at all.

Help is laid out as kubectl's and click's plain help, as wide as the terminal (``COLUMNS``, at least 80
columns): each option's names and value name are printed whole (a long one on a line of its own) and
its description wraps beside them. typer's rich panels shrink the name column to fit and cut names
(``--allowed-webhook-cli…`` at 80 columns), so they are turned off on the whole tree.

:class:`KoordGroup` is the root command's class; it renames and restyles once, when typer has built the
whole command tree (every sub-command of every module), so no command has to set a ``metavar`` or a
help style itself.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

_NAMES: dict[Any, str] = {str: "TEXT", int: "INTEGER", float: "NUMBER"}


def _metavar(param: TyperOption | TyperArgument) -> str:
    """The value's name in help: ``[a|b]`` for a choice, ``FILE`` / ``DIR`` / ``PATH`` for paths,
    ``TEXT``, ``INTEGER`` or ``NUMBER`` for plain values."""
    desc = param.type_descriptor
    if desc.choices is not None:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    if desc.is_path or desc.is_file:
        return desc.path_type.upper()
    annotation = desc.annotation
    return _NAMES.get(annotation, getattr(annotation, "__name__", "VALUE").upper())


def _name_value(param: Any) -> None:
    """Name ``param``'s value in help (flags: no name), keeping a name it chose itself (``metavar``).

    ``param`` is a parameter of typer's (vendored) click: a TyperOption, TyperArgument or click Option.
    """
    if isinstance(param, TyperArgument):
        arg: Any = param  # its methods are shadowed per instance below
        if arg.metavar is None:
            arg.metavar = (arg.name or "value").upper()  # GANG, not {gang}
        # an argument's name is its value's name: "NAME  Quota name.", not "NAME <str>" or "GANG TEXT"
        arg.display_type_rich = lambda ctx: None
        usage = arg.metavar if arg.required else f"[{arg.metavar}]"
        arg._usage_display_name = lambda usage=usage: usage  # "show NAME", as click and kubectl write it
        return
    if param.metavar is not None:
        return
    if getattr(param, "is_flag", False) or not isinstance(param, TyperOption | TyperArgument):
        label = None
    else:
        label = _metavar(param)
    # typer renders the value column by this method; an instance attribute shadows it for this param only
    param.display_type_rich = lambda ctx, label=label: label


def name_values(command: Any) -> None:
    """:func:`_name_value` on every parameter of ``command`` and its sub-commands (help option included),
    and plain help (no rich panels, see the module docstring) on each of them."""
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None
    if getattr(command, "short_help", True) is None and getattr(command, "help", None):
        # a parent lists its commands with their first paragraph, wrapped rather than cut with "..."
        command.short_help = " ".join(inspect.cleandoc(command.help).split("\n\n")[0].split())
    for param in command.get_params(typer.Context(command)):
        _name_value(param)
    for sub in (getattr(command, "commands", None) or {}).values():
        name_values(sub)


#: click caps help at ``max_content_width`` columns (80 by default) even in a wider terminal; with this
#: cap the terminal's own width (``shutil.get_terminal_size``, which reads ``COLUMNS``) decides.
UNCAPPED_WIDTH = 10_000


class KoordGroup(TyperGroup):
    """The ``koord`` group: as typer's, with value names fixed by :func:`name_values` on the whole tree."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.context_settings = {"max_content_width": UNCAPPED_WIDTH, **(self.context_settings or {})}
        with contextlib.suppress(AttributeError):  # typer's internals moved: its own names beat no CLI at all
            name_values(self)

    def get_params(self, ctx: Any) -> list[Any]:
        """The root's parameters, typer's completion options (added late) with their values named too."""
        params = super().get_params(ctx)
        with contextlib.suppress(AttributeError):  # as in __init__
            for param in params:
                _name_value(param)
        return params


def package_version() -> str:
    """The installed ``koordinator-py`` version, ``unknown`` when run from a tree that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("koordinator-py")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"koord {package_version()}")
        raise typer.Exit()


def root_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version of koord and exit."),
    ] = False,
) -> None:
    """Koordinator-Py: QoS-aware colocation scheduling for Kubernetes."""
