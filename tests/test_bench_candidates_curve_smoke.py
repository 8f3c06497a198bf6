"""bench/candidates_curve.py: the medians it prints and the SVG it draws from real-control-plane runs (not timed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.candidates_curve import candidates, main, medians, read_runs


def _run(nodes: int, mode: str, cpu: float | None, rotation: int = 1) -> str:
    return json.dumps(
        {"nodes": nodes, "rotation": rotation, "mode": mode, "pods_per_s": 100.0, "extender_cpu_ms_per_pod": cpu}
    )


def test_candidates_follow_kube_schedulers_adaptive_percentage() -> None:
    assert [candidates(n) for n in (50, 100, 500, 1000, 2000, 5000)] == [50, 100, 230, 420, 680, 500]


def test_medians_svg_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs.jsonl"
    lines = [
        _run(500, "plain", None),
        _run(500, "noop", 1.0),
        _run(500, "prod", 1.6),
        _run(500, "prod", 1.8, 2),
        _run(500, "prod", 1.7, 3),
        _run(1000, "prod", 2.0),
        _run(1000, "koord", 2.4, 2),  # bench/rig_rotations.py's name for the same series
        _run(1000, "koord", 2.6, 3),
        _run(1000, "koord-before", 9.9),  # another build: drawn in no series
        _run(1000, "noop", 1.5),
        "# a comment line",
    ]
    runs.write_text("\n".join(lines) + "\n")
    assert medians(read_runs(runs)) == {"noop": {230: 1.0, 420: 1.5}, "prod": {230: 1.7, 420: 2.4}}
    out = tmp_path / "img" / "curve.svg"
    assert main([str(runs), str(out)]) == 0
    assert json.loads(capsys.readouterr().out) == {"noop": {"230": 1.0, "420": 1.5}, "prod": {"230": 1.7, "420": 2.4}}
    svg = out.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    again = tmp_path / "again.svg"
    assert main([str(runs), str(again)]) == 0 and again.read_text() == svg  # the same runs draw the same file
    capsys.readouterr()
    settled = tmp_path / "settled.jsonl"
    settled.write_text(
        "\n".join(
            [
                _run(500, "koord", 1.6)[:-1] + ', "settled": {"revision": 7, "db_mb": [9.0, 1.5]}}',
                _run(500, "koord", 9.9)[:-1] + ', "settled": null}',  # bench/rig_rotations.py --no-settle
                _run(500, "noop", 1.1)[:-1] + ', "settled": {"revision": 9, "db_mb": [9.0, 1.5]}}',
                _run(500, "noop", 9.9),  # a round before --settle
            ]
        )
    )
    assert main([str(settled), str(tmp_path / "settled.svg"), "--settled-only"]) == 0
    assert json.loads(capsys.readouterr().out) == {"prod": {"230": 1.6}, "noop": {"230": 1.1}}
    runs.write_text('{"nodes": 500}\n')
    assert main([str(runs), str(out)]) == 2
    assert "not a run object" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.jsonl"), str(out)]) == 2
