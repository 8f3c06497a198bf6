"""``koord sim --plot``: per pod list, the whole allocation curve, the 80-130 % zoom and the
fragmentation bars, with the published curves in their own styles and the y = x line labelled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.sim.published import Published
from app.sim.report import ZOOM, plot_workloads
from app.sim.run import SimResult

pytest.importorskip("matplotlib")


def _result(policy: str, seed: int, plateau: float) -> SimResult:
    curve = [min(float(p), plateau) for p in range(131)]
    return SimResult(policy=policy, seed=seed, workload="w", curve=curve, frag={70: 20.0 + seed, 90: 50.0})


def test_three_panels_per_pod_list_with_labelled_published_curves(tmp_path: Path, monkeypatch: Any) -> None:
    import matplotlib.figure

    saved: list[Any] = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, path, **kw: saved.append(fig))
    published = Published(
        allocation={("w", "06-FGD"): {1: [min(float(p), 95.0) for p in range(131)]}},
        frag_ratio={("w", "06-FGD"): {1: [10.0] * 131}},
    )
    runs = [_result("FragmentationAware", 1, 95.3), _result("MostAllocated", 1, 92.0)]
    plot_workloads([("w", runs, published), ("w2", runs, None)], tmp_path / "p.png")
    (fig,) = saved
    axes = fig.get_axes()
    assert len(axes) == 6  # two pod lists x (allocation, zoom, fragmentation)
    full, zoom, frag = axes[:3]
    labels = [t.get_text() for t in full.get_legend().get_texts()]
    assert "FragmentationAware: published FGD" in labels and "MostAllocated (koord sim)" in labels
    styles = {line.get_label(): line.get_linestyle() for line in full.get_lines()}
    assert styles["FragmentationAware (koord sim)"] == "-" and styles["FragmentationAware: published FGD"] == "--"
    assert any("y = x" in t.get_text() for t in full.texts)
    assert zoom.get_xlim() == ZOOM
    low, high = zoom.get_ylim()
    assert 75 < low < 80 and 95 < high <= 100.5  # the y range follows the curves over 80-130 %, not 0-100
    bars = [p.get_height() for p in frag.patches]
    assert 21.0 in bars and 10.0 in bars  # ours at 70 % and the published mean beside it
    assert [t.get_text() for t in frag.get_xticklabels()] == ["70 % arrived", "90 % arrived"]
