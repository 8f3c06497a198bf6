"""``python -m runtimeproxy``: koord runtime-proxy without the rest of the ``koord`` CLI.

``koord runtime-proxy`` re-executes into this entry point (:func:`runtimeproxy.cli.reexec_lean`), so the
scheduler framework, numpy and the other commands' imports do not stay resident on every node.
"""

from __future__ import annotations

import os

import typer

from runtimeproxy.options import set_grpc_environment


def main() -> None:
    """Parse the ``koord runtime-proxy`` options and run the proxy (gRPC's experiments set first, before gRPC is
    imported: :func:`runtimeproxy.options.set_grpc_environment`)."""
    set_grpc_environment(os.environ)
    from runtimeproxy.cli import runtime_proxy

    typer.run(runtime_proxy)


if __name__ == "__main__":
    main()
