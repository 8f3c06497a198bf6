"""``koord sim`` end to end through the CLI: JSON records, PNG plot, and exit status 2 on bad input."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from tests.sim.conftest import NODES_CSV, PODS_CSV, require_trace, write_slice

KEYS = {"workload", "policy", "seed", "gpu_allocation_ratio", "frag_ratio", "failed_pods", "wall_seconds"}


def test_sim_writes_json_and_plot(tmp_path: Path) -> None:
    require_trace()
    nodes = write_slice(NODES_CSV, tmp_path / "nodes.csv", list(range(0, 1200, 60)))
    pods = write_slice(PODS_CSV, tmp_path / "pods.csv", list(range(150)))
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    args = ["sim", "--nodes", str(nodes), "--pods", str(pods), "--policy", "MostAllocated", "--policy", "random"]
    args += ["--seed", "1", "--seed", "2", "-o", str(out), "--plot", str(png), "--quiet"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    records = json.loads(out.read_text())
    assert [(r["policy"], r["seed"]) for r in records] == [
        ("MostAllocated", 1),
        ("MostAllocated", 2),
        ("Random", 1),
        ("Random", 2),
    ]
    for r in records:
        assert set(r) == KEYS and r["workload"] == "pods"
        assert set(r["gpu_allocation_ratio"]) == {"100", "130"} and set(r["frag_ratio"]) == {"70", "90"}
        assert 0 < r["gpu_allocation_ratio"]["100"] <= 100
        assert r["wall_seconds"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_inputs_exit_2_naming_file_line_field(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np0,1000,1024,1,500,A100,LS\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods)])
    assert result.exit_code == 2
    assert "pods.csv:2: field gpu_spec: unknown GPU model 'A100' (node models: P100)" in result.output.replace("\n", "")
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_spec,qos\np0,1000,1024,1,,LS\n")
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods)])
    assert result.exit_code == 2 and "missing column gpu_milli" in result.output
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np0,1000,1024,1,500,,LS\n")
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--policy", "Greedy"])
    assert result.exit_code == 2 and "unknown policy 'Greedy'" in result.output
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--mode", "replay"])
    assert result.exit_code == 2 and "--mode: must be one of static, timed" in result.output
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--inflate", "0", "--quiet"])
    assert result.exit_code == 2 and "--inflate: must be positive" in result.output
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--tie-break", "first"])
    assert result.exit_code == 2 and "--tie-break: must be one of order, name, random, got 'first'" in result.output
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--pod-popularity-threshold", "0"])
    assert result.exit_code == 2 and "--pod-popularity-threshold: must be in (0, 100], got 0" in result.output
    bad_config = tmp_path / "policy.yaml"
    bad_config.write_text("plugins: [{name: NoSuchPlugin}]\n")
    result = runner.invoke(cli, ["sim", "--nodes", str(nodes), "--pods", str(pods), "--config", str(bad_config)])
    assert result.exit_code == 2 and "invalid config" in result.output and "NoSuchPlugin" in result.output


def test_sim_without_the_sim_extra_exits_2_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    result = CliRunner().invoke(cli, ["sim", "--nodes", str(tmp_path / "n.csv"), "--pods", str(tmp_path / "p.csv")])
    assert result.exit_code == 2
    assert "pip install 'koordinator-py[sim]'" in result.output.replace("\n", "")


def test_tie_break_help_lists_every_choice_and_the_real_defaults() -> None:
    """``--tie-break``'s help names every tie-break :func:`check_tie_break` accepts and the defaults
    :func:`default_tie_break` applies (issue 28: it omitted ``order`` and named ``name`` the static default)."""
    from app.sim.experiment import default_tie_break
    from app.sim.run import TIE_BREAKS

    r = CliRunner().invoke(cli, ["sim", "--help"], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    # the option's help as one line: rich draws it in a box, wrapped within the option's column
    lines = [re.sub(r"^[\s│|]+|[\s│|]+$", "", ln) for ln in r.output.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("--tie-break"))
    block = [lines[start]]
    for ln in lines[start + 1 :]:
        if ln.lstrip().startswith("--") or not ln.strip() or set(ln.strip()) <= set("─╰╯"):
            break
        block.append(ln)
    text = " ".join(" ".join(block).split())
    for name in TIE_BREAKS:
        assert re.search(rf"\b{name}\b \(", text), (name, text)
    static, timed = default_tie_break("static"), default_tie_break("timed")
    assert f"Default: {static} in static mode, {timed} in timed mode." in text, text
