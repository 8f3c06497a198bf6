"""The committed generated modules match their vendored .proto files (hack/genproto.py, ``make protos``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GENERATED = [
    "app/api/runtime/v1alpha1/api_pb2.py",
    "app/api/runtime/v1alpha1/api_pb2.pyi",
    "app/api/runtime/v1alpha1/api_pb2_grpc.py",
    "runtimeproxy/cri/v1/api_pb2.py",
    "runtimeproxy/cri/v1/api_pb2.pyi",
]


def test_committed_generated_code_matches_the_protos(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    subprocess.run([sys.executable, str(ROOT / "hack/genproto.py"), "--out", str(tmp_path)], check=True, timeout=60)
    produced = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert produced == sorted(GENERATED)
    for rel in GENERATED:
        assert (tmp_path / rel).read_bytes() == (ROOT / rel).read_bytes(), f"{rel} is stale: run make protos"


def test_vendored_protos_keep_their_license_and_package() -> None:
    hook = (ROOT / "app/api/runtime/v1alpha1/api.proto").read_text()
    cri = (ROOT / "runtimeproxy/cri/v1/api.proto").read_text()
    assert "Licensed under the Apache License, Version 2.0" in hook and "package runtime.v1alpha1;" in hook
    assert "Licensed under the Apache License, Version 2.0" in cri and "package runtime.v1;" in cri
    assert "service RuntimeHookService" in hook and "service RuntimeService" in cri and "service ImageService" in cri
