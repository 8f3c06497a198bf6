"""``python -m agent``: the node agent without the rest of the ``koord`` CLI.

``koord agent`` re-executes into this entry point (see :func:`agent.cli.reexec_lean`) so that the
scheduler framework, numpy, httpx and rich that ``koord`` imports for its other commands do not stay
resident in the agent (about 25 MB).
"""

from __future__ import annotations

import typer

from agent.cli import agent


def main() -> None:
    """Parse the ``koord agent`` options and run the agent."""
    typer.run(agent)


if __name__ == "__main__":
    main()
