"""Fixtures of the simulator tests: the shared Alibaba GPU trace (never copied into the repo) and slices of it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.conftest import SHARED

DATA = SHARED / "data" / "alibaba-gpu-v2023" / "csv"
NODES_CSV = DATA / "openb_node_list_gpu_node.csv"
PODS_CSV = DATA / "openb_pod_list_default.csv"


def require_trace() -> None:
    """Skip when the shared trace is not on this machine."""
    if not NODES_CSV.exists() or not PODS_CSV.exists():
        pytest.skip(f"shared trace missing at {DATA}")


def write_slice(src: Path, dst: Path, rows: list[int]) -> Path:
    """Copy the header and the data rows ``rows`` (0-based) of ``src`` into ``dst``."""
    with src.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        data = list(reader)
    with dst.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(data[i] for i in rows)
    return dst


@pytest.fixture
def trace_slice(tmp_path: Path) -> tuple[Path, Path]:
    """40 GPU nodes of every model (every 30th node of the GPU node list) and the first 400 pods of the
    default pod list, as CSV files in ``tmp_path``."""
    require_trace()
    nodes = write_slice(NODES_CSV, tmp_path / "nodes.csv", list(range(0, 1200, 30)))
    pods = write_slice(PODS_CSV, tmp_path / "pods.csv", list(range(400)))
    return nodes, pods
