"""Regenerate the Python modules of the vendored .proto files (``make protos``).

Two protos, vendored unchanged with their license headers:

- ``app/api/runtime/v1alpha1/api.proto``: koordinator's ``RuntimeHookService`` (koordinator-sh/koordinator
  ``apis/runtime/v1alpha1/api.proto``), spoken by ``koord runtime-proxy`` (client) and ``koord agent`` (server);
- ``runtimeproxy/cri/v1/api.proto``: the CRI v1 API (kubernetes/cri-api ``pkg/apis/runtime/v1/api.proto``, tag
  ``v0.36.3``), which ``koord runtime-proxy`` decodes for the calls it intercepts.

Generated with the ``grpc_tools.protoc`` of the pinned ``grpcio-tools`` (pyproject's dev extra), from the
repository root so the modules import each other by their package path: ``*_pb2.py`` and ``*_pb2.pyi`` for
both, ``*_pb2_grpc.py`` for the hook service only (the proxy forwards CRI calls with generic handlers).
``tests/test_genproto.py`` regenerates into a temporary folder and compares byte for byte.

Usage: ``python hack/genproto.py [--out DIR]`` (default: the repository root, in place). Exit 1 when protoc fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (proto path relative to the root, whether to generate gRPC stubs)
PROTOS: tuple[tuple[str, bool], ...] = (
    ("app/api/runtime/v1alpha1/api.proto", True),
    ("runtimeproxy/cri/v1/api.proto", False),
)


def generate(out: Path) -> None:
    """Write the generated modules of :data:`PROTOS` under ``out`` (same relative folders).

    Raises:
        RuntimeError: protoc failed (its exit status in the message).
    """
    from grpc_tools import protoc  # dev dependency: grpcio-tools

    for rel, with_grpc in PROTOS:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        args = ["grpc_tools.protoc", f"-I{ROOT}", f"--python_out={out}", f"--pyi_out={out}"]
        if with_grpc:
            args.append(f"--grpc_python_out={out}")
        args.append(str(ROOT / rel))
        rc = protoc.main(args)
        if rc != 0:
            raise RuntimeError(f"protoc failed on {rel} (exit status {rc})")


def main() -> int:
    """CLI entry: ``--out DIR`` (default the repository root)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT)
    args = parser.parse_args()
    try:
        generate(args.out.resolve())
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
