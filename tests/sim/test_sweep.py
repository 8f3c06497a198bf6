"""Sweeps: multigpu-shaped pod lists replay, ``--jobs`` fan-out merges the same records as one-by-one
runs, ``--ray-address`` does too (when ray is installed), and failures keep their messages.

The traces here are small synthetic CSVs in the shape of the dataset's ``openb_pod_list_multigpu*``
lists (``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` only), so these tests need no shared data.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.sim.experiment import load_trace
from app.sim.policies import builtin_policy
from app.sim.sweep import RunSpec, SweepError, run_local

MODELS = ("P100", "V100M16", "T4")


def write_trace(tmp_path: Path, pods: int = 36) -> tuple[Path, Path]:
    """12 GPU nodes (2, 4 or 8 GPUs of three models) and ``pods`` pods in the multigpu lists' columns:
    GPU shares of 10-90 %, whole GPUs, and 2- to 8-GPU pods."""
    nodes = tmp_path / "nodes.csv"
    rows = ["sn,cpu_milli,memory_mib,gpu,model"]
    rows += [f"node-{i:02d},64000,262144,{(2, 4, 8)[i % 3]},{MODELS[i % 3]}" for i in range(12)]
    nodes.write_text("\n".join(rows) + "\n")
    pod_list = tmp_path / "openb_pod_list_multigpu_tiny.csv"
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli"]
    for i in range(pods):
        kind = i % 6
        num_gpu, milli = [(1, 100 + 160 * (i % 5)), (1, 1000), (2, 1000), (1, 500), (4, 1000), (8, 1000)][kind]
        if kind == 5 and i % 12 != 5:
            num_gpu, milli = 1, 300
        rows.append(f"pod-{i:03d},{2000 + 1000 * (i % 4)},{4096 * (1 + i % 3)},{num_gpu},{milli}")
    pod_list.write_text("\n".join(rows) + "\n")
    return nodes, pod_list


def _without_wall(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in records]


def _sim(nodes: Path, pods: Path, out: Path, *extra: str) -> list[dict[str, Any]]:
    args = ["sim", "--nodes", str(nodes), "--pods", str(pods), "--policy", "MostAllocated", "--policy", "Random"]
    args += ["--seed", "1", "--seed", "2", "--quiet", "-o", str(out), *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    records: list[dict[str, Any]] = json.loads(out.read_text())
    return records


def test_multigpu_list_replays_and_jobs_merge_the_serial_records(tmp_path: Path) -> None:
    nodes, pods = write_trace(tmp_path)
    serial = _sim(nodes, pods, tmp_path / "serial.json", "--jobs", "1")
    fanned = _sim(nodes, pods, tmp_path / "fanned.json", "--jobs", "2")
    assert [(r["policy"], r["seed"]) for r in fanned] == [
        ("MostAllocated", 1),
        ("MostAllocated", 2),
        ("Random", 1),
        ("Random", 2),
    ]
    assert _without_wall(fanned) == _without_wall(serial)
    for r in fanned:
        assert 0 < r["gpu_allocation_ratio"]["100"] <= 100  # the multigpu pods were scheduled
        assert r["wall_seconds"] > 0
    # the seeds differ, so the records are not one run copied four times
    assert len({json.dumps(r["gpu_allocation_ratio"]) + json.dumps(r["failed_pods"]) for r in serial}) > 1


def test_several_pod_lists_merge_into_one_json_and_one_plot(tmp_path: Path) -> None:
    nodes, pods = write_trace(tmp_path)
    other = tmp_path / "openb_pod_list_multigpu_small.csv"
    other.write_text("\n".join(pods.read_text().splitlines()[:13]) + "\n")  # the header and 12 pods
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    args = ["sim", "--nodes", str(nodes), "--pods", str(pods), "--pods", str(other), "--policy", "MostAllocated"]
    args += ["--seed", "1", "--seed", "2", "--jobs", "2", "--quiet", "-o", str(out), "--plot", str(png)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    records = json.loads(out.read_text())
    assert [(r["workload"], r["seed"]) for r in records] == [
        ("openb_pod_list_multigpu_tiny", 1),
        ("openb_pod_list_multigpu_tiny", 2),
        ("openb_pod_list_multigpu_small", 1),
        ("openb_pod_list_multigpu_small", 2),
    ]
    # each record is the run of its own list: the small list alone gives the same figures
    alone = _sim(nodes, other, tmp_path / "alone.json", "--jobs", "1")
    mine = [r for r in _without_wall(records) if r["workload"] == "openb_pod_list_multigpu_small"]
    assert mine == [r for r in _without_wall(alone) if r["policy"] == "MostAllocated"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    same = ["sim", "--nodes", str(nodes), "--pods", str(pods), "--pods", str(pods)]
    result = CliRunner().invoke(cli, same)
    assert result.exit_code == 2 and "two pod lists share the name 'openb_pod_list_multigpu_tiny'" in result.output


def test_timed_mode_refuses_a_multigpu_list(tmp_path: Path) -> None:
    nodes, pods = write_trace(tmp_path)
    result = CliRunner().invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--mode", "timed"])
    assert result.exit_code == 2
    text = result.output.replace("\n", "")
    assert "missing columns creation_time, deletion_time" in text
    assert "timed mode replays creation_time and deletion_time" in text and "use --mode static" in text


def test_a_failed_run_stops_the_sweep_with_its_message(tmp_path: Path) -> None:
    nodes, pods = write_trace(tmp_path, pods=12)
    good = RunSpec(nodes, pods, "static", builtin_policy("MostAllocated"), 1)
    bad = RunSpec(nodes, pods, "static", builtin_policy("Random"), 2, tie_break="first")
    with pytest.raises(SweepError, match=r"--tie-break: must be one of order, name, random, got 'first'"):
        run_local([good, bad], jobs=2)
    assert load_trace(nodes, pods, "static").gpus == 4 * (2 + 4 + 8)


def test_bad_jobs_exit_2(tmp_path: Path) -> None:
    nodes, pods = write_trace(tmp_path, pods=6)
    result = CliRunner().invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--jobs", "0"])
    assert result.exit_code == 2 and "--jobs: must be at least 1, got 0" in result.output


def test_ray_address_without_ray_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    nodes, pods = write_trace(tmp_path, pods=6)
    args = ["sim", "--nodes", str(nodes), "--pods", str(pods), "--ray-address", "local", "--quiet"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "pip install 'koordinator-py[ray]'" in result.output.replace("\n", "")


def test_ray_address_merges_the_serial_records(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (optional extra: pip install 'koordinator-py[ray]')")
    nodes, pods = write_trace(tmp_path)
    serial = _sim(nodes, pods, tmp_path / "serial.json", "--jobs", "1")
    on_ray = _sim(nodes, pods, tmp_path / "ray.json", "--ray-address", "local")
    assert _without_wall(on_ray) == _without_wall(serial)
