"""MkDocs hook: renders the ``koord`` CLI reference into docs/cli.md at every build (``mkdocs.yml`` ``hooks:``).

The page keeps a marker, ``<!-- koord-cli-reference -->``; :func:`app.cli.reference.expand` replaces it
with every command and option of the typer app, so the reference cannot drift from ``koord --help``.
"""

from __future__ import annotations

from typing import Any


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs' ``on_page_markdown`` event: expand the marker on the page that carries it."""
    from app.cli.reference import expand

    return expand(markdown)
