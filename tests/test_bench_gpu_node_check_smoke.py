"""Smoke test of bench/gpu_node_check.py with the fake NVML: the H200 capture and its nvidia-smi answer
match (exit 0, the documented JSON), a disagreeing nvidia-smi is a mismatch (exit 1), and a machine without
nvidia-ml-py is told so (exit 3, distinct from a mismatch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from tests.agent.fake_nvml import H200, H200_UUID, h200_sys

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_node_check.py"


def _run(*args: str, block_pynvml: bool = False) -> subprocess.CompletedProcess[str]:
    if block_pynvml:
        code = (
            "import runpy, sys; sys.modules['pynvml'] = None; "
            f"sys.argv = [{str(SCRIPT)!r}, *{list(args)!r}]; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
        )
        cmd = [sys.executable, "-c", code]
    else:
        cmd = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def test_h200_capture_matches_nvidia_smi(tmp_path: Path) -> None:
    h200_sys(tmp_path)
    proc = _run("--nvml-capture", str(H200 / "nvml.json"), "--smi-csv", str(H200 / "nvidia-smi-query-gpu.csv"),
                "--sys-root", str(tmp_path), "--node-name", "h200")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = orjson.loads(proc.stdout)
    assert set(report) == {"device", "nodeResources", "nodeLabels", "nvidiaSmi", "mismatches", "match", "discovery_ms"}
    assert report["match"] is True and report["mismatches"] == []
    assert report["discovery_ms"] > 0
    assert report["device"]["spec"]["devices"][0]["id"] == H200_UUID
    assert report["nodeResources"] == {
        "koordinator.sh/gpu": "100",
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "143771Mi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    assert report["nodeLabels"]["node.koordinator.sh/gpu-model"] == "H200"


def test_a_disagreeing_nvidia_smi_is_a_mismatch(tmp_path: Path) -> None:
    h200_sys(tmp_path / "sys")
    csv = (H200 / "nvidia-smi-query-gpu.csv").read_text().replace("143771", "81920").replace("580.159.04", "570.1")
    (tmp_path / "smi.csv").write_text(csv)
    proc = _run("--nvml-capture", str(H200 / "nvml.json"), "--smi-csv", str(tmp_path / "smi.csv"),
                "--sys-root", str(tmp_path / "sys"))  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    mismatches = orjson.loads(proc.stdout)["mismatches"]
    assert any("memory 143771 MiB, nvidia-smi 81920 MiB" in m for m in mismatches), mismatches
    assert any("driver label '580.159.04', nvidia-smi 570.1" in m for m in mismatches), mismatches


def test_without_a_gpu_it_says_so_with_its_own_exit_code(tmp_path: Path) -> None:
    proc = _run("--sys-root", str(tmp_path), block_pynvml=True)
    assert proc.returncode == 3
    assert "no GPU to check on this machine: nvidia-ml-py is not installed" in proc.stderr
    assert proc.stdout == ""
    bad = _run("--nvml-capture", str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and "missing.json" in bad.stderr
